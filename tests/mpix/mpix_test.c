/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPIX_Continue library on 2 ranks, each semantic of the proposal with its observable:
 * flags and statuses, MPI_REQUEST_NULL after attach, persistent requests left usable,
 * poll-only continuations never run by other MPI calls, max_poll per test, enqueue-complete,
 * cancellation (Listing 4), a continuation request inside MPI_Waitall with ordinary
 * requests, release of an active request, operations completing out of attach order, more
 * operations than one test looks at, 4 threads attaching, and bad input. Prints
 * "rank R: mpix: all N checks passed". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpix_continue.h"

static int checks, failures, me, peer;
#define CHECK(c)                                                                   \
  do {                                                                             \
    ++checks;                                                                      \
    if (!(c)) {                                                                    \
      ++failures;                                                                  \
      fprintf(stderr, "rank %d: CHECK failed at line %d: %s\n", me, __LINE__, #c); \
    }                                                                              \
  } while (0)

static atomic_int runs;
static void count_cb(MPI_Status* st, void* data) {
  (void)st;
  (void)data;
  atomic_fetch_add(&runs, 1);
}

static int cancelled_seen;
static void cancel_cb(MPI_Status* st, void* data) { /* Listing 4 */
  int c = 0;
  MPI_Test_cancelled(st, &c);
  *(int*)data = c;
  cancelled_seen = 1;
}

static void test_until(MPI_Request* cr) {
  int flag = 0;
  while (!flag) MPI_Test(cr, &flag, MPI_STATUS_IGNORE);
}

static void basics(void) {
  MPI_Request cr;
  CHECK(MPIX_Continue_init(&cr, MPI_INFO_NULL) == MPI_SUCCESS);
  int flag = -1;
  CHECK(MPI_Test(&cr, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag == 1); /* idle */
  int in[2] = {0, 0}, out[2] = {me + 10, me + 20};
  MPI_Request r[2];
  MPI_Status st[2];
  MPI_Irecv(in, 2, MPI_INT, peer, 5, MPI_COMM_WORLD, &r[0]);
  /* The peer sends only after the barrier: not complete at attach. */
  CHECK(MPIX_Continueall(1, r, &flag, count_cb, NULL, st, cr) == MPI_SUCCESS && flag == 0);
  CHECK(r[0] == MPI_REQUEST_NULL); /* released to the library */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Send(out, 2, MPI_INT, peer, 5, MPI_COMM_WORLD);
  test_until(&cr);
  CHECK(atomic_load(&runs) == 1);
  CHECK(in[0] == peer + 10 && in[1] == peer + 20);
  int n = -1;
  MPI_Get_count(&st[0], MPI_INT, &n);
  CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == 5 && n == 2); /* set before the cb */
  /* Six operations, beyond those a continuation holds inline: each status set. */
  int six[6], sent[6];
  MPI_Request r6[6];
  MPI_Status st6[6];
  for (int i = 0; i < 3; ++i) MPI_Irecv(&six[i], 1, MPI_INT, peer, 30 + i, MPI_COMM_WORLD, &r6[i]);
  for (int i = 3; i < 6; ++i) {
    sent[i] = 100 * me + i;
    MPI_Isend(&sent[i], 1, MPI_INT, peer, 33 + i, MPI_COMM_WORLD, &r6[i]);
  }
  CHECK(MPIX_Continueall(6, r6, &flag, count_cb, NULL, st6, cr) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < 3; ++i) {
    int got;
    MPI_Recv(&got, 1, MPI_INT, peer, 36 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == 100 * peer + 3 + i);
    sent[i] = 100 * me + i;
    MPI_Send(&sent[i], 1, MPI_INT, peer, 30 + i, MPI_COMM_WORLD);
  }
  if (!flag) test_until(&cr);
  CHECK(atomic_load(&runs) == 2 || flag);
  for (int i = 0; i < 3; ++i)
    CHECK(six[i] == 100 * peer + i && st6[i].MPI_TAG == 30 + i && st6[i].MPI_SOURCE == peer);
  for (int i = 0; i < 6; ++i) CHECK(r6[i] == MPI_REQUEST_NULL);
  atomic_store(&runs, 1);
  /* Complete at attach: the flag, the status, no callback. */
  MPI_Irecv(in, 1, MPI_INT, me, 7, MPI_COMM_WORLD, &r[0]);
  MPI_Send(out, 1, MPI_INT, me, 7, MPI_COMM_WORLD); /* eager: delivered when it returns */
  MPI_Status s1;
  const int runs_before = atomic_load(&runs);
  CHECK(MPIX_Continue(&r[0], &flag, count_cb, NULL, &s1, cr) == MPI_SUCCESS);
  CHECK(r[0] == MPI_REQUEST_NULL);
  if (flag)
    CHECK(s1.MPI_TAG == 7 && atomic_load(&runs) == runs_before);
  else
    test_until(&cr);
  /* Persistent: left usable, and started again. */
  MPI_Request p;
  MPI_Recv_init(in, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, &p);
  for (int round = 0; round < 3; ++round) {
    MPI_Start(&p);
    r[0] = p;
    CHECK(MPIX_Continue(&r[0], &flag, count_cb, NULL, MPI_STATUS_IGNORE, cr) == MPI_SUCCESS);
    CHECK(r[0] == p && flag == 0); /* a persistent request stays the program's */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Send(&out[0], 1, MPI_INT, peer, 8, MPI_COMM_WORLD);
    test_until(&cr);
    CHECK(in[0] == peer + 10);
  }
  /* Cancellation as in Listing 4: a persistent receive cancelled through its handle. */
  int was_cancelled = -1;
  MPI_Start(&p);
  MPI_Status cs;
  CHECK(MPIX_Continue(&p, &flag, cancel_cb, &was_cancelled, &cs, cr) == MPI_SUCCESS && !flag);
  MPI_Cancel(&p);
  test_until(&cr);
  CHECK(cancelled_seen && was_cancelled == 1);
  MPI_Request_free(&p);
  MPI_Request_free(&cr);
  CHECK(cr == MPI_REQUEST_NULL);
}

static void options(void) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "mpi_continue_poll_only", "true");
  MPI_Info_set(info, "mpi_continue_enqueue_complete", "true");
  MPI_Info_set(info, "mpi_continue_max_poll", "2");
  MPI_Request cr, other, r;
  CHECK(MPIX_Continue_init(&cr, info) == MPI_SUCCESS);
  CHECK(MPIX_Continue_init(&other, MPI_INFO_NULL) == MPI_SUCCESS);
  int v = 0, flag = -1;
  const int before = atomic_load(&runs);
  for (int i = 0; i < 5; ++i) { /* complete at attach: enqueued, flag 0 */
    MPI_Isend(&v, 1, MPI_INT, me, 40 + i, MPI_COMM_WORLD, &r);
    MPI_Recv(&v, 1, MPI_INT, me, 40 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(MPIX_Continue(&r, &flag, count_cb, NULL, MPI_STATUS_IGNORE, cr) == MPI_SUCCESS);
    CHECK(flag == 0);
  }
  for (int i = 0; i < 20; ++i) MPI_Test(&other, &flag, MPI_STATUS_IGNORE); /* other calls */
  CHECK(atomic_load(&runs) == before); /* poll-only: never run by another request's test */
  int per[4];
  for (int t = 0; t < 4; ++t) {
    const int b = atomic_load(&runs);
    MPI_Test(&cr, &flag, MPI_STATUS_IGNORE);
    per[t] = atomic_load(&runs) - b;
  }
  CHECK(per[0] == 2 && per[1] == 2 && per[2] == 1 && per[3] == 0); /* max_poll */
  CHECK(flag == 1);
  MPI_Request_free(&cr);
  MPI_Request_free(&other);
  MPI_Info_set(info, "mpi_continue_max_poll", "0"); /* with poll_only: nothing would run */
  CHECK(MPIX_Continue_init(&cr, info) == MPI_ERR_ARG);
  MPI_Info_free(&info);
}

