/* SPDX-License-Identifier: BSD-3-Clause */
/* The tester's side of a continuation request: one turn takes the attached continuations,
 * completes operations with one PMPI_Testsome (over the oldest attached, or over the whole
 * slot array) and runs the ready continuations; the registry that finds a request by its
 * handle and lists the requests whose continuations run from any interposed call; and the
 * release of a freed request. */
#include <stdlib.h>
#include <string.h>

#include "mpix/mpix_internal.h"

atomic_int mpix_ncr, mpix_nrun;
static mpix_map crs = MPIX_MAP_INIT; /* handle -> request */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mpix_cr** registry; /* for mpix_progress_others */
static int nregistry, registry_cap;
static MPIX_TLS int depth; /* > 0 inside a continuation: nothing more runs here */
/* The request whose continuations run on this thread now (run_ready): the one a runtime's
 * continuation attaches its next operation to, found without a lookup in the map. It
 * cannot be released meanwhile (its tester holds it), and a free of it inside the
 * continuation marks it MPIX_FREED, which the callers check as they do for the map's. */
static MPIX_TLS mpix_cr* running;

mpix_cr* mpix_find(MPI_Request r) {
  mpix_cr* cr = running;
  if (cr && cr->handle == r) return cr;
  return atomic_load_explicit(&mpix_ncr, memory_order_relaxed) ? mpix_map_get(&crs, r) : NULL;
}

int mpix_registry_add(mpix_cr* cr) {
  pthread_mutex_lock(&registry_lock);
  if (nregistry == registry_cap) {
    int cap = registry_cap ? 2 * registry_cap : 8;
    mpix_cr** r = realloc(registry, sizeof(*r) * (size_t)cap);
    if (!r) {
      pthread_mutex_unlock(&registry_lock);
      return 0;
    }
    registry = r;
    registry_cap = cap;
  }
  if (!mpix_map_put(&crs, cr->handle, cr)) {
    pthread_mutex_unlock(&registry_lock);
    return 0;
  }
  registry[nregistry++] = cr;
  atomic_fetch_add(&mpix_ncr, 1);
  if (!cr->poll_only) atomic_fetch_add(&mpix_nrun, 1);
  pthread_mutex_unlock(&registry_lock);
  return 1;
}

/* The tester of a freed, idle request: nothing refers to it any more. */
static void release(mpix_cr* cr) {
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry; ++i)
    if (registry[i] == cr) {
      registry[i] = registry[--nregistry];
      break;
    }
  mpix_map_del(&crs, cr->handle);
  atomic_fetch_sub(&mpix_ncr, 1);
  atomic_fetch_sub(&mpix_nrun, 1); /* a freed request counts there */
  pthread_mutex_unlock(&registry_lock);
  PMPI_Grequest_complete(cr->handle);
  PMPI_Request_free(&cr->handle);
  free(cr->reqs);
  free(cr->conts);
  free(cr->index);
  free(cr->seq);
  free(cr->free_slots);
  free(cr->done_idx);
  free(cr->done_sts);
  free(cr->order);
  free(cr->pend);
  free(cr);
}

/* Ends a turn: releases the request if it was freed and is idle, else lets the next
 * tester in. The compare-exchange fails when MPI_Request_free sets MPIX_FREED meanwhile. */
static int settle(mpix_cr* cr) {
  int s = atomic_load(&cr->state);
  for (;;) {
    if ((s & MPIX_FREED) && atomic_load(&cr->active) == 0) {
      release(cr);
      return 1;
    }
    if (atomic_compare_exchange_weak(&cr->state, &s, s & ~MPIX_TESTING)) return 0;
  }
}

static int acquire(mpix_cr* cr) {
  int s = atomic_load_explicit(&cr->state, memory_order_relaxed);
  return !(s & MPIX_TESTING) && atomic_compare_exchange_strong(&cr->state, &s, s | MPIX_TESTING);
}

