// SPDX-License-Identifier: BSD-3-Clause
// Weft bootstrapped from MPI (<weft/mpi.hpp>) in a program that keeps using MPI: ranks and
// hosts agree, and Weft's and MPI's messages with the same peers and tags never mix.
// Built with each MPI's own mpicxx by tests/scripts/mpi.sh.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <weft/mpi.hpp>

static int failures = 0, checks = 0;
#define CHECK(c)                                                              \
  do {                                                                        \
    ++checks;                                                                 \
    if (!(c)) {                                                               \
      ++failures;                                                             \
      fprintf(stderr, "CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #c); \
    }                                                                         \
  } while (0)

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int me, n, local_me, local_n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_me);
  MPI_Comm_size(node, &local_n);
  MPI_Comm_free(&node);

  weft::use_mpi_bootstrap(MPI_COMM_WORLD);
  weft::g_runtime_init();
  CHECK(weft::get_rank_me() == me);
  CHECK(weft::get_rank_n() == n);
  CHECK(weft::get_rank_local() == local_me && weft::get_rank_local_n() == local_n);
  try {
    weft::set_bootstrap(weft::bootstrap_ops_t{});
    CHECK(!"set_bootstrap accepted while a runtime is active");
  } catch (const weft::fatal_error& e) {
    CHECK(std::string(e.what()).find("a runtime is active") != std::string::npos);
  }

  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  weft::comp_t sync = weft::alloc_sync();
  for (int round = 0; round < 200; ++round) {
    // The same peers and tag through both libraries, posted in opposite orders.
    long weft_in = -1, mpi_in = -1, weft_out = 1000000L * round + me, mpi_out = -weft_out - 1;
    MPI_Request rq[2];
    MPI_Irecv(&mpi_in, 1, MPI_LONG, from, 7, MPI_COMM_WORLD, &rq[0]);
    weft::status_t r = weft::post_recv(from, &weft_in, sizeof(weft_in), 7, sync);
    MPI_Isend(&mpi_out, 1, MPI_LONG, to, 7, MPI_COMM_WORLD, &rq[1]);
    weft::status_t s;
    do {
      s = weft::post_send(to, &weft_out, sizeof(weft_out), 7, {});
      weft::progress();
    } while (s.error.is_retry());
    if (r.error.is_posted()) weft::sync_wait(sync, &r);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(weft_in == 1000000L * round + from);
    CHECK(mpi_in == -(1000000L * round + from) - 1);
    long sum = 0, mine = round + me;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == long(n) * round + long(n) * (n - 1) / 2);
  }
  weft::free_comp(&sync);
  weft::barrier();
  weft::g_runtime_fina();
  MPI_Finalize();
  if (failures) {
    fprintf(stderr, "rank %d: mpi_coexist: %d of %d checks failed\n", me, failures, checks);
    return 1;
  }
  printf("rank %d: mpi_coexist: all %d checks passed\n", me, checks);
  return 0;
}