static void in_waitall_and_release(void) {
  MPI_Request cr, reqs[3];
  MPIX_Continue_init(&cr, MPI_INFO_NULL);
  int a = 0, b = 0, x = me, flag;
  MPI_Request r;
  MPI_Irecv(&a, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, &r);
  const int before = atomic_load(&runs);
  MPIX_Continue(&r, &flag, count_cb, NULL, MPI_STATUS_IGNORE, cr);
  CHECK(flag == 0);
  MPI_Barrier(MPI_COMM_WORLD); /* attached before the peer sends */
  reqs[0] = cr;
  MPI_Irecv(&b, 1, MPI_INT, peer, 51, MPI_COMM_WORLD, &reqs[1]);
  MPI_Isend(&x, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, &reqs[2]);
  MPI_Send(&x, 1, MPI_INT, peer, 51, MPI_COMM_WORLD);
  MPI_Status sts[3];
  CHECK(MPI_Waitall(3, reqs, sts) == MPI_SUCCESS);
  CHECK(a == peer && b == peer && atomic_load(&runs) == before + 1);
  CHECK(reqs[0] == cr && reqs[1] == MPI_REQUEST_NULL); /* the request persists */
  /* Freed while active: released after its continuation ran, from another request's test. */
  MPI_Irecv(&a, 1, MPI_INT, peer, 52, MPI_COMM_WORLD, &r);
  MPIX_Continue(&r, &flag, count_cb, NULL, MPI_STATUS_IGNORE, cr);
  CHECK(flag == 0);
  MPI_Request_free(&cr);
  CHECK(cr == MPI_REQUEST_NULL);
  MPI_Barrier(MPI_COMM_WORLD); /* the peer sends only now: still active when freed */
  MPI_Send(&x, 1, MPI_INT, peer, 52, MPI_COMM_WORLD);
  MPI_Request other;
  MPIX_Continue_init(&other, MPI_INFO_NULL);
  while (atomic_load(&runs) != before + 2) MPI_Test(&other, &flag, MPI_STATUS_IGNORE);
  MPI_Request_free(&other);
}

