/* SPDX-License-Identifier: BSD-3-Clause */
/* The PaRSEC pattern of seed 002 section 5.3 / seed 000 section 4.2.3, under one MPI: rank
 * 0 keeps N persistent receives outstanding (one per tag) and completes them
 *   testsome: the runtime's own loop: MPI_Testsome over the whole array, then each finished
 *     index's callback from a parallel array, which restarts its receive;
 *   continue: each receive carries a continuation (MPIX_Continue) whose callback restarts
 *     it and attaches itself again; the loop is one MPI_Test of the continuation request.
 *   enqueue: the same with the continuation request made with the proposal's info key
 *     mpi_continue_enqueue_complete, as a runtime that re-attaches from its callbacks would
 *     make it: an attach then never tests (nor progresses MPI); the next test does.
 * Rank 1 sends rounds of N 8-byte messages (one per tag), each round once rank 0 says it
 * completed the previous one. Rank 0 prints the cost per completed receive.
 *   mpiexec -n 2 mpix_bench_<flavour> [--n N] [--msgs M] [--reps R]
 *       [--api testsome|continue|enqueue|both|all]   (both: the first two; all: the three)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpix_continue.h"

#define MPIX_STR2(x) #x
#define MPIX_STR(x) MPIX_STR2(x)

enum { READY_TAG = 1 << 20 };

typedef struct {
  MPI_Status st;
  MPI_Request* req; /* the persistent receive */
  long* done;       /* completions so far */
  MPI_Request cr;
} slot_t;

/* The Testsome variant's callbacks: a parallel array indexed like the requests. */
static void on_recv(MPI_Request* req, long* done) {
  MPI_Start(req);
  ++*done;
}

static void on_cont(MPI_Status* st, void* data) {
  slot_t* s = data;
  int cancelled = 0;
  MPI_Test_cancelled(st, &cancelled);
  if (cancelled) return; /* the end of the run (Listing 4) */
  on_recv(s->req, s->done);
  int flag;
  MPIX_Continue(s->req, &flag, on_cont, s, &s->st, s->cr);
  if (flag) on_cont(&s->st, s); /* complete already: run it here */
}

enum api { API_TESTSOME, API_CONTINUE, API_ENQUEUE };
static const char* const api_names[] = {"testsome", "mpix_continue", "mpix_continue_enqueue"};

static double receiver(int n, long msgs, enum api api) {
  const int use_cont = api != API_TESTSOME;
  MPI_Request* reqs = malloc(sizeof(*reqs) * (size_t)n);
  long* bufs = calloc((size_t)n, sizeof(long));
  slot_t* slots = malloc(sizeof(*slots) * (size_t)n);
  int* idx = malloc(sizeof(int) * (size_t)n);
  MPI_Status* sts = malloc(sizeof(*sts) * (size_t)n);
  MPI_Request cr = MPI_REQUEST_NULL;
  long done = 0;
  MPI_Info info = MPI_INFO_NULL;
  if (api == API_ENQUEUE) {
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_continue_enqueue_complete", "true");
  }
  if (use_cont) MPIX_Continue_init(&cr, info);
  if (info != MPI_INFO_NULL) MPI_Info_free(&info);
  for (int i = 0; i < n; ++i) {
    MPI_Recv_init(&bufs[i], 1, MPI_LONG, 1, i, MPI_COMM_WORLD, &reqs[i]);
    MPI_Start(&reqs[i]);
    slots[i].req = &reqs[i];
    slots[i].done = &done;
    slots[i].cr = cr;
    int flag;
    if (use_cont) MPIX_Continue(&reqs[i], &flag, on_cont, &slots[i], &slots[i].st, cr);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  long round_end = n;
  char ready = 0;
  while (done < msgs) {
    if (use_cont) {
      int flag;
      MPI_Test(&cr, &flag, MPI_STATUS_IGNORE); /* the whole progress loop */
    } else {
      int out = 0;
      MPI_Testsome(n, reqs, &out, idx, sts);
      for (int k = 0; k < out && out != MPI_UNDEFINED; ++k) on_recv(&reqs[idx[k]], &done);
    }
    if (done >= round_end && done < msgs) {
      MPI_Send(&ready, 0, MPI_CHAR, 1, READY_TAG, MPI_COMM_WORLD);
      round_end += n;
    }
  }
  double t = MPI_Wtime() - t0;
  MPI_Barrier(MPI_COMM_WORLD); /* the sender stopped: every receive is still started */
  for (int i = 0; i < n; ++i) {
    MPI_Cancel(&reqs[i]);
    if (!use_cont) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
  }
  if (use_cont) {
    int flag = 0;
    while (!flag) MPI_Test(&cr, &flag, MPI_STATUS_IGNORE); /* the cancelled ones run */
    MPI_Request_free(&cr);
  }
  for (int i = 0; i < n; ++i) MPI_Request_free(&reqs[i]);
  free(reqs);
  free(bufs);
  free(slots);
  free(idx);
  free(sts);
  return t / (double)msgs * 1e9;
}

static void sender(int n, long msgs) {
  long v = 1;
  char ready;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long sent = 0; sent < msgs;) {
    for (int i = 0; i < n && sent < msgs; ++i, ++sent)
      MPI_Send(&v, 1, MPI_LONG, 0, i, MPI_COMM_WORLD);
    if (sent < msgs) MPI_Recv(&ready, 0, MPI_CHAR, 0, READY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  int n = 30, reps = 3, me, size, provided, first = 0, last = 1;
  long msgs = 300000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--n"))
      n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--msgs"))
      msgs = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--api")) {
      const char* v = argv[i + 1];
      first = !strcmp(v, "continue") ? API_CONTINUE : !strcmp(v, "enqueue") ? API_ENQUEUE : 0;
      last = !strcmp(v, "testsome")                         ? API_TESTSOME
             : !strcmp(v, "continue") || !strcmp(v, "both") ? API_CONTINUE
                                                            : API_ENQUEUE;
      if (strcmp(v, "testsome") && strcmp(v, "continue") && strcmp(v, "enqueue") &&
          strcmp(v, "both") && strcmp(v, "all"))
        n = 0; /* the usage message below */
    }
  }
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2 || n < 1 || n > 1 << 20 || msgs < n || reps < 1) {
    if (me == 0)
      fprintf(stderr,
              "usage: mpiexec -n 2 mpix_bench [--n N] [--msgs M] [--reps R] [--api "
              "testsome|continue|enqueue|both|all]\n");
    MPI_Finalize();
    return 2;
  }
  for (int api = first; api <= last; ++api) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      if (me == 0) {
        double ns = receiver(n, msgs, (enum api)api);
        if (ns < best) best = ns;
      } else {
        sender(n, msgs);
      }
    }
    if (me == 0)
      printf(
          "RESULT system=%s api=%s mode=process threads=1 resources=n%d workload=completion "
          "size=8 value=%.1f unit=ns\n",
          MPIX_STR(MPIX_BENCH_FLAVOUR), api_names[api], n, best);
  }
  MPI_Finalize();
  return 0;
}
