// SPDX-License-Identifier: BSD-3-Clause
#include "matrix.hpp"

#include <cblas.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace chol {

namespace {

[[noreturn]] void bad(const char* program, const std::string& option, const std::string& value,
                      const char* want) {
  std::fprintf(stderr, "%s: %s %s: %s (--help lists the options)\n", program, option.c_str(),
               value.c_str(), want);
  std::exit(2);
}

long number(const char* program, const std::string& option, const std::string& v, long lo) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < lo)
    bad(program, option, v, ("an integer, at least " + std::to_string(lo)).c_str());
  return x;
}

void usage(const char* program, bool tiled) {
  std::printf(
      "usage: %s -n N -b B [--grid PxQ] [--matrix spd|indefinite] [--no-check] [--reps R]%s\n"
      "  -n N          order of the matrix (default 2048)\n"
      "  -b B          %s (default 128); N must be a multiple of B\n"
      "  --grid PxQ    process grid, P x Q = ranks (default: the most square)\n"
      "  --matrix      spd (default) or indefinite (not positive definite: an error)\n"
      "  --no-check    skip gathering L and the residual ||A - L L^T||_F / ||A||_F\n"
      "  --reps R      factorize R times, report the median and the best (default 1)\n",
      program,
      tiled ? " [--engine weft|mpi] [--threads T] [--max-gets G]\n         [--drive "
              "auto|workers|driver]"
            : "",
      tiled ? "tile size" : "ScaLAPACK block size");
  if (tiled)
    std::printf(
        "  --engine      weft (default) or mpi (the MPI engine, in %s_mpich/_openmpi)\n"
        "  --threads T   worker threads per rank (default 1)\n"
        "  --max-gets G  tile fetches in flight per rank (default 8)\n"
        "  --drive D     who drives the engine while tasks run: workers (between tasks),\n"
        "                driver (the main thread), auto (default: workers when the engine\n"
        "                runs no thread of its own)\n",
        program);
  std::printf("prints: time, GFLOP/s, 'residual <value>' on rank 0; 'rank R: %s: ok' on each\n",
              program);
}

}  // namespace

args parse_args(int argc, char** argv, const char* program, bool tiled) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) bad(program, o, "(nothing)", "needs a value");
      return argv[++i];
    };
    if (o == "--help" || o == "-h") {
      usage(program, tiled);
      std::exit(0);
    } else if (o == "-n") {
      a.n = number(program, o, next(), 1);
    } else if (o == "-b") {
      a.block = number(program, o, next(), 1);
    } else if (o == "--grid") {
      const std::string v = next();
      if (std::sscanf(v.c_str(), "%dx%d", &a.p, &a.q) != 2 || a.p < 1 || a.q < 1)
        bad(program, o, v, "PxQ with P, Q >= 1");
    } else if (o == "--matrix") {
      const std::string v = next();
      if (v != "spd" && v != "indefinite") bad(program, o, v, "spd or indefinite");
      a.spd = v == "spd";
    } else if (o == "--no-check") {
      a.check = false;
    } else if (o == "--reps") {
      a.reps = int(number(program, o, next(), 1));
    } else if (tiled && o == "--engine") {
      a.engine = next();
      if (a.engine != "weft" && a.engine != "mpi") bad(program, o, a.engine, "weft or mpi");
    } else if (tiled && o == "--threads") {
      a.threads = int(number(program, o, next(), 1));
    } else if (tiled && o == "--drive") {
      a.drive = next();
      if (a.drive != "auto" && a.drive != "workers" && a.drive != "driver")
        bad(program, o, a.drive, "auto, workers or driver");
    } else if (tiled && o == "--max-gets") {
      a.max_gets = size_t(number(program, o, next(), 1));
    } else {
      bad(program, "option", o, "unknown");
    }
  }
  if (a.n % a.block)
    bad(program, "-n", std::to_string(a.n),
        ("not a multiple of the block size " + std::to_string(a.block)).c_str());
  return a;
}

bool settle_grid(args& a, int ranks, int me, const char* program) {
  if (a.p == 0) {
    a.p = 1;
    for (int p = 1; p * p <= ranks; ++p)
      if (ranks % p == 0) a.p = p;
    a.q = ranks / a.p;
  }
  if (a.p * a.q == ranks) return true;
  if (me == 0)
    std::fprintf(stderr, "%s: --grid %dx%d: %d processes, but %d ranks are running\n", program, a.p,
                 a.q, a.p * a.q, ranks);
  return false;
}

double element(const args& a, long i, long j) {
  if (i == j) {
    if (!a.spd && i == a.n / 2) return -double(a.n);
    return double(a.n);
  }
  uint64_t x = uint64_t(i < j ? i : j) * 0x9e3779b97f4a7c15ull ^ uint64_t(i < j ? j : i);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 32;
  return double(x >> 11) * 0x1.0p-53 - 0.5;
}

void fill(const args& a, long i0, long j0, long rows, long cols, double* out, long ld) {
  for (long j = 0; j < cols; ++j)
    for (long i = 0; i < rows; ++i) out[i + j * ld] = element(a, i0 + i, j0 + j);
}

double residual(const args& a, const double* l) {
  // R = A - L L^T in its lower triangle. dsyrk multiplies the whole operand, so L's strict
  // upper part (what POTRF left of A there) is cleared in a copy first.
  const long n = a.n;
  std::vector<double> lo(size_t(n) * size_t(n)), r(size_t(n) * size_t(n));
  for (long j = 0; j < n; ++j)
    for (long i = 0; i < n; ++i) {
      lo[size_t(i + j * n)] = i >= j ? l[i + j * n] : 0.0;
      r[size_t(i + j * n)] = i >= j ? element(a, i, j) : 0.0;
    }
  cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, int(n), int(n), -1.0, lo.data(), int(n), 1.0,
              r.data(), int(n));
  double num = 0, den = 0;
  for (long j = 0; j < n; ++j)
    for (long i = j; i < n; ++i) {
      const double w = i == j ? 1.0 : 2.0;  // the strict upper part mirrors the lower
      const double x = r[size_t(i + j * n)], y = element(a, i, j);
      num += w * x * x;
      den += w * y * y;
    }
  return std::sqrt(num / den);
}

double flops(long n) {
  const double x = double(n);
  return x * x * x / 3 + x * x / 2 + x / 6;
}

void one_blas_thread() {
  openblas_set_num_threads(1);
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace chol