enum { THREADS = 4, PER_THREAD = 250 };
/* Operations that complete in an order unlike their attach order. Round 1: the sender sends
 * one message at a time in a scrambled order and waits until its continuation ran, so the
 * library frees its slots in that order; round 2 attaches new receives into those slots,
 * and the sender sends them all (synchronous sends: every receive is complete by the
 * barrier) in another scrambled order. Each continuation runs once with its own status.
 * Where the library tests with PMPI_Testsome (MPICH, which has no completion callback, and
 * Open MPI under MPI_THREAD_MULTIPLE), the one test that finds round 2 complete runs its
 * continuations in attach order, however the slots lie (poll.c: what keeps MPICH's
 * matching in order); Open MPI's callback reports them in its own order. */
enum { NORDER = 256, ORDER_TAG = 1000 };
static int order_log[NORDER], order_n, order_bad;
static void order_cb(MPI_Status* st, void* data) {
  const int i = (int)(intptr_t)data;
  if (st->MPI_SOURCE != peer || st->MPI_TAG != ORDER_TAG + i) ++order_bad;
  if (order_n < NORDER) order_log[order_n] = i;
  ++order_n;
}
static void order_attach(MPI_Request cr, int* in, MPI_Status* st) {
  for (int i = 0; i < NORDER; ++i) {
    MPI_Request r;
    int flag = -1;
    MPI_Irecv(&in[i], 1, MPI_INT, peer, ORDER_TAG + i, MPI_COMM_WORLD, &r);
    CHECK(MPIX_Continue(&r, &flag, order_cb, (void*)(intptr_t)i, &st[i], cr) == MPI_SUCCESS);
  }
}
/* A continuation request made with mpi_continue_enqueue_complete: an attach tests nothing. */
static MPI_Request enqueue_request(void) {
  MPI_Request cr = MPI_REQUEST_NULL;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "mpi_continue_enqueue_complete", "true");
  CHECK(MPIX_Continue_init(&cr, info) == MPI_SUCCESS);
  MPI_Info_free(&info);
  return cr;
}

static void order(int testsome) {
  static int in[NORDER];
  static MPI_Status st[NORDER];
  for (int receiver = 0; receiver < 2; ++receiver) {
    MPI_Request cr = MPI_REQUEST_NULL;
    int flag = 0, v = 0, bad = 0;
    if (me == receiver) {
      cr = enqueue_request();
      order_n = order_bad = 0;
      order_attach(cr, in, st);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int j = 0; j < NORDER; ++j) { /* round 1: one at a time, in the order 37 j */
      const int i = (37 * j) % NORDER;
      if (me != receiver) {
        MPI_Send(&i, 1, MPI_INT, peer, ORDER_TAG + i, MPI_COMM_WORLD);
        MPI_Recv(&v, 1, MPI_INT, peer, ORDER_TAG - 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        continue;
      }
      while (order_n <= j) MPI_Test(&cr, &flag, MPI_STATUS_IGNORE);
      bad += order_log[j] != i || in[i] != i;
      MPI_Send(&v, 1, MPI_INT, peer, ORDER_TAG - 1, MPI_COMM_WORLD);
    }
    if (me == receiver) {
      CHECK(bad == 0 && order_n == NORDER);
      order_n = 0;
      order_attach(cr, in, st); /* round 2, into the slots freed in round 1's order */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me != receiver)
      for (int j = 0; j < NORDER; ++j) {
        const int i = (101 * j + 7) % NORDER;
        MPI_Ssend(&i, 1, MPI_INT, peer, ORDER_TAG + i, MPI_COMM_WORLD);
      }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me != receiver) continue;
    test_until(&cr);
    CHECK(order_n == NORDER && order_bad == 0);
    for (int i = 0; i < NORDER; ++i) bad += in[i] != i;
    CHECK(bad == 0);
    if (testsome) {
      bad = 0;
      for (int i = 0; i < NORDER; ++i) bad += order_log[i] != i;
      CHECK(bad == 0);
    }
    MPI_Request_free(&cr);
  }
}

