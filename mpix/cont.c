/* SPDX-License-Identifier: BSD-3-Clause */
/* Continuation requests and the attach calls (MPIX_Continue_init, MPIX_Continue[all]). */
#include <stdlib.h>
#include <string.h>

#include "mpix/mpix_internal.h"

atomic_int mpix_ncr;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mpix_cr** registry;
static int nregistry, registry_cap;
static _Thread_local int depth; /* > 0 inside a continuation: nothing more runs here */

static int same(MPI_Request a, MPI_Request b) {
  return memcmp(&a, &b, sizeof(a)) == 0;
}

mpix_cr* mpix_find(MPI_Request r) {
  mpix_cr* found = NULL;
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry && !found; ++i)
    if (same(registry[i]->handle, r)) found = registry[i];
  pthread_mutex_unlock(&registry_lock);
  return found;
}

void mpix_register(mpix_cr* cr) {
  pthread_mutex_lock(&registry_lock);
  if (nregistry == registry_cap) {
    registry_cap = registry_cap ? 2 * registry_cap : 8;
    registry = realloc(registry, sizeof(*registry) * (size_t)registry_cap);
  }
  registry[nregistry++] = cr;
  atomic_fetch_add(&mpix_ncr, 1);
  pthread_mutex_unlock(&registry_lock);
}

void mpix_release(mpix_cr* cr) {
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry; ++i)
    if (registry[i] == cr) registry[i] = registry[--nregistry];
  atomic_fetch_sub(&mpix_ncr, 1);
  pthread_mutex_unlock(&registry_lock);
  PMPI_Grequest_complete(cr->handle);
  PMPI_Request_free(&cr->handle);
  pthread_mutex_destroy(&cr->lock);
  free(cr->reqs);
  free(cr->conts);
  free(cr->slots);
  free(cr->done_idx);
  free(cr->done_sts);
  while (cr->spare) {
    mpix_cont* c = cr->spare;
    cr->spare = c->next;
    free(c);
  }
  free(cr);
}

void mpix_empty_status(MPI_Status* s) {
  if (s == MPI_STATUS_IGNORE) return;
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
  s->MPI_ERROR = MPI_SUCCESS;
  PMPI_Status_set_elements(s, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(s, 0);
}

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
  if (info_value(info, "mpi_continue_poll_only", &cr->poll_only) ||
      info_value(info, "mpi_continue_enqueue_complete", &cr->enqueue_complete) ||
      info_value(info, "mpi_continue_max_poll", &cr->max_poll) ||
      info_value(info, "mpi_continue_thread", &cr->thread_any) ||
      info_value(info, "mpi_continue_async_signal_safe", &cr->async_signal_safe) ||
      (cr->poll_only && cr->max_poll == 0)) { /* nothing would ever run (seed 3.5) */
    free(cr);
    return MPI_ERR_ARG;
  }
  pthread_mutex_init(&cr->lock, NULL);
  int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, cr, &cr->handle);
  if (rc != MPI_SUCCESS) {
    free(cr);
    return rc;
  }
  mpix_register(cr);
  *cont_req = cr->handle;
  return MPI_SUCCESS;
}

static void enqueue(mpix_cr* cr, mpix_cont* c) { /* under cr->lock */
  c->next = NULL;
  if (cr->tail)
    cr->tail->next = c;
  else
    cr->head = c;
  cr->tail = c;
}

static int grow(mpix_cr* cr, int more) { /* under cr->lock */
  if (cr->n + more <= cr->cap) return 1;
  int cap = cr->cap ? cr->cap : 16;
  while (cap < cr->n + more) cap *= 2;
  MPI_Request* r = realloc(cr->reqs, sizeof(*r) * (size_t)cap);
  if (r) cr->reqs = r;
  mpix_cont** c = realloc(cr->conts, sizeof(*c) * (size_t)cap);
  if (c) cr->conts = c;
  int* s = realloc(cr->slots, sizeof(*s) * (size_t)cap);
  if (s) cr->slots = s;
  int* d = realloc(cr->done_idx, sizeof(*d) * (size_t)cap);
  if (d) cr->done_idx = d;
  MPI_Status* st = realloc(cr->done_sts, sizeof(*st) * (size_t)cap);
  if (st) cr->done_sts = st;
  if (!r || !c || !s || !d || !st) return 0;
  cr->cap = cap;
  return 1;
}

