// SPDX-License-Identifier: BSD-3-Clause
// scalapack-cholesky-<flavour>: the library a user would call instead of weft-cholesky,
// ScaLAPACK's pdpotrf on the same generated matrix (matrix.hpp), 2-D block-cyclic with
// block size -b over a P x Q grid (row-major ranks, as weft-cholesky places tiles). The
// time is the slowest rank's, between barriers; the check gathers L to rank 0 with a sum
// reduction of each rank's blocks (memory n^2 per rank: a check for moderate n).
//   scalapack-cholesky -n N -b NB [--grid PxQ] [--reps R] [--matrix spd|indefinite]
//                      [--no-check]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "matrix.hpp"

extern "C" {
void Cblacs_get(int context, int what, int* value);
void Cblacs_gridinit(int* context, const char* order, int rows, int cols);
void Cblacs_gridinfo(int context, int* rows, int* cols, int* row, int* col);
void Cblacs_gridexit(int context);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* context, const int* lld, int* info);
void pdpotrf_(const char* uplo, const int* n, double* a, const int* ia, const int* ja,
              const int* desc, int* info);
}

namespace {

const char* const program = "scalapack-cholesky";

// This rank's share of the matrix, ScaLAPACK's local layout.
struct local_matrix {
  int n, nb, p, q, row, col, rows, cols, lld;
  std::vector<double> a;
  long global_row(int li) const { return (long(li / nb) * p + row) * nb + li % nb; }
  long global_col(int lj) const { return (long(lj / nb) * q + col) * nb + lj % nb; }
  void generate(const chol::args& x) {
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i)
        a[size_t(i) + size_t(j) * size_t(lld)] = chol::element(x, global_row(i), global_col(j));
  }
};

// L gathered at rank 0 and its residual there, sent to every rank.
double check(const chol::args& x, const local_matrix& m, int me) {
  std::vector<double> full(size_t(x.n) * size_t(x.n), 0.0), sum;
  for (int j = 0; j < m.cols; ++j)
    for (int i = 0; i < m.rows; ++i) {
      const long gi = m.global_row(i), gj = m.global_col(j);
      if (gi >= gj) full[size_t(gi + gj * x.n)] = m.a[size_t(i) + size_t(j) * size_t(m.lld)];
    }
  if (me == 0) sum.resize(full.size());
  MPI_Reduce(full.data(), sum.data(), int(full.size()), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  double r = me == 0 ? chol::residual(x, sum.data()) : 0;
  MPI_Bcast(&r, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  chol::args x = chol::parse_args(argc, argv, program, false);
  chol::one_blas_thread();
  MPI_Init(&argc, &argv);
  int me = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (!chol::settle_grid(x, ranks, me, program)) {
    MPI_Finalize();
    return 2;
  }
  int ctx = 0;
  Cblacs_get(0, 0, &ctx);
  Cblacs_gridinit(&ctx, "Row", x.p, x.q);
  local_matrix m{int(x.n), int(x.block), x.p, x.q, 0, 0, 0, 0, 0, {}};
  Cblacs_gridinfo(ctx, &m.p, &m.q, &m.row, &m.col);
  const int zero = 0, one = 1;
  m.rows = numroc_(&m.n, &m.nb, &m.row, &zero, &m.p);
  m.cols = numroc_(&m.n, &m.nb, &m.col, &zero, &m.q);
  m.lld = std::max(1, m.rows);
  m.a.resize(size_t(m.lld) * size_t(std::max(1, m.cols)));
  int desc[9], info = 0;
  descinit_(desc, &m.n, &m.n, &m.nb, &m.nb, &zero, &zero, &ctx, &m.lld, &info);
  int status = 0;
  std::vector<double> times;
  double r = -1;
  for (int rep = 0; rep < x.reps && status == 0; ++rep) {
    m.generate(x);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = chol::now_s();
    pdpotrf_("L", &m.n, m.a.data(), &one, &one, desc, &info);
    double t = chol::now_s() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(t);
    if (info != 0) {
      if (me == 0)
        std::fprintf(stderr,
                     "%s: the matrix is not positive definite: pdpotrf info %d (the leading "
                     "minor of that order is not positive)\n",
                     program, info);
      status = 1;
    } else if (x.check) {
      r = check(x, m, me);
      if (!(r < 1e-12)) {
        if (me == 0) std::fprintf(stderr, "%s: residual %.3e is not below 1e-12\n", program, r);
        status = 1;
      }
    }
  }
  if (me == 0 && status == 0) {
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2], gf = chol::flops(x.n) / 1e9;
    std::printf("time %.4f s (median of %zu; best %.4f s)\ngflops %.2f\n", median, times.size(),
                times[0], gf / median);
    std::printf(
        "RESULT system=scalapack workload=cholesky n=%ld b=%ld grid=%dx%d threads=1 "
        "seconds=%.6f best=%.6f gflops=%.4f\n",
        x.n, x.block, x.p, x.q, median, times[0], gf / median);
    if (x.check)
      std::printf("residual %.3e\n", r);
    else
      std::printf("residual not computed (--no-check)\n");
  }
  std::fflush(stdout);
  Cblacs_gridexit(ctx);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (status == 0) std::printf("rank %d: %s: ok\n", me, program);
  return status;
}