/* More operations than a turn of the library tests: poll.c tests the oldest attached ones
 * (a window) and every slot once every NWIN / 16 turns. The newest attached completes
 * among a stream of the oldest, which no window reaches, and its continuation still runs
 * within NWIN / 16 tests of the request; then every continuation runs once, with its own
 * status. */
enum { NWIN = 2048, NWIN_FIRST = 1536, WIN_TAG = 20000 };
static int win_in[NWIN], win_runs[NWIN], win_bad;
static void win_cb(MPI_Status* st, void* data) {
  const int i = (int)(intptr_t)data;
  if (st->MPI_SOURCE != peer || st->MPI_TAG != WIN_TAG + i || win_in[i] != i) ++win_bad;
  ++win_runs[i];
}

static void window(void) {
  static MPI_Status st[NWIN];
  for (int receiver = 0; receiver < 2; ++receiver) {
    MPI_Request cr = MPI_REQUEST_NULL;
    int flag = 0, tests = 0, bad = 0;
    if (me == receiver) {
      cr = enqueue_request();
      memset(win_runs, 0, sizeof(win_runs));
      win_bad = 0;
      for (int i = 0; i < NWIN; ++i) {
        MPI_Request r;
        MPI_Irecv(&win_in[i], 1, MPI_INT, peer, WIN_TAG + i, MPI_COMM_WORLD, &r);
        bad += MPIX_Continue(&r, &flag, win_cb, (void*)(intptr_t)i, &st[i], cr) != MPI_SUCCESS;
      }
      CHECK(bad == 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me != receiver) { /* synchronous: all arrived once the barrier below ends */
      for (int i = 0; i < NWIN_FIRST; ++i)
        MPI_Ssend(&i, 1, MPI_INT, peer, WIN_TAG + i, MPI_COMM_WORLD);
      const int last = NWIN - 1;
      MPI_Ssend(&last, 1, MPI_INT, peer, WIN_TAG + last, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == receiver) {
      while (!win_runs[NWIN - 1] && tests < 1000) {
        MPI_Test(&cr, &flag, MPI_STATUS_IGNORE);
        ++tests;
      }
      CHECK(win_runs[NWIN - 1] == 1 && tests <= NWIN / 16);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me != receiver)
      for (int i = NWIN_FIRST; i < NWIN - 1; ++i)
        MPI_Send(&i, 1, MPI_INT, peer, WIN_TAG + i, MPI_COMM_WORLD);
    if (me != receiver) continue;
    test_until(&cr);
    bad = 0;
    for (int i = 0; i < NWIN; ++i) bad += win_runs[i] != 1;
    CHECK(bad == 0 && win_bad == 0);
    MPI_Request_free(&cr);
  }
}

static MPI_Request shared_cr;
static void* attacher(void* arg) {
  int t = (int)(long)arg;
  int* bufs = calloc(PER_THREAD, sizeof(int));
  for (int i = 0; i < PER_THREAD; ++i) {
    MPI_Request r;
    int flag;
    MPI_Irecv(&bufs[i], 1, MPI_INT, peer, 1000 + t * PER_THREAD + i, MPI_COMM_WORLD, &r);
    MPIX_Continue(&r, &flag, count_cb, NULL, MPI_STATUS_IGNORE, shared_cr);
    if (flag) atomic_fetch_add(&runs, 1);
  }
  return bufs;
}

static void threads(void) {
  MPIX_Continue_init(&shared_cr, MPI_INFO_NULL);
  const int before = atomic_load(&runs);
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, attacher, (void*)t);
  int v = 7;
  for (int i = 0; i < THREADS * PER_THREAD; ++i)
    MPI_Send(&v, 1, MPI_INT, peer, 1000 + i, MPI_COMM_WORLD);
  int* bufs[THREADS];
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], (void**)&bufs[t]);
  test_until(&shared_cr); /* one tester */
  CHECK(atomic_load(&runs) == before + THREADS * PER_THREAD);
  int bad = 0;
  for (int t = 0; t < THREADS; ++t) {
    for (int i = 0; i < PER_THREAD; ++i) bad += bufs[t][i] != 7;
    free(bufs[t]);
  }
  CHECK(bad == 0);
  MPI_Request_free(&shared_cr);
}

