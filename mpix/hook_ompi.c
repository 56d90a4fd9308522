/* SPDX-License-Identifier: BSD-3-Clause */
/* Open MPI's completion callback. Every Open MPI request completes through
 * ompi_request_complete(), which first calls the request's req_complete_cb; Open MPI's own
 * non-blocking collectives and its continuations branch attach work there. The library
 * sets it at attach, so a completed operation is pushed on its continuation request's stack
 * by whichever thread's progress completed it, and a test finishes just those operations
 * (PMPI_Test on each: O(1)) instead of testing every attached one. The headers are the
 * ones Debian's libopenmpi-dev installs; the layout is Open MPI 4.1's. */
#include "mpix/mpix_internal.h"
#include "ompi/request/request.h"
#include "ompi_config.h"
#include "opal/runtime/opal_progress.h"

const int mpix_hook_available = 1;

int mpix_hook_complete(MPI_Request r) {
  return ((ompi_request_t*)r)->req_complete == REQUEST_COMPLETED;
}

static void push(mpix_op* op) {
  mpix_cr* cr = op->cont->cr;
  mpix_op* head = atomic_load_explicit(&cr->completed, memory_order_relaxed);
  do op->next = head;
  while (!atomic_compare_exchange_weak_explicit(&cr->completed, &head, op, memory_order_release,
                                                memory_order_relaxed));
}

/* Called by Open MPI, on any thread, before the request is marked complete: only a push. */
static int on_complete(ompi_request_t* r) {
  push(r->req_complete_cb_data);
  return 0; /* 0: Open MPI goes on to mark it complete */
}

void mpix_hook_arm(mpix_op* op) {
  ompi_request_t* r = (ompi_request_t*)op->req;
  if (r->req_complete_cb) /* Open MPI's own use: reported now, then tested at every turn */
    push(op);
  else
    ompi_request_set_callback(r, on_complete, op);
}

void mpix_hook_progress(void) {
  opal_progress();
}

int mpix_hook_persistent(MPI_Request r) {
  return ((ompi_request_t*)r)->req_persistent;
}
