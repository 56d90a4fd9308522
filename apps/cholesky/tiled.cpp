// SPDX-License-Identifier: BSD-3-Clause
#include "tiled.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cstring>

namespace chol {

using weft::exec::flow_ref;
using weft::exec::task_key;

namespace {

// A task's key: its kind in the top 4 bits, then k, m and n in 20 bits each.
enum kind : uint64_t { potrf, trsm, syrk, gemm, stat, tile, judge_k, report };
task_key key(kind t, long k, long m = 0, long n = 0) {
  return uint64_t(t) << 60 | uint64_t(k) << 40 | uint64_t(m) << 20 | uint64_t(n);
}
kind kind_of(task_key t) {
  return kind(t >> 60);
}
long k_of(task_key t) {
  return long(t >> 40 & 0xfffff);
}
long m_of(task_key t) {
  return long(t >> 20 & 0xfffff);
}
long n_of(task_key t) {
  return long(t & 0xfffff);
}

}  // namespace

tile_store::tile_store(const args& a, int me) : a_(a), me_(me), nt_(a.n / a.block) {
  tiles_.resize(size_t(nt_ * nt_));
  for (long m = 0; m < nt_; ++m)
    for (long n = 0; n <= m; ++n)
      if (owner(m, n) == me) tiles_[size_t(m * nt_ + n)].resize(size_t(a.block * a.block));
}

void tile_store::generate() {
  for (long m = 0; m < nt_; ++m)
    for (long n = 0; n <= m; ++n)
      if (owner(m, n) == me_)
        fill(a_, m * a_.block, n * a_.block, a_.block, a_.block, at(m, n), a_.block);
}

// ---- the factorization -------------------------------------------------------------------

void factor_graph::local_tasks(int rank, std::vector<task_key>& out) const {
  for (long k = 0; k < nt_; ++k) {
    if (s_.owner(k, k) == rank) out.push_back(key(potrf, k));
    for (long m = k + 1; m < nt_; ++m) {
      if (s_.owner(m, k) == rank) out.push_back(key(trsm, k, m));
      if (s_.owner(m, m) == rank) out.push_back(key(syrk, k, m));
      for (long n = k + 1; n < m; ++n)
        if (s_.owner(m, n) == rank) out.push_back(key(gemm, k, m, n));
    }
  }
}

int factor_graph::rank_of(task_key t) const {
  switch (kind_of(t)) {
    case potrf: return s_.owner(k_of(t), k_of(t));
    case trsm: return s_.owner(m_of(t), k_of(t));
    case syrk: return s_.owner(m_of(t), m_of(t));
    default: return s_.owner(m_of(t), n_of(t));
  }
}

int factor_graph::priority(task_key t) const {
  const long k = k_of(t);
  switch (kind_of(t)) {
    case potrf: return int(4 * (nt_ - k) + 3);
    case trsm: return int(4 * (nt_ - k) + 2);
    case syrk: return int(4 * (nt_ - m_of(t)) + 1);  // feeds POTRF(m)
    default: return int(4 * (nt_ - n_of(t)));        // feeds TRSM(m, n)
  }
}

void factor_graph::inputs(task_key t, std::vector<flow_ref>& out) const {
  const long k = k_of(t), m = m_of(t), n = n_of(t);
  switch (kind_of(t)) {
    case potrf:
      if (k > 0) out.push_back({key(syrk, k - 1, k), 0});
      break;
    case trsm:
      out.push_back({key(potrf, k), 0});
      if (k > 0) out.push_back({key(gemm, k - 1, m, k), 0});
      break;
    case syrk:
      out.push_back({key(trsm, k, m), 0});
      if (k > 0) out.push_back({key(syrk, k - 1, m), 0});
      break;
    default:
      out.push_back({key(trsm, k, m), 0});
      out.push_back({key(trsm, k, n), 0});
      if (k > 0) out.push_back({key(gemm, k - 1, m, n), 0});
  }
}

size_t factor_graph::output_size(task_key t, uint32_t) const {
  const kind x = kind_of(t);
  return x == potrf || x == trsm ? size_t(b_ * b_) * sizeof(double) : 0;  // else in place
}

void factor_graph::successors(task_key t, uint32_t, std::vector<task_key>& out) const {
  const long k = k_of(t), m = m_of(t), n = n_of(t);
  switch (kind_of(t)) {
    case potrf:
      for (long i = k + 1; i < nt_; ++i) out.push_back(key(trsm, k, i));
      break;
    case trsm:  // L(m, k) is the left operand of row m's updates, the right of column m's
      out.push_back(key(syrk, k, m));
      for (long j = k + 1; j < m; ++j) out.push_back(key(gemm, k, m, j));
      for (long i = m + 1; i < nt_; ++i) out.push_back(key(gemm, k, i, m));
      break;
    case syrk: out.push_back(k + 1 < m ? key(syrk, k + 1, m) : key(potrf, m)); break;
    default: out.push_back(k + 1 < n ? key(gemm, k + 1, m, n) : key(trsm, n, m));
  }
}

void factor_graph::run(task_key t, const std::vector<const void*>& in,
                       const std::vector<void*>& out) {
  const long k = k_of(t), m = m_of(t), n = n_of(t);
  const int b = int(b_);
  const size_t bytes = size_t(b) * size_t(b) * sizeof(double);
  const auto* l0 = in.empty() ? nullptr : static_cast<const double*>(in[0]);
  switch (kind_of(t)) {
    case potrf: {
      double* a = s_.at(k, k);
      if (const int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', b, a, b); info > 0) {
        long none = 0;  // the first failure found here is the one reported
        failed_.compare_exchange_strong(none, k * b_ + info);
      }
      std::memcpy(out[0], a, bytes);
      break;
    }
    case trsm: {
      double* a = s_.at(m, k);
      cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b, b, 1.0, l0, b,
                  a, b);
      std::memcpy(out[0], a, bytes);
      break;
    }
    case syrk:
      cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0, l0, b, 1.0, s_.at(m, m), b);
      break;
    default:
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0, l0, b,
                  static_cast<const double*>(in[1]), b, 1.0, s_.at(m, n), b);
  }
}

