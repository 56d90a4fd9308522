/* SPDX-License-Identifier: BSD-3-Clause */
/* MPIX_Continue for an installed MPI (the MPI Continuations proposal, seed 002, sections 2
 * and 3): continuation requests that MPI_Test, MPI_Wait and their array forms accept, and
 * continuations attached to groups of operations. Link libweft-mpix-<flavour> before the
 * MPI library (the mpicc wrapper's own -lmpi comes last): it interposes the test, wait and
 * free calls through the MPI profiling interface. See docs/mpix.md. */
#ifndef WEFT_MPIX_CONTINUE_H
#define WEFT_MPIX_CONTINUE_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The body of a continuation: the statuses given at attach (set before it runs; NULL when
 * MPI_STATUS(ES)_IGNORE was given) and the user data. */
typedef void(MPIX_Continue_cb_function)(MPI_Status* statuses, void* cb_data);

/* A continuation request with the info keys mpi_continue_poll_only, _enqueue_complete,
 * _max_poll, _thread (application | any) and _async_signal_safe (MPI_INFO_NULL: defaults).
 * MPI_ERR_ARG for poll_only with max_poll 0, or a value it cannot read. */
int MPIX_Continue_init(MPI_Request* cont_req, MPI_Info info);

/* Attaches cb to *op_request: it runs once the operation completed, with *status set. A
 * non-persistent request is set to MPI_REQUEST_NULL. *flag = 1 when it had completed already:
 * status set, cb not run (unless the request was made with enqueue_complete). */
int MPIX_Continue(MPI_Request* op_request, int* flag, MPIX_Continue_cb_function* cb, void* cb_data,
                  MPI_Status* status, MPI_Request cont_req);

/* The same for `count` requests at once: cb runs once all of them completed. */
int MPIX_Continueall(int count, MPI_Request* op_requests, int* flag, MPIX_Continue_cb_function* cb,
                     void* cb_data, MPI_Status* statuses, MPI_Request cont_req);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MPIX_CONTINUE_H */
