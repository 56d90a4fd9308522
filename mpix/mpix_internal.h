/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPIX_Continue library's objects. A continuation request is a generalized request
 * whose handle the interposed test, wait and free calls recognise (a lock-free map). An
 * attach pushes its continuation, with copies of the operations' requests, on the
 * request's incoming stack (lock-free, any thread); the one thread testing the request at
 * a time owns everything else: it moves incoming operations into slots of one array that
 * it completes with PMPI_Testsome (a free slot is reused, nothing is compacted; the oldest
 * attached are tested first, from a ring of the slots in attach order), and runs the
 * continuations whose operations all completed from a ready queue. */
#ifndef WEFT_MPIX_INTERNAL_H
#define WEFT_MPIX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "mpix/mpix_continue.h"

/* Everything below is the library's own: hidden, so that its files call each other
 * directly instead of through the procedure linkage table (an indirect jump per call on
 * every attach and test). Only the MPIX_ and interposed MPI_ functions are exported. */
#pragma GCC visibility push(hidden)

enum { MPIX_INLINE_OPS = 4 }; /* operations a continuation holds without an allocation */
/* A request's state bits. One thread at a time tests it (seed 3.3) and only that thread
 * releases it; MPI_Request_free sets both bits at once, so that it either becomes the tester
 * or leaves the release to the one testing now. */
enum { MPIX_TESTING = 1, MPIX_FREED = 2 };

struct mpix_cont;
typedef struct mpix_done { /* an operation PMPI_Testsome reported: its report, its attach */
  unsigned seq;
  int k;
} mpix_done;

typedef struct mpix_pend { /* an operation in attach order (poll.c's pending ring) */
  unsigned seq;
  int slot;
} mpix_pend;
enum { MPIX_WINDOW = 16 }; /* operations a window turn tests: the oldest attached */

typedef struct mpix_op { /* one attached operation */
  MPI_Request req;
  struct mpix_cont* cont;
  struct mpix_op* next; /* on a completion stack (hooked requests) */
  int k;                /* its index into the continuation's statuses */
} mpix_op;

typedef struct mpix_cont {
  MPIX_Continue_cb_function* cb;
  void* data;
  MPI_Status* statuses; /* NULL: ignored */
  struct mpix_cr* cr;
  int count;    /* operations attached */
  int left;     /* operations not yet complete; 0: ready at attach */
  mpix_op* ops; /* inline_ops, or an allocation for more */
  mpix_op inline_ops[MPIX_INLINE_OPS];
  struct mpix_cont* next;
} mpix_cont;

typedef struct mpix_cr {
  MPI_Request handle;           /* a generalized request: what the program holds */
  _Atomic(mpix_cont*) incoming; /* attached, not yet taken by a tester (a stack) */
  atomic_int active;            /* attached continuations not yet run */
  atomic_int state;             /* MPIX_TESTING | MPIX_FREED */
  _Atomic(mpix_op*) completed;  /* hooked: operations MPI reported complete (a stack) */
  int poll_only, enqueue_complete, max_poll, async_signal_safe, thread_any;
  int hooked; /* MPI calls us back on completion (mpix_hook_*) instead of PMPI_Testsome */
  int serial; /* below MPI_THREAD_MULTIPLE: one thread at a time attaches and tests */
  /* The tester's own: */
  MPI_Request* reqs;           /* slot i at reqs[cap - 1 - i] (poll.c: slot_req) */
  mpix_cont** conts;           /* slot i's continuation */
  int* index;                  /* slot i's index into its continuation's statuses */
  unsigned* seq;               /* slot i's place in attach order (wraps: compare differences) */
  unsigned next_seq;           /* the next attached operation's */
  int* free_slots;             /* a ring of the free slots below `used`, oldest at fhead */
  int used, fhead, nfree, cap; /* cap: a power of 2 */
  int* done_idx;               /* PMPI_Testsome's outputs (cap entries) */
  MPI_Status* done_sts;
  struct mpix_done* order; /* done_idx's entries in attach order (cap entries) */
  mpix_pend* pend;         /* slots in attach order, completed ones dropped lazily (a ring) */
  unsigned phead, ptail;   /* pend's bounds (free-running) */
  int pcap;                /* pend's size: a power of 2 */
  int since_full;          /* turns since PMPI_Testsome last scanned every slot */
  MPI_Request win_reqs[MPIX_WINDOW]; /* a window turn's requests, newest first */
  int win_slot[MPIX_WINDOW];         /* and their slots */
  mpix_cont *head, *tail;            /* ready, waiting for a test */
  mpix_op* finishing;                /* hooked: reported, not yet seen complete by PMPI_Test */
} mpix_cr;