/* Threads at once, each waiting with MPI_Waitall on its own continuation request mixed
 * with an ordinary receive. */
static void* mixed_waiter(void* arg) {
  int t = (int)(long)arg, a = -1, b = -1, flag;
  MPI_Request cr, reqs[2];
  MPIX_Continue_init(&cr, MPI_INFO_NULL);
  MPI_Irecv(&a, 1, MPI_INT, peer, 3000 + t, MPI_COMM_WORLD, &reqs[1]);
  MPIX_Continue(&reqs[1], &flag, count_cb, NULL, MPI_STATUS_IGNORE, cr);
  if (flag) atomic_fetch_add(&runs, 1);
  MPI_Irecv(&b, 1, MPI_INT, peer, 3100 + t, MPI_COMM_WORLD, &reqs[1]);
  reqs[0] = cr;
  MPI_Status sts[2];
  int rc = MPI_Waitall(2, reqs, sts);
  MPI_Request_free(&cr);
  return (void*)(long)(rc == MPI_SUCCESS && reqs[1] == MPI_REQUEST_NULL && a == t && b == -t &&
                       sts[1].MPI_TAG == 3100 + t);
}

static void mixed_threads(void) {
  const int before = atomic_load(&runs);
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, mixed_waiter, (void*)t);
  for (int t = 0; t < THREADS; ++t) {
    int v = t, w = -t;
    MPI_Send(&v, 1, MPI_INT, peer, 3000 + t, MPI_COMM_WORLD);
    MPI_Send(&w, 1, MPI_INT, peer, 3100 + t, MPI_COMM_WORLD);
  }
  for (int t = 0; t < THREADS; ++t) {
    void* ok;
    pthread_join(th[t], &ok);
    CHECK(ok == (void*)1L);
  }
  CHECK(atomic_load(&runs) == before + THREADS);
}

static void bad_input(void) {
  MPI_Request cr, r = MPI_REQUEST_NULL, reqs[1];
  int flag;
  MPIX_Continue_init(&cr, MPI_INFO_NULL);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK(MPIX_Continue(&r, &flag, count_cb, NULL, MPI_STATUS_IGNORE, cr) == MPI_ERR_REQUEST);
  int v;
  MPI_Irecv(&v, 1, MPI_INT, peer, 60, MPI_COMM_WORLD, &reqs[0]);
  CHECK(MPIX_Continue(&reqs[0], &flag, NULL, NULL, MPI_STATUS_IGNORE, cr) == MPI_ERR_ARG);
  CHECK(MPIX_Continueall(0, reqs, &flag, count_cb, NULL, MPI_STATUSES_IGNORE, cr) == MPI_ERR_COUNT);
  CHECK(MPIX_Continue(&reqs[0], &flag, count_cb, NULL, MPI_STATUS_IGNORE, reqs[0]) ==
        MPI_ERR_REQUEST); /* not a continuation request */
  MPI_Send(&v, 1, MPI_INT, peer, 60, MPI_COMM_WORLD);
  MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
  MPI_Request_free(&cr);
}

/* mpix_test [--funneled]: under MPI_THREAD_FUNNELED the library uses Open MPI's completion
 * callback (mpix/hook_ompi.c) instead of PMPI_Testsome; the thread tests need MULTIPLE. */
int main(int argc, char** argv) {
  int provided, funneled = argc > 1 && !strcmp(argv[1], "--funneled");
  int want = funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
  MPI_Init_thread(&argc, &argv, want, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 2 || provided < want) {
    fprintf(stderr, "mpix_test: 2 ranks and thread level %d needed\n", want);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  peer = 1 - me;
  basics();
  MPI_Barrier(MPI_COMM_WORLD);
  options();
  MPI_Barrier(MPI_COMM_WORLD);
  in_waitall_and_release();
  MPI_Barrier(MPI_COMM_WORLD);
#ifdef MPICH_VERSION
  order(1);
#else
  order(!funneled);
#endif
  MPI_Barrier(MPI_COMM_WORLD);
  window();
  MPI_Barrier(MPI_COMM_WORLD);
  if (!funneled) {
    threads();
    MPI_Barrier(MPI_COMM_WORLD);
    mixed_threads();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  bad_input();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (failures) return 1;
  printf("rank %d: mpix: under %s\n", me, funneled ? "MPI_THREAD_FUNNELED" : "MPI_THREAD_MULTIPLE");
  printf("rank %d: mpix: all %d checks passed\n", me, checks);
  return 0;
}
