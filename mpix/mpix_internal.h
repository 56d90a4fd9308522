/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPIX_Continue library's objects: a continuation request is a generalized request
 * whose handle the interposed test, wait and free calls recognise (a registry), holding the
 * attached operations' requests in one array that a test completes with PMPI_Testsome, and
 * the continuations whose operations all completed in a ready queue. */
#ifndef WEFT_MPIX_INTERNAL_H
#define WEFT_MPIX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "mpix/mpix_continue.h"

typedef struct mpix_cont {
  MPIX_Continue_cb_function* cb;
  void* data;
  MPI_Status* statuses; /* NULL: ignored */
  int left;             /* operations not yet complete */
  struct mpix_cont* next;
} mpix_cont;

typedef struct mpix_cr {
  MPI_Request handle;   /* a generalized request: what the program holds */
  pthread_mutex_t lock; /* the arrays, the queue and `active` */
  MPI_Request* reqs;    /* the attached operations, tested together */
  mpix_cont** conts;
  int* slots; /* each one's index into its continuation's statuses */
  int n, cap;
  int* done_idx; /* PMPI_Testsome's outputs, kept between tests (cap entries) */
  MPI_Status* done_sts;
  mpix_cont* spare;       /* run continuations, reused by the next attach */
  mpix_cont *head, *tail; /* ready, waiting for a test */
  int active;             /* attached continuations not yet run */
  int poll_only, enqueue_complete, max_poll, async_signal_safe, thread_any;
  atomic_int testing; /* one tester at a time (seed 3.3) */
  int freed;          /* MPI_Request_free was called: released once idle */
} mpix_cr;

/* Registered continuation requests: lookup by handle, and the non-poll-only ones progressed
 * from any interposed call. */
extern atomic_int mpix_ncr;
mpix_cr* mpix_find(MPI_Request r);
void mpix_register(mpix_cr* cr);
void mpix_release(mpix_cr* cr);
/* Test semantics of a continuation request; MPI_ERR_REQUEST for a second tester. */
int mpix_test_cr(mpix_cr* cr, int* flag, MPI_Status* status);
/* Progresses every registered request but `except` that may run continuations outside its
 * test. */
void mpix_progress_others(mpix_cr* except);
/* Persistent requests, recorded by the interposed *_init calls. */
int mpix_is_persistent(MPI_Request r);
void mpix_persistent(MPI_Request r, int add);
/* The empty status a completed continuation request reports. */
void mpix_empty_status(MPI_Status* s);

#endif /* WEFT_MPIX_INTERNAL_H */