int MPIX_Continueall(int count, MPI_Request* reqs, int* flag, MPIX_Continue_cb_function* cb,
                     void* cb_data, MPI_Status* statuses, MPI_Request cont_req) {
  mpix_cr* cr = mpix_find(cont_req);
  if (!cr || cr->freed) return MPI_ERR_REQUEST;
  if (!cb || !flag || !reqs) return MPI_ERR_ARG;
  if (count < 1) return MPI_ERR_COUNT;
  for (int i = 0; i < count; ++i)
    if (reqs[i] == MPI_REQUEST_NULL) return MPI_ERR_REQUEST;
  int done = 0;
  int rc = PMPI_Testall(count, reqs, &done, statuses);
  if (rc != MPI_SUCCESS) return rc;
  if (done && !cr->enqueue_complete) { /* the flag: cb not run */
    *flag = 1;
    return MPI_SUCCESS;
  }
  pthread_mutex_lock(&cr->lock);
  mpix_cont* c = cr->spare;
  if (c) cr->spare = c->next;
  pthread_mutex_unlock(&cr->lock);
  if (!c) c = malloc(sizeof(*c));
  if (!c) return MPI_ERR_NO_MEM;
  *c = (mpix_cont){cb, cb_data, statuses == MPI_STATUSES_IGNORE ? NULL : statuses, done ? 0 : count,
                   NULL};
  pthread_mutex_lock(&cr->lock);
  ++cr->active;
  if (done) {
    enqueue(cr, c);
  } else if (!grow(cr, count)) {
    --cr->active;
    pthread_mutex_unlock(&cr->lock);
    free(c);
    return MPI_ERR_NO_MEM;
  } else {
    for (int i = 0; i < count; ++i) {
      cr->reqs[cr->n] = reqs[i];
      cr->conts[cr->n] = c;
      cr->slots[cr->n++] = i;
    }
  }
  pthread_mutex_unlock(&cr->lock);
  for (int i = 0; i < count && !done; ++i) /* released to the library (seed 2.2) */
    if (!mpix_is_persistent(reqs[i])) reqs[i] = MPI_REQUEST_NULL;
  *flag = 0;
  return MPI_SUCCESS;
}

int MPIX_Continue(MPI_Request* op_request, int* flag, MPIX_Continue_cb_function* cb, void* cb_data,
                  MPI_Status* status, MPI_Request cont_req) {
  if (!op_request) return MPI_ERR_ARG;
  return MPIX_Continueall(1, op_request, flag, cb, cb_data, status, cont_req);
}

/* Completes what it can of the attached operations; continuations whose last operation
 * completed move to the ready queue. */
static int poll_ops(mpix_cr* cr) {
  pthread_mutex_lock(&cr->lock);
  int rc = MPI_SUCCESS;
  if (cr->n) {
    int out = 0;
    int* idx = cr->done_idx;
    MPI_Status* sts = cr->done_sts;
    rc = PMPI_Testsome(cr->n, cr->reqs, &out, idx, sts);
    if (rc == MPI_SUCCESS && out != MPI_UNDEFINED) {
      for (int k = 0; k < out; ++k) {
        int i = idx[k];
        mpix_cont* c = cr->conts[i];
        if (c->statuses) c->statuses[cr->slots[i]] = sts[k];
        if (--c->left == 0) enqueue(cr, c);
        cr->conts[i] = NULL; /* completed: compacted away below */
      }
      int m = 0;
      for (int i = 0; i < cr->n; ++i)
        if (cr->conts[i]) {
          cr->reqs[m] = cr->reqs[i];
          cr->conts[m] = cr->conts[i];
          cr->slots[m++] = cr->slots[i];
        }
      cr->n = m;
    }
  }
  pthread_mutex_unlock(&cr->lock);
  return rc;
}

/* Runs up to `max` ready continuations on this thread; returns whether the request was
 * released (freed and idle). */
