/* SPDX-License-Identifier: BSD-3-Clause */
/* Continuation requests and the attach calls (MPIX_Continue_init, MPIX_Continue[all]).
 * An attach takes no lock: it tests the operations once (the flag of seed 2.2), fills a
 * continuation record from this thread's cache and pushes it on the request's stack. */
#include <stdlib.h>
#include <string.h>

#include "mpix/mpix_internal.h"

/* ---- continuation records: per-thread caches over one shared stack -------------------- */

enum { CHUNK = 64, CACHE_MAX = 256 };
typedef struct chunk {
  struct chunk* next; /* every chunk stays reachable: records are reused, never freed */
  mpix_cont c[CHUNK];
} chunk;
static _Atomic(chunk*) chunks;
static _Atomic(mpix_cont*) shared; /* pushed by many, taken whole: no ABA */
static MPIX_TLS mpix_cont* cache;
static MPIX_TLS int ncache;

static void push_chain(mpix_cont* first, mpix_cont* last) {
  mpix_cont* head = atomic_load(&shared);
  do last->next = head;
  while (!atomic_compare_exchange_weak(&shared, &head, first));
}

mpix_cont* mpix_cont_get(int count) {
  if (!cache) {
    cache = atomic_exchange(&shared, NULL);
    ncache = 0; /* unknown: counted down from here */
  }
  if (!cache) {
    chunk* k = malloc(sizeof(*k));
    if (!k) return NULL;
    for (int i = 0; i < CHUNK; ++i) k->c[i].next = i + 1 < CHUNK ? &k->c[i + 1] : NULL;
    cache = &k->c[0];
    k->next = atomic_load(&chunks);
    while (!atomic_compare_exchange_weak(&chunks, &k->next, k)) {
    }
  }
  mpix_cont* c = cache;
  c->ops = c->inline_ops;
  if (count > MPIX_INLINE_OPS && !(c->ops = malloc(sizeof(mpix_op) * (size_t)count))) {
    c->ops = c->inline_ops;
    return NULL;
  }
  cache = c->next;
  if (ncache > 0) --ncache;
  return c;
}

void mpix_cont_put(mpix_cont* c) {
  if (c->ops != c->inline_ops) free(c->ops);
  c->next = cache;
  cache = c;
  if (++ncache < CACHE_MAX) return;
  mpix_cont* last = c; /* a tester frees what attaching threads take: share them */
  while (last->next) last = last->next;
  push_chain(cache, last);
  cache = NULL;
  ncache = 0;
}

/* ---- continuation requests ------------------------------------------------------------ */

/* The generalized request behind the handle is completed only when it is released. */
static int query_fn(void* extra, MPI_Status* s) {
  (void)extra;
  mpix_empty_status(s);
  return MPI_SUCCESS;
}
static int free_fn(void* extra) {
  (void)extra;
  return MPI_SUCCESS;
}
static int cancel_fn(void* extra, int complete) {
  (void)extra;
  (void)complete;
  return MPI_SUCCESS;
}

/* A boolean or integer info key; 0 when absent, -1 when unreadable. */
static int info_value(MPI_Info info, const char* key, int* out) {
  char v[64];
  int flag = 0;
  if (info == MPI_INFO_NULL) return 0;
  PMPI_Info_get(info, key, (int)sizeof(v) - 1, v, &flag);
  if (!flag) return 0;
  if (!strcmp(v, "true") || !strcmp(v, "1"))
    *out = 1;
  else if (!strcmp(v, "false") || !strcmp(v, "0"))
    *out = 0;
  else if (!strcmp(key, "mpi_continue_thread") && !strcmp(v, "application"))
    *out = 0;
  else if (!strcmp(key, "mpi_continue_thread") && !strcmp(v, "any"))
    *out = 1;
  else {
    char* end;
    long l = strtol(v, &end, 10);
    if (*end || l < -1 || l > 1 << 30) return -1;
    *out = (int)l;
  }
  return 0;
}

