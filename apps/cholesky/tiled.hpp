// SPDX-License-Identifier: BSD-3-Clause
// The tiled right-looking Cholesky as task graphs of the dataflow executor (engine/exec):
// POTRF(k), TRSM(m, k), SYRK(m, k) and GEMM(m, n, k) on b x b tiles, 2-D block-cyclic over a
// P x Q grid, each task on the rank owning the tile it writes. Every update of a tile
// happens at its owner, so the chain of versions of a tile is a local control flow (the
// tile is updated in place in the rank's store); only the factored tiles, L(k, k) from
// POTRF and L(m, k) from TRSM, are data flows, and those crossing ranks go ACTIVATE ->
// GET DATA -> put. Priorities put the critical path first: a task ranks by the step whose
// panel it feeds, POTRF above TRSM above SYRK above GEMM within a step.
// A second graph gathers the outcome to rank 0 (every rank's time and failed pivot, and,
// when checking, every tile of L), where the residual is computed, and sends the verdict
// back to every rank.
#pragma once

#include <atomic>
#include <vector>

#include "engine/exec/executor.hpp"
#include "matrix.hpp"

namespace chol {

// This rank's tiles of A, overwritten by L.
class tile_store {
 public:
  tile_store(const args& a, int me);
  void generate();  // A's tiles, again before every factorization
  double* at(long m, long n) { return tiles_[size_t(m * nt_ + n)].data(); }
  int owner(long m, long n) const { return int((m % a_.p) * a_.q + n % a_.q); }
  long nt() const { return nt_; }
  long b() const { return a_.block; }
  const args& spec() const { return a_; }
  int me() const { return me_; }

 private:
  const args& a_;
  int me_;
  long nt_;
  std::vector<std::vector<double>> tiles_;  // row-major over (m, n), empty where not ours
};

class factor_graph final : public weft::exec::graph {
 public:
  explicit factor_graph(tile_store& s) : s_(s), nt_(s.nt()), b_(s.b()) {}
  void local_tasks(int rank, std::vector<weft::exec::task_key>& out) const override;
  int rank_of(weft::exec::task_key t) const override;
  int priority(weft::exec::task_key t) const override;
  void inputs(weft::exec::task_key t, std::vector<weft::exec::flow_ref>& out) const override;
  uint32_t noutputs(weft::exec::task_key) const override { return 1; }
  size_t output_size(weft::exec::task_key t, uint32_t) const override;
  void successors(weft::exec::task_key t, uint32_t,
                  std::vector<weft::exec::task_key>& out) const override;
  void run(weft::exec::task_key t, const std::vector<const void*>& in,
           const std::vector<void*>& out) override;
  // The order of the first leading minor found not positive here (0: none).
  long failed_minor() const { return failed_.load(); }
  void reset() { failed_ = 0; }

 private:
  tile_store& s_;
  const long nt_, b_;
  std::atomic<long> failed_{0};
};

// What rank 0 found, sent to every rank.
struct verdict {
  double seconds = 0;    // the slowest rank's factorization time
  double residual = -1;  // -1: not computed
  double failed_minor = 0;
  double failed_rank = -1;
};

class check_graph final : public weft::exec::graph {
 public:
  check_graph(tile_store& s, double seconds, long failed_minor)
      : s_(s), nt_(s.nt()), seconds_(seconds), failed_(failed_minor) {}
  void local_tasks(int rank, std::vector<weft::exec::task_key>& out) const override;
  int rank_of(weft::exec::task_key t) const override;
  void inputs(weft::exec::task_key t, std::vector<weft::exec::flow_ref>& out) const override;
  uint32_t noutputs(weft::exec::task_key) const override { return 1; }
  size_t output_size(weft::exec::task_key t, uint32_t) const override;
  void successors(weft::exec::task_key t, uint32_t,
                  std::vector<weft::exec::task_key>& out) const override;
  void run(weft::exec::task_key t, const std::vector<const void*>& in,
           const std::vector<void*>& out) override;
  const verdict& result() const { return result_; }

 private:
  int ranks() const { return s_.spec().p * s_.spec().q; }
  void judge(const std::vector<const void*>& in, verdict& v) const;
  tile_store& s_;
  const long nt_;
  const double seconds_;
  const long failed_;
  verdict result_;
};

}  // namespace chol