void mpix_free_cr(mpix_cr* cr) {
  int poll_only = cr->poll_only; /* read first: the tester may release it after the or */
  int s = atomic_fetch_or(&cr->state, MPIX_FREED | MPIX_TESTING);
  if (poll_only && !(s & MPIX_FREED)) atomic_fetch_add(&mpix_nrun, 1); /* runs from any call */
  if (!(s & MPIX_TESTING)) settle(cr); /* else the tester releases it */
}

static void ready(mpix_cr* cr, mpix_cont* c) {
  c->next = NULL;
  if (cr->tail)
    cr->tail->next = c;
  else
    cr->head = c;
  cr->tail = c;
}

/* Slot i's request. Stored from the end of the array down, so that PMPI_Testsome, given the
 * slots in use, meets the newest attached operations first and the oldest last (poll_ops). */
static inline MPI_Request* slot_req(mpix_cr* cr, int i) {
  return &cr->reqs[cr->cap - 1 - i];
}

static int grow(mpix_cr* cr, int need) {
  if (need <= cr->cap) return 1;
  const int old_cap = cr->cap;
  int cap = cr->cap ? cr->cap : 16;
  while (cap < need) cap *= 2;
#define MPIX_GROW(field)                                            \
  do {                                                              \
    void* p = realloc(cr->field, sizeof(*cr->field) * (size_t)cap); \
    if (!p) return 0;                                               \
    cr->field = p;                                                  \
  } while (0)
  MPIX_GROW(reqs);
  MPIX_GROW(conts);
  MPIX_GROW(index);
  MPIX_GROW(free_slots);
  MPIX_GROW(done_idx);
  MPIX_GROW(done_sts);
  MPIX_GROW(seq);
  MPIX_GROW(order);
#undef MPIX_GROW
  /* The slots in use stay at the end of the longer array (slot_req). */
  memmove(cr->reqs + cap - cr->used, cr->reqs + old_cap - cr->used,
          sizeof(MPI_Request) * (size_t)cr->used);
  int wrapped = cr->fhead + cr->nfree - cr->cap; /* the free ring's part at the front */
  if (wrapped > 0) memcpy(cr->free_slots + cr->cap, cr->free_slots, sizeof(int) * (size_t)wrapped);
  cr->cap = cap;
  return 1;
}

/* Freed slots are reused oldest first (a ring), so that the order of the slots follows the
 * order of attach as closely as it can and poll_ops' sort moves little. (Before that sort,
 * the slots' order was the order the continuations ran in: reusing the newest freed slot
 * first reversed it, and MPICH's UCX matching walked all N posted receives for each
 * message, 4x slower at N = 1000.) */
static int pop_free(mpix_cr* cr) {
  int i = cr->free_slots[cr->fhead];
  cr->fhead = (cr->fhead + 1) & (cr->cap - 1);
  --cr->nfree;
  return i;
}

/* ---- the pending ring: the slots in use in attach order ---- */

static inline int pend_live(const mpix_cr* cr, mpix_pend e) {
  return cr->conts[e.slot] && cr->seq[e.slot] == e.seq; /* else finished, maybe reused */
}

/* Drops the finished entries, keeping the order of the others (writes trail reads). */
static void pend_compact(mpix_cr* cr) {
  const unsigned m = (unsigned)cr->pcap - 1;
  unsigned w = cr->phead;
  for (unsigned r = cr->phead; r != cr->ptail; ++r) {
    const mpix_pend e = cr->pend[r & m];
    if (pend_live(cr, e)) cr->pend[w++ & m] = e;
  }
  cr->ptail = w;
}

/* Room for `need` more entries. A full ring is compacted first, and grown when that frees
 * less than half of it, so that compaction costs O(1) per attach. */
static int pend_room(mpix_cr* cr, int need) {
  if ((int)(cr->ptail - cr->phead) + need <= cr->pcap) return 1;
  if (cr->pcap) pend_compact(cr);
  const int n = (int)(cr->ptail - cr->phead);
  if (2 * (n + need) <= cr->pcap) return 1;
  int cap = cr->pcap ? cr->pcap : 32;
  while (cap < 2 * (n + need)) cap *= 2;
  mpix_pend* p = malloc(sizeof(*p) * (size_t)cap);
  if (!p) return n + need <= cr->pcap;
  for (int k = 0; k < n; ++k) p[k] = cr->pend[(cr->phead + (unsigned)k) & (unsigned)(cr->pcap - 1)];
  free(cr->pend);
  cr->pend = p;
  cr->phead = 0;
  cr->ptail = (unsigned)n;
  cr->pcap = cap;
  return 1;
}