// ---- the outcome, gathered and judged at rank 0 ------------------------------------------
// STAT(r) on every rank and, when checking, TILE(m, n) on each tile's owner feed JUDGE on
// rank 0, whose verdict goes to REPORT(r) on every rank.

struct stat_msg {
  double seconds, failed_minor;
};

void check_graph::local_tasks(int rank, std::vector<task_key>& out) const {
  out.push_back(key(stat, 0, 0, uint64_t(rank)));
  out.push_back(key(report, 0, 0, uint64_t(rank)));
  if (rank == 0) out.push_back(key(judge_k, 0));
  if (!s_.spec().check) return;
  for (long m = 0; m < nt_; ++m)
    for (long n = 0; n <= m; ++n)
      if (s_.owner(m, n) == rank) out.push_back(key(tile, 0, m, n));
}

int check_graph::rank_of(task_key t) const {
  switch (kind_of(t)) {
    case stat:
    case report: return int(n_of(t));
    case tile: return s_.owner(m_of(t), n_of(t));
    default: return 0;
  }
}

void check_graph::inputs(task_key t, std::vector<flow_ref>& out) const {
  if (kind_of(t) == report) out.push_back({key(judge_k, 0), 0});
  if (kind_of(t) != judge_k) return;
  for (int r = 0; r < ranks(); ++r) out.push_back({key(stat, 0, 0, uint64_t(r)), 0});
  if (!s_.spec().check) return;
  for (long m = 0; m < nt_; ++m)
    for (long n = 0; n <= m; ++n) out.push_back({key(tile, 0, m, n), 0});
}

size_t check_graph::output_size(task_key t, uint32_t) const {
  switch (kind_of(t)) {
    case stat: return sizeof(stat_msg);
    case tile: return size_t(s_.b() * s_.b()) * sizeof(double);
    case judge_k: return sizeof(verdict);
    default: return 0;
  }
}

void check_graph::successors(task_key t, uint32_t, std::vector<task_key>& out) const {
  if (kind_of(t) == stat || kind_of(t) == tile) out.push_back(key(judge_k, 0));
  if (kind_of(t) == judge_k)
    for (int r = 0; r < ranks(); ++r) out.push_back(key(report, 0, 0, uint64_t(r)));
}

void check_graph::run(task_key t, const std::vector<const void*>& in,
                      const std::vector<void*>& out) {
  switch (kind_of(t)) {
    case stat: {
      const stat_msg s{seconds_, double(failed_)};
      std::memcpy(out[0], &s, sizeof(s));
      break;
    }
    case tile: std::memcpy(out[0], s_.at(m_of(t), n_of(t)), output_size(t, 0)); break;
    case judge_k: {
      verdict v;
      judge(in, v);
      std::memcpy(out[0], &v, sizeof(v));
      break;
    }
    default: std::memcpy(&result_, in[0], sizeof(result_));
  }
}

void check_graph::judge(const std::vector<const void*>& in, verdict& v) const {
  const int p = ranks();
  for (int r = 0; r < p; ++r) {
    stat_msg s;
    std::memcpy(&s, in[size_t(r)], sizeof(s));
    v.seconds = std::max(v.seconds, s.seconds);
    if (s.failed_minor > 0 && (v.failed_minor == 0 || s.failed_minor < v.failed_minor)) {
      v.failed_minor = s.failed_minor;
      v.failed_rank = r;
    }
  }
  if (!s_.spec().check || v.failed_minor > 0) return;
  const long n = s_.spec().n, b = s_.b();
  std::vector<double> l(size_t(n) * size_t(n), 0.0);
  size_t i = size_t(p);
  for (long tm = 0; tm < nt_; ++tm)
    for (long tn = 0; tn <= tm; ++tn, ++i) {
      const auto* src = static_cast<const double*>(in[i]);
      for (long c = 0; c < b; ++c)
        std::memcpy(&l[size_t((tn * b + c) * n + tm * b)], src + c * b, size_t(b) * sizeof(double));
    }
  v.residual = residual(s_.spec(), l.data());
}

}  // namespace chol
