// SPDX-License-Identifier: BSD-3-Clause
// What both Cholesky programs share (weft-cholesky on the task engine, scalapack-cholesky on
// ScaLAPACK): the command line, the process grid, the generated matrix and the residual
// check. The matrix is a function of its indices, so every rank generates its own tiles or
// blocks without communication, and the check regenerates A to compare with L L^T.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace chol {

// The command line; `block` is the tile size (weft-cholesky) or ScaLAPACK's block size.
struct args {
  long n = 2048;
  long block = 128;
  int p = 0, q = 0;  // 0: the most square grid of the ranks
  std::string engine = "weft";
  int threads = 1;
  bool spd = true;  // --matrix indefinite: not positive definite (a bad input)
  bool check = true;
  int reps = 1;
  size_t max_gets = 8;
  std::string drive = "auto";  // who drives the engine: auto, workers or driver
};

// Parses the command line of `program` (a message and exit(2) on bad input); `tiled`: the
// options of weft-cholesky (--engine, --threads, --max-gets, --drive) are allowed.
args parse_args(int argc, char** argv, const char* program, bool tiled);

// Checks the grid against the ranks, choosing it when none was given; false after a message.
bool settle_grid(args& a, int ranks, int me, const char* program);

// A(i, j): symmetric entries in [-0.5, 0.5) from a hash of (min, max), plus n on the
// diagonal, which makes A diagonally dominant, hence positive definite. An indefinite
// matrix has -n at (n/2, n/2) instead: its leading minor of order n/2 + 1 is negative.
double element(const args& a, long i, long j);

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) of A into column-major `out` (leading
// dimension ld).
void fill(const args& a, long i0, long j0, long rows, long cols, double* out, long ld);

// ||A - L L^T||_F / ||A||_F for the n x n column-major lower-triangular `l` (its strict
// upper part is ignored).
double residual(const args& a, const double* l);

// Floating-point operations of a Cholesky factorization of order n.
double flops(long n);

double now_s();  // a monotonic clock

// One BLAS thread per worker (weft-cholesky) or per rank (ScaLAPACK), for every program
// alike: the parallelism is the program's own, never the BLAS library's.
void one_blas_thread();

}  // namespace chol