/* Moves the attached continuations into slots, oldest first; those complete at attach
 * (enqueue_complete) go straight to the ready queue. */
static int take_incoming(mpix_cr* cr) {
  mpix_cont* c = atomic_load_explicit(&cr->incoming, memory_order_relaxed);
  if (!c) return MPI_SUCCESS;
  if (cr->serial) /* one thread at a time (mpix_active_add) */
    atomic_store_explicit(&cr->incoming, NULL, memory_order_relaxed);
  else
    c = atomic_exchange(&cr->incoming, NULL);
  mpix_cont* fifo = NULL;
  while (c) { /* the stack is newest first */
    mpix_cont* next = c->next;
    c->next = fifo;
    fifo = c;
    c = next;
  }
  for (c = fifo; c; c = fifo) {
    fifo = c->next;
    if (c->left == 0) {
      ready(cr, c);
      continue;
    }
    if (!grow(cr, cr->used + c->count) || !pend_room(cr, c->count)) { /* kept for later */
      for (c->next = fifo; c;) {
        mpix_cont* next = c->next;
        mpix_cont* head = atomic_load(&cr->incoming);
        do c->next = head;
        while (!atomic_compare_exchange_weak(&cr->incoming, &head, c));
        c = next;
      }
      return MPI_ERR_NO_MEM;
    }
    for (int k = 0; k < c->count; ++k) {
      int i = cr->nfree ? pop_free(cr) : cr->used++;
      *slot_req(cr, i) = c->ops[k].req;
      cr->conts[i] = c;
      cr->index[i] = k;
      cr->seq[i] = cr->next_seq;
      cr->pend[cr->ptail++ & (unsigned)(cr->pcap - 1)] = (mpix_pend){cr->next_seq++, i};
    }
  }
  return MPI_SUCCESS;
}

static int by_seq(const void* a, const void* b) {
  return (int)(((const mpix_done*)a)->seq - ((const mpix_done*)b)->seq);
}

/* Sorts the `out` operations PMPI_Testsome reported into cr->order, oldest attached first.
 * It met them newest first, so from its last report back the order is nearly right and an
 * insertion sort moves little; operations that complete in another order (many peers)
 * could make it quadratic, so past 4 moves a report it hands over to qsort. The
 * sequence numbers of the slots in use span less than 2^31: their differences order them. */
static void sort_reported(mpix_cr* cr, int out) {
  mpix_done* o = cr->order;
  long budget = 4L * out;
  for (int n = 0, k = out - 1; k >= 0; --k, ++n) {
    const mpix_done d = {cr->seq[cr->done_idx[k]], k};
    int j = n;
    for (; j > 0 && (int)(d.seq - o[j - 1].seq) < 0; --j) o[j] = o[j - 1];
    o[j] = d;
    if ((budget -= n - j) < 0) {
      for (int m = n + 1, r = k - 1; r >= 0; --r, ++m)
        o[m] = (mpix_done){cr->seq[cr->done_idx[r]], r};
      qsort(o, (size_t)out, sizeof(*o), by_seq);
      return;
    }
  }
}

/* The oldest attached operations still pending, up to MPIX_WINDOW, into win_reqs newest
 * first (as slot_req orders the whole array); finished entries at the ring's head go. */
static int fill_window(mpix_cr* cr) {
  const unsigned m = (unsigned)cr->pcap - 1;
  unsigned p = cr->phead;
  while (p != cr->ptail && !pend_live(cr, cr->pend[p & m])) ++p;
  cr->phead = p;
  int w = 0;
  for (; p != cr->ptail && w < MPIX_WINDOW; ++p)
    if (pend_live(cr, cr->pend[p & m])) cr->win_slot[w++] = cr->pend[p & m].slot;
  for (int j = 0; j < w; ++j) cr->win_reqs[j] = *slot_req(cr, cr->win_slot[w - 1 - j]);
  return w;
}