/* active += d. Below MPI_THREAD_MULTIPLE one thread at a time calls MPI (attach and test
 * alike), so a plain update does: a locked add cost a tenth of the per-operation time of
 * the PaRSEC pattern under MPICH (perf: MPIX_Continueall's hottest instructions). */
static inline void mpix_active_add(mpix_cr* cr, int d) {
  if (cr->serial)
    atomic_store_explicit(&cr->active, atomic_load_explicit(&cr->active, memory_order_relaxed) + d,
                          memory_order_relaxed);
  else
    atomic_fetch_add(&cr->active, d);
}

/* ---- handle maps (map.c) ---- */
typedef struct {
  _Atomic unsigned long long key;
  _Atomic(void*) val;
} mpix_entry;
typedef struct mpix_table {
  size_t cap;
  struct mpix_table* older; /* kept for readers still probing it */
  mpix_entry e[];
} mpix_table;
typedef struct {
  atomic_uint seq;
  _Atomic(mpix_table*) table;
  size_t count;
  pthread_mutex_t lock;
} mpix_map;
/* Thread-local state read on every attach and test: the initial-exec model reads it from
 * the thread pointer, where the default model of a shared library calls __tls_get_addr
 * (3% of the time per operation at N = 30 under perf). The library is linked, not
 * dlopen'ed, by the programs that use it, so the static TLS block has its room. */
#define MPIX_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#define MPIX_MAP_INIT \
  { 0, NULL, 0, PTHREAD_MUTEX_INITIALIZER }
void* mpix_map_get(mpix_map* m, MPI_Request r);
int mpix_map_put(mpix_map* m, MPI_Request r, void* v); /* 0: out of memory */
void mpix_map_del(mpix_map* m, MPI_Request r);
int mpix_map_has(mpix_table* t, unsigned long long key);

/* ---- continuation requests (cont.c) ---- */
extern atomic_int mpix_ncr;  /* registered continuation requests */
extern atomic_int mpix_nrun; /* those whose continuations run from any call */
mpix_cr* mpix_find(MPI_Request r);
/* Continuation records: a per-thread cache over a shared stack, no lock. */
mpix_cont* mpix_cont_get(int count);
void mpix_cont_put(mpix_cont* c);

/* ---- testing (poll.c) ---- */
/* Test semantics of a continuation request. */
int mpix_test_cr(mpix_cr* cr, int* flag, MPI_Status* status);
/* Progresses every registered request but `except` whose continuations may run outside its
 * own test. */
void mpix_progress_others(mpix_cr* except);
/* MPI_Request_free on a continuation request. */
void mpix_free_cr(mpix_cr* cr);
int mpix_registry_add(mpix_cr* cr); /* 0: out of memory */
/* The empty status a completed continuation request reports. */
void mpix_empty_status(MPI_Status* s);

/* ---- completion callbacks from inside MPI (hook_ompi.c; hook_none.c elsewhere) ---- */
/* Whether this MPI lets the library register a completion callback on a request. */
extern const int mpix_hook_available;
/* Whether r is complete now, without progressing MPI. */
int mpix_hook_complete(MPI_Request r);
/* Pushes op on its request's `completed` stack once MPI completes op->req (at once if it is
 * complete already). */
void mpix_hook_arm(mpix_op* op);
/* One pass of MPI's progress engine. */
void mpix_hook_progress(void);
/* Whether r is persistent: 1 or 0 read from the request, -1 where this MPI cannot say. */
int mpix_hook_persistent(MPI_Request r);

/* ---- persistent requests (persist.c) ---- */
int mpix_persistent_has(MPI_Request r);
int mpix_persistent_set(MPI_Request r, int on); /* 0: out of memory */

#pragma GCC visibility pop

#endif /* WEFT_MPIX_INTERNAL_H */