static int run_ready(mpix_cr* cr, int max) {
  if (depth > 0) return 0; /* never inside another continuation (seed 3.1) */
  for (int ran = 0; max < 0 || ran < max; ++ran) {
    pthread_mutex_lock(&cr->lock);
    mpix_cont* c = cr->head;
    if (c) {
      cr->head = c->next;
      if (!cr->head) cr->tail = NULL;
    }
    pthread_mutex_unlock(&cr->lock);
    if (!c) break;
    ++depth;
    c->cb(c->statuses, c->data);
    --depth;
    pthread_mutex_lock(&cr->lock);
    c->next = cr->spare;
    cr->spare = c;
    int idle = --cr->active == 0, release = idle && cr->freed;
    pthread_mutex_unlock(&cr->lock);
    if (release) {
      mpix_release(cr);
      return 1;
    }
  }
  return 0;
}

int mpix_test_cr(mpix_cr* cr, int* flag, MPI_Status* status) {
  if (atomic_exchange(&cr->testing, 1)) return MPI_ERR_REQUEST; /* one tester at a time */
  int rc = poll_ops(cr);
  run_ready(cr, cr->max_poll);
  pthread_mutex_lock(&cr->lock);
  *flag = cr->active == 0;
  pthread_mutex_unlock(&cr->lock);
  atomic_store(&cr->testing, 0);
  if (*flag) mpix_empty_status(status);
  mpix_progress_others(cr);
  return rc;
}

/* Continuations of requests without poll_only (or freed ones, which nobody tests) run from
 * any interposed call; a request another thread is testing is skipped. */
void mpix_progress_others(mpix_cr* except) {
  if (depth > 0) return;
  enum { batch = 16 }; /* requests taken per pass: no allocation here */
  mpix_cr* taken[batch];
  int k = 0;
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry && k < batch; ++i)
    if (registry[i] != except && (!registry[i]->poll_only || registry[i]->freed) &&
        !atomic_exchange(&registry[i]->testing, 1))
      taken[k++] = registry[i];
  pthread_mutex_unlock(&registry_lock);
  for (int i = 0; i < k; ++i) {
    mpix_cr* cr = taken[i];
    poll_ops(cr);
    if (!run_ready(cr, cr->freed ? -1 : cr->max_poll)) /* released: gone */
      atomic_store(&cr->testing, 0);
  }
}

/* ---- persistent requests: a hash set of their handles ---------------------------------- */

static pthread_mutex_t persistent_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long* pset; /* 0: empty slot; keys are handles + 1 */
static size_t pcap, pcount;

static unsigned long long key_of(MPI_Request r) {
  unsigned long long k = 0;
  memcpy(&k, &r, sizeof(r) < sizeof(k) ? sizeof(r) : sizeof(k));
  return k + 1;
}

static size_t slot_of(unsigned long long k, size_t cap) {
  return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

static void pinsert(unsigned long long k) { /* under persistent_lock */
  size_t i = slot_of(k, pcap);
  while (pset[i] && pset[i] != k) i = (i + 1) & (pcap - 1);
  if (!pset[i]) ++pcount;
  pset[i] = k;
}

void mpix_persistent(MPI_Request r, int add) {
  unsigned long long k = key_of(r);
  pthread_mutex_lock(&persistent_lock);
  if (add && 2 * (pcount + 1) > pcap) { /* rehash at half full */
    unsigned long long* old = pset;
    size_t oldcap = pcap;
    pcap = pcap ? 2 * pcap : 64;
    pset = calloc(pcap, sizeof(*pset));
    pcount = 0;
    for (size_t i = 0; i < oldcap; ++i)
      if (old[i]) pinsert(old[i]);
    free(old);
  }
  if (add) {
    pinsert(k);
  } else if (pcap) { /* remove, then re-insert the rest of its cluster */
    size_t i = slot_of(k, pcap);
    while (pset[i] && pset[i] != k) i = (i + 1) & (pcap - 1);
    if (pset[i] == k) {
      pset[i] = 0;
      --pcount;
      for (size_t j = (i + 1) & (pcap - 1); pset[j]; j = (j + 1) & (pcap - 1)) {
        unsigned long long m = pset[j];
        pset[j] = 0;
        --pcount;
        pinsert(m);
      }
    }
  }
  pthread_mutex_unlock(&persistent_lock);
}

int mpix_is_persistent(MPI_Request r) {
  unsigned long long k = key_of(r);
  int found = 0;
  pthread_mutex_lock(&persistent_lock);
  if (pcap) {
    size_t i = slot_of(k, pcap);
    while (pset[i] && pset[i] != k) i = (i + 1) & (pcap - 1);
    found = pset[i] == k;
  }
  pthread_mutex_unlock(&persistent_lock);
  return found;
}