/* One PMPI_Testsome over the window (window != 0) or over every slot in use; done_idx
 * then holds the reported operations' slots. */
static int test_some(mpix_cr* cr, int window, int* out) {
  const int n = window ? window : cr->used;
  MPI_Request* reqs = window ? cr->win_reqs : slot_req(cr, cr->used - 1);
  int rc = PMPI_Testsome(n, reqs, out, cr->done_idx, cr->done_sts);
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) return rc;
  if (*out == MPI_UNDEFINED) *out = 0; /* none active: nothing reported */
  for (int k = 0; k < *out; ++k)
    cr->done_idx[k] =
        window ? cr->win_slot[window - 1 - cr->done_idx[k]] : cr->used - 1 - cr->done_idx[k];
  return rc;
}

/* One PMPI_Testsome per turn, and what it reports finished oldest attached first.
 *
 * With more than 4 x MPIX_WINDOW operations pending, over a window of the oldest of them
 * (MPIX_WINDOW), and over every slot in use once every N / MPIX_WINDOW turns (N pending):
 * the whole-array tests then cost no more than the windows between them, and an operation
 * outside the window that completes is finished within N / MPIX_WINDOW turns, the time of
 * about two whole-array tests. Messages mostly complete the oldest receives first, and
 * MPICH's PMPI_Testsome makes progress every 8 requests of its scan
 * (MPIR_CVAR_REQUEST_POLL_FREQ), so a scan of N = 1 000 slots costs 125 progress passes
 * whatever it finds, a window 2; Open MPI's scans every request it is given (docs/mpix.md:
 * a fifth less time per receive at N = 1 000, and at N = 50 000 under Open MPI with
 * MPI_THREAD_MULTIPLE a thirtieth). Fewer pending, a window saves too little to pay for
 * itself (about 3% slower at N = 30 under MPICH). Testing every slot also whenever a
 * window found nothing (and at least every 64 turns) was 15x slower at N = 50 000 under
 * Open MPI with MPI_THREAD_MULTIPLE: a receiver that outpaces its sender finds nothing at
 * most turns.
 *
 * Either is given to PMPI_Testsome newest first: an operation it passed completes behind
 * it and is reported by the next call, after operations attached later, and a
 * continuation that restarts a receive would post the receives out of the order in which
 * their messages come; MPICH's UCX matching walks its posted receives from the oldest for
 * every message (docs/mpix.md: 2 000 ns per receive at N = 1 000 with the restarts
 * reversed, 200 in order). Scanning newest first, what completes behind the scan is newer
 * than all it reported. */
static int poll_ops(mpix_cr* cr) {
  if (!cr->used) return MPI_SUCCESS;
  const int live = cr->used - cr->nfree;
  int out = 0, rc;
  if (live > 4 * MPIX_WINDOW && ++cr->since_full < live / MPIX_WINDOW) {
    rc = test_some(cr, fill_window(cr), &out);
  } else {
    cr->since_full = 0;
    rc = test_some(cr, 0, &out);
  }
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) return rc;
  sort_reported(cr, out);
  for (int m = 0; m < out; ++m) { /* an error completes its operation too: in its status */
    const int k = cr->order[m].k;
    const int i = cr->done_idx[k];
    mpix_cont* c = cr->conts[i];
    if (c->statuses) c->statuses[cr->index[i]] = cr->done_sts[k];
    *slot_req(cr, i) = MPI_REQUEST_NULL; /* a persistent one is only inactive: it stays theirs */
    cr->conts[i] = NULL;
    if (--c->left == 0) ready(cr, c);
    cr->free_slots[(cr->fhead + cr->nfree++) & (cr->cap - 1)] = i;
  }
  return MPI_SUCCESS;
}

