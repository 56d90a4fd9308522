// SPDX-License-Identifier: BSD-3-Clause
// weft-cholesky: a tiled Cholesky factorization on the task engine (docs/cholesky.md), over
// the Weft engine or, in the builds made with an MPI's wrapper (weft-cholesky-<flavour>),
// the MPI engine, unchanged above the engine. Rank 0 prints the time (the slowest rank's),
// GFLOP/s, the tile flows' latency and `residual <value>`; every rank prints
// `rank R: weft-cholesky: ok` when the factorization succeeded and the residual is below
// 1e-12.
//   weft-cholesky -n N -b B [--grid PxQ] [--engine weft|mpi] [--threads T] [--reps R]
//                 [--matrix spd|indefinite] [--no-check] [--max-gets G]
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "engine/exec/open.hpp"
#include "tiled.hpp"

namespace {

const char* const program = "weft-cholesky";
constexpr double max_residual = 1e-12;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

// One factorization and its verdict (an engine error throws).
void factorize(weft::exec::executor& x, chol::tile_store& s, chol::verdict& v,
               std::vector<double>& latency) {
  s.generate();
  chol::factor_graph f(s);
  const weft::exec::run_stats st = x.run(f);
  latency.insert(latency.end(), st.flow_latency_us.begin(), st.flow_latency_us.end());
  chol::check_graph c(s, st.seconds, f.failed_minor());
  x.run(c);
  v = c.result();
}

// idle: what the executor's idle threads do (docs/cholesky.md): sleep on an oversubscribed
// machine (the engine's attribute), yield otherwise; drive: who drove the engine.
void print_results(const chol::args& a, const std::vector<double>& times,
                   std::vector<double>& latency, double residual, const char* idle,
                   const char* drive) {
  const double median = percentile(times, 0.5), best = percentile(times, 0);
  const double gf = chol::flops(a.n) / 1e9;
  const char* system = a.engine == "weft" ? "weft-engine" : "mpi-engine";
  std::printf("time %.4f s (median of %zu; best %.4f s)\n", median, times.size(), best);
  std::printf("gflops %.2f\n", gf / median);
  std::printf("flow latency p50 %.1f us p99 %.1f us (%zu remote tile flows)\n",
              percentile(latency, 0.5), percentile(latency, 0.99), latency.size());
  std::printf(
      "RESULT system=%s workload=cholesky n=%ld b=%ld grid=%dx%d threads=%d seconds=%.6f "
      "best=%.6f gflops=%.4f latency_p50_us=%.2f latency_p99_us=%.2f idle=%s drive=%s\n",
      system, a.n, a.block, a.p, a.q, a.threads, median, best, gf / median,
      percentile(latency, 0.5), percentile(latency, 0.99), idle, drive);
  if (residual >= 0)
    std::printf("residual %.3e\n", residual);
  else
    std::printf("residual not computed (--no-check)\n");
}

}  // namespace

int main(int argc, char** argv) {
  chol::args a = chol::parse_args(argc, argv, program, true);
  chol::one_blas_thread();
  weft_engine_t e = weft::exec::open_engine(a.engine, program, argc, argv);
  if (!e) return 1;
  const int me = weft_engine_rank_me(e), ranks = weft_engine_rank_n(e);
  int status = 0;
  if (!chol::settle_grid(a, ranks, me, program)) {
    weft::exec::close_engine(e, a.engine, program, me);
    return 2;
  }
  try {
    weft::exec::options o;
    o.workers = a.threads;
    o.max_gets = a.max_gets;
    weft::exec::drive_from_name(a.drive, o.drive);  // parse_args checked the name
    weft::exec::executor x(e, o);
    chol::tile_store s(a, me);
    std::vector<double> times, latency;
    chol::verdict v;
    for (int r = 0; r < a.reps && status == 0; ++r) {
      factorize(x, s, v, latency);
      times.push_back(v.seconds);
      if (v.failed_minor > 0) {
        if (me == 0)
          std::fprintf(stderr,
                       "%s: the matrix is not positive definite: its leading minor of order "
                       "%.0f is not positive (POTRF on rank %.0f)\n",
                       program, v.failed_minor, v.failed_rank);
        status = 1;
      } else if (a.check && !(v.residual < max_residual)) {
        if (me == 0)
          std::fprintf(stderr, "%s: residual %.3e is not below %.0e\n", program, v.residual,
                       max_residual);
        status = 1;
      }
    }
    weft_engine_attr_t attr{};
    weft_engine_get_attr(e, &attr);
    if (me == 0 && status == 0)
      print_results(a, times, latency, v.residual, attr.oversubscribed ? "sleep" : "yield",
                    x.workers_drive() ? "workers" : "driver");
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "rank %d: %s: %s\n", me, program, ex.what());
    status = 1;
  }
  std::fflush(stdout);
  if (!weft::exec::close_engine(e, a.engine, program, me)) status = 1;
  if (status == 0) std::printf("rank %d: %s: ok\n", me, program);
  return status;
}
