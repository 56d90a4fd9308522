/* SPDX-License-Identifier: BSD-3-Clause */
/* OpenMP tasks released by Weft continuations (the seed 002's Listing 2, in C with GCC's
 * libgomp): an iterative solver over F fields per rank on a ring of ranks. Each timestep
 * makes one task per field with depend(out) on it and detach(event): it adds the halo that
 * arrived from the left neighbour, saves its boundary, posts the send to the right and the
 * receive from the left, and hands the event to a continuation of both. The task ends at
 * once; its dependants wait until the continuation fulfils the event, so the next
 * timestep's task on the field starts as soon as its halo is in, while other fields
 * compute. A progress task tests the continuation request and yields, as the seed's
 * footnote suggests for OpenMP (which has no polling service): the callbacks then fulfil
 * the events on a thread of the team. (Fulfilled from a thread outside the team, libgomp
 * 12 may leave the team asleep at its barrier until some other wake-up.)
 *
 * Checked: every rank replays the whole ring's arithmetic and compares each field.
 *   weftrun -n 3 omp_halo [timesteps] [fields] */
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

enum { LEN = 512 }; /* doubles per field: past the eager limit, so posts return posted */

typedef struct {
  double v[LEN];
  double send[LEN];
  double recv[LEN];
} field_t;

static weft_comp_t cont_req;
static atomic_int fulfilled; /* events fulfilled so far */

/* The progress task: tests until every task's event is fulfilled. */
static void progress_task(int total) {
  int idle;
  while (atomic_load(&fulfilled) < total) {
    if (weft_cont_request_test(cont_req, &idle) != WEFT_OK) {
      fprintf(stderr, "omp_halo: %s\n", weft_last_error());
      exit(1);
    }
#pragma omp taskyield
  }
}

/* What a continuation carries: the task's event and room for the two statuses. */
typedef struct {
  omp_event_handle_t event;
  weft_status_t statuses[2];
} halo_t;

/* The continuation: both operations done; the task's dependants may run. */
static void halo_done(weft_status_t* statuses, size_t count, void* data) {
  halo_t* h = data;
  for (size_t i = 0; i < count; ++i)
    if (WEFT_IS_ERROR(statuses[i].errorcode)) {
      fprintf(stderr, "omp_halo: a halo operation failed (%d)\n", statuses[i].errorcode);
      exit(1);
    }
  omp_fulfill_event(h->event);
  atomic_fetch_add(&fulfilled, 1);
  free(h);
}

/* Posts until not retry (the runtime's queues are bounded); 1 when it returned posted. */
static int post(int send, int rank, void* buf, size_t size, uint32_t tag, weft_comp_t c) {
  weft_status_t st;
  for (;;) {
    int rc = send ? weft_post_send(rank, buf, size, tag, c, &st)
                  : weft_post_recv(rank, buf, size, tag, c, &st);
    if (rc != WEFT_OK) {
      fprintf(stderr, "omp_halo: %s\n", weft_last_error());
      exit(1);
    }
    if (st.errorcode < WEFT_RETRY) return st.errorcode == WEFT_POSTED;
    weft_progress();
  }
}

static void step(field_t* f, int t, int i, int nfields, int left, int right,
                 omp_event_handle_t event) {
  for (int k = 0; k < LEN; ++k) f->v[k] += f->recv[k]; /* integrate the halo */
  memcpy(f->send, f->v, sizeof(f->send));              /* save the boundary */
  halo_t* h = malloc(sizeof(*h));
  if (!h) exit(1);
  h->event = event;
  weft_comp_t c;
  if (weft_alloc_cont(cont_req, halo_done, h, h->statuses, 2, &c) != WEFT_OK) {
    fprintf(stderr, "omp_halo: %s\n", weft_last_error());
    exit(1);
  }
  uint32_t tag = (uint32_t)(t * nfields + i);
  size_t n = (size_t)post(0, left, f->recv, sizeof(f->recv), tag, c);
  n += (size_t)post(1, right, f->send, sizeof(f->send), tag, c);
  int flag;
  if (weft_arm_cont(c, n, &flag) != WEFT_OK) exit(1);
  if (flag) { /* both complete already: the callback will not run (the seed's flag) */
    omp_fulfill_event(event);
    atomic_fetch_add(&fulfilled, 1);
    free(h);
  }
}

/* Every rank's field i, element k, replayed: v_r += the left neighbour's value of the
 * step before (its send); after the last step the halo of that step is still in recv. */
static int check(const field_t* fields, int nfields, int steps, int me, int n) {
  double* v = malloc(sizeof(double) * (size_t)n);
  double* s = malloc(sizeof(double) * (size_t)n);
  int bad = 0;
  for (int i = 0; i < nfields; ++i)
    for (int k = 0; k < LEN; ++k) {
      for (int r = 0; r < n; ++r) v[r] = r * 100 + i + k, s[r] = 0;
      for (int t = 0; t < steps; ++t) {
        for (int r = 0; r < n; ++r) v[r] += t ? s[(r - 1 + n) % n] : 0;
        for (int r = 0; r < n; ++r) s[r] = v[r];
      }
      if (fields[i].v[k] != v[me] || fields[i].recv[k] != s[(me - 1 + n) % n]) ++bad;
    }
  free(v);
  free(s);
  return bad;
}

int main(int argc, char** argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 20, nfields = argc > 2 ? atoi(argv[2]) : 8;
  if (steps < 1 || steps > 40 || nfields < 1 || nfields > 1024) {
    fprintf(stderr, "usage: omp_halo [timesteps 1..40] [fields 1..1024]\n");
    return 2;
  }
  if (weft_g_runtime_init() != WEFT_OK) return 1;
  int me = weft_get_rank_me(), n = weft_get_rank_n();
  int left = (me - 1 + n) % n, right = (me + 1) % n;
  field_t* fields = calloc((size_t)nfields, sizeof(field_t));
  for (int i = 0; i < nfields; ++i)
    for (int k = 0; k < LEN; ++k) fields[i].v[k] = me * 100 + i + k;
  if (weft_alloc_cont_request(NULL, &cont_req) != WEFT_OK) return 1;
  /* At least two threads: one runs the progress task while others run the fields. */
  int threads = omp_get_max_threads() < 2 ? 2 : omp_get_max_threads();
  double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
#pragma omp single
  {
#pragma omp task
    progress_task(steps * nfields);
    for (int t = 0; t < steps; ++t)
      for (int i = 0; i < nfields; ++i) {
        field_t* f = &fields[i];
        omp_event_handle_t event;
#pragma omp task depend(inout : f[0]) detach(event) firstprivate(f, t, i)
        step(f, t, i, nfields, left, right, event);
      }
  }
  /* the end of the parallel region waits for every task, detached ones included */
  double seconds = omp_get_wtime() - t0;
  weft_cont_request_wait(cont_req);
  int bad = check(fields, nfields, steps, me, n);
  weft_free_comp(&cont_req);
  weft_barrier();
  free(fields);
  weft_g_runtime_fina();
  if (bad) {
    fprintf(stderr, "rank %d: omp_halo: %d values wrong\n", me, bad);
    return 1;
  }
  printf("rank %d: omp_halo: %d timesteps x %d fields on %d threads in %.3f s, all values right\n",
         me, steps, nfields, threads, seconds);
  return 0;
}