/* The count of active continuations drops once for the whole batch, after the last one
 * ran: a continuation that frees its own request (MPI_Request_free) leaves the release
 * to settle() all the same, since the count stays above 0 until then. */
static void run_ready(mpix_cr* cr, int max) {
  if (depth > 0) return; /* never inside another continuation (seed 3.1) */
  int ran = 0;
  running = cr;
  for (; cr->head && (max < 0 || ran < max); ++ran) {
    mpix_cont* c = cr->head;
    cr->head = c->next;
    if (!cr->head) cr->tail = NULL;
    ++depth;
    c->cb(c->statuses, c->data);
    --depth;
    mpix_cont_put(c);
  }
  running = NULL;
  if (ran) mpix_active_add(cr, -ran);
}

/* Hooked: finishes the operations MPI reported complete, in the order it did. One that
 * PMPI_Test does not see complete yet (reported, not yet marked) stays for the next turn. */
static int finish_reported(mpix_cr* cr) {
  mpix_op* fifo = NULL;
  for (mpix_op* op = atomic_exchange(&cr->completed, NULL); op;) {
    mpix_op* next = op->next;
    op->next = fifo;
    fifo = op;
    op = next;
  }
  mpix_op** at = &cr->finishing;
  while (*at) at = &(*at)->next;
  *at = fifo;
  int rc = MPI_SUCCESS;
  for (at = &cr->finishing; *at;) {
    mpix_op* op = *at;
    mpix_cont* c = op->cont;
    int flag = 0;
    int r = PMPI_Test(&op->req, &flag, c->statuses ? &c->statuses[op->k] : MPI_STATUS_IGNORE);
    if (r != MPI_SUCCESS) rc = r;
    if (!flag && r == MPI_SUCCESS) {
      at = &op->next;
      continue;
    }
    *at = op->next;
    if (--c->left == 0) ready(cr, c);
  }
  return rc;
}

static int turn(mpix_cr* cr, int max) {
  int rc = MPI_SUCCESS, rc2;
  if (cr->hooked) {
    mpix_hook_progress();
    rc = take_incoming(cr); /* only those complete at attach */
    rc2 = finish_reported(cr);
  } else {
    rc = take_incoming(cr);
    rc2 = poll_ops(cr);
  }
  run_ready(cr, max);
  return rc != MPI_SUCCESS ? rc : rc2;
}

int mpix_test_cr(mpix_cr* cr, int* flag, MPI_Status* status) {
  *flag = 0;
  int rc = MPI_SUCCESS;
  if (acquire(cr)) { /* else another thread's call progresses it right now */
    rc = turn(cr, cr->max_poll);
    *flag = atomic_load(&cr->active) == 0;
    if (settle(cr)) cr = NULL; /* freed by its own continuation */
  }
  if (*flag) mpix_empty_status(status);
  mpix_progress_others(cr);
  return rc;
}

void mpix_progress_others(mpix_cr* except) {
  int n = atomic_load_explicit(&mpix_nrun, memory_order_relaxed);
  if (depth > 0 || n == 0 ||
      (n == 1 && except && (!except->poll_only || (atomic_load(&except->state) & MPIX_FREED))))
    return;            /* the common cases: no lock */
  enum { batch = 16 }; /* requests taken per call: no allocation here */
  mpix_cr* taken[batch];
  int k = 0;
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry && k < batch; ++i) {
    mpix_cr* cr = registry[i];
    int freed = atomic_load(&cr->state) & MPIX_FREED;
    if (cr != except && (!cr->poll_only || freed) && acquire(cr)) taken[k++] = cr;
  }
  pthread_mutex_unlock(&registry_lock);
  for (int i = 0; i < k; ++i) {
    turn(taken[i], atomic_load(&taken[i]->state) & MPIX_FREED ? -1 : taken[i]->max_poll);
    settle(taken[i]);
  }
}

void mpix_empty_status(MPI_Status* s) {
  if (s == MPI_STATUS_IGNORE) return;
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
  s->MPI_ERROR = MPI_SUCCESS;
  PMPI_Status_set_elements(s, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(s, 0);
}