int MPIX_Continue_init(MPI_Request* cont_req, MPI_Info info) {
  if (!cont_req) return MPI_ERR_ARG;
  mpix_cr* cr = calloc(1, sizeof(*cr));
  if (!cr) return MPI_ERR_NO_MEM;
  cr->max_poll = -1;
  int hook = 1;
  if (info_value(info, "mpi_continue_poll_only", &cr->poll_only) ||
      info_value(info, "mpi_continue_enqueue_complete", &cr->enqueue_complete) ||
      info_value(info, "mpi_continue_max_poll", &cr->max_poll) ||
      info_value(info, "mpi_continue_thread", &cr->thread_any) ||
      info_value(info, "mpi_continue_async_signal_safe", &cr->async_signal_safe) ||
      info_value(info, "weft_mpix_hook", &hook) ||
      (cr->poll_only && cr->max_poll == 0)) { /* nothing would ever run (seed 3.5) */
    free(cr);
    return MPI_ERR_ARG;
  }
  /* Open MPI 4.1 sets a request's callback without synchronizing with a completion on
   * another thread, which could then miss it: the hook only where one thread at a time
   * calls MPI. */
  int level = MPI_THREAD_MULTIPLE;
  PMPI_Query_thread(&level);
  cr->hooked = mpix_hook_available && hook && level != MPI_THREAD_MULTIPLE;
  cr->serial = level != MPI_THREAD_MULTIPLE;
  int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, cr, &cr->handle);
  if (rc != MPI_SUCCESS) {
    free(cr);
    return rc;
  }
  if (!mpix_registry_add(cr)) {
    PMPI_Grequest_complete(cr->handle);
    PMPI_Request_free(&cr->handle);
    free(cr);
    return MPI_ERR_NO_MEM;
  }
  *cont_req = cr->handle;
  return MPI_SUCCESS;
}

/* Both attach calls, each with its own copy: MPIX_Continue's has count 1 folded in (callgrind,
 * N = 1 000: 25 of the library's 360 instructions a receive, and the library built with
 * link-time optimization, whose calls across its files are inlined, 24 more). */
static inline __attribute__((always_inline)) int attach(int count, MPI_Request* reqs, int* flag,
                                                        MPIX_Continue_cb_function* cb,
                                                        void* cb_data, MPI_Status* statuses,
                                                        MPI_Request cont_req) {
  mpix_cr* cr = mpix_find(cont_req);
  if (!cr || (atomic_load_explicit(&cr->state, memory_order_relaxed) & MPIX_FREED))
    return MPI_ERR_REQUEST;
  if (!cb || !flag || !reqs) return MPI_ERR_ARG;
  if (count < 1) return MPI_ERR_COUNT;
  for (int i = 0; i < count; ++i)
    if (reqs[i] == MPI_REQUEST_NULL) return MPI_ERR_REQUEST;
  /* With enqueue_complete the flag is always 0, so nothing is tested here: a test of the
   * continuation request finds the operations complete (no progress at attach). */
  int done = !cr->enqueue_complete, rc = MPI_SUCCESS;
  for (int i = 0; i < count && cr->hooked && done; ++i) done = mpix_hook_complete(reqs[i]);
  if (!cr->enqueue_complete && (!cr->hooked || done))
    rc = count == 1 ? PMPI_Test(reqs, &done,
                                statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses)
                    : PMPI_Testall(count, reqs, &done, statuses);
  if (rc != MPI_SUCCESS) return rc;
  if (done && !cr->enqueue_complete) { /* the flag: cb not run */
    *flag = 1;
    return MPI_SUCCESS;
  }
  mpix_cont* c = mpix_cont_get(done ? 0 : count);
  if (!c) return MPI_ERR_NO_MEM;
  c->cb = cb;
  c->data = cb_data;
  c->statuses = statuses == MPI_STATUSES_IGNORE ? NULL : statuses;
  c->cr = cr;
  c->count = done ? 0 : count;
  c->left = c->count;
  for (int i = 0; i < c->count; ++i) { /* released to the library (seed 2.2) */
    c->ops[i] = (mpix_op){reqs[i], c, NULL, i};
    if (!mpix_persistent_has(reqs[i])) reqs[i] = MPI_REQUEST_NULL;
  }
  mpix_active_add(cr, 1);
  if (cr->hooked && !done) {
    for (int i = 0; i < c->count; ++i) mpix_hook_arm(&c->ops[i]);
  } else if (cr->serial) { /* one thread at a time: no locked push (mpix_active_add) */
    c->next = atomic_load_explicit(&cr->incoming, memory_order_relaxed);
    atomic_store_explicit(&cr->incoming, c, memory_order_relaxed);
  } else {
    mpix_cont* head = atomic_load_explicit(&cr->incoming, memory_order_relaxed);
    do c->next = head;
    while (!atomic_compare_exchange_weak_explicit(&cr->incoming, &head, c, memory_order_release,
                                                  memory_order_relaxed));
  }
  *flag = 0;
  return MPI_SUCCESS;
}

int MPIX_Continue(MPI_Request* op_request, int* flag, MPIX_Continue_cb_function* cb, void* cb_data,
                  MPI_Status* status, MPI_Request cont_req) {
  if (!op_request) return MPI_ERR_ARG;
  return attach(1, op_request, flag, cb, cb_data, status, cont_req);
}

int MPIX_Continueall(int count, MPI_Request* reqs, int* flag, MPIX_Continue_cb_function* cb,
                     void* cb_data, MPI_Status* statuses, MPI_Request cont_req) {
  return attach(count, reqs, flag, cb, cb_data, statuses, cont_req);
}
