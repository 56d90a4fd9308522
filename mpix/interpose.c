/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI calls this library takes over through the profiling interface: the test and wait
 * family, which must accept continuation requests (mixed with ordinary ones) and progress
 * the continuations that may run outside their own test; MPI_Request_free, which releases
 * an active continuation request once its continuations ran (seed 3.2); and the
 * persistent-request constructors, so that attach knows which requests stay the program's.
 * With no continuation request registered every call goes straight to its PMPI_ twin. */
#include <sched.h>
#include <stdlib.h>

#include "mpix/mpix_internal.h"

/* The array calls with continuation requests among ordinary ones are done element by
 * element: a continuation request's test, an ordinary request's PMPI_Test. */
static int test_one(MPI_Request* r, int* flag, MPI_Status* s) {
  mpix_cr* cr = mpix_find(*r);
  if (cr) return mpix_test_cr(cr, flag, s);
  return PMPI_Test(r, flag, s);
}

static int any_cr(int n, MPI_Request* reqs) {
  for (int i = 0; i < n; ++i)
    if (mpix_find(reqs[i])) return 1;
  return 0;
}

static MPI_Status* at(MPI_Status* array, int i) {
  return array == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &array[i];
}

int MPI_Test(MPI_Request* r, int* flag, MPI_Status* s) {
  if (!atomic_load(&mpix_ncr)) return PMPI_Test(r, flag, s);
  mpix_cr* cr = mpix_find(*r);
  if (cr) return mpix_test_cr(cr, flag, s);
  mpix_progress_others(NULL);
  return PMPI_Test(r, flag, s);
}

int MPI_Wait(MPI_Request* r, MPI_Status* s) {
  if (!atomic_load(&mpix_ncr)) return PMPI_Wait(r, s);
  for (int flag = 0, spins = 0;; ++spins) {
    int rc = MPI_Test(r, &flag, s);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (spins % 64 == 63) sched_yield();
  }
}

/* All complete or none taken: the continuation requests are asked first (a test leaves
 * them as they are), then the ordinary ones at once with PMPI_Testall. */
int MPI_Testall(int n, MPI_Request reqs[], int* flag, MPI_Status sts[]) {
  if (!atomic_load(&mpix_ncr)) return PMPI_Testall(n, reqs, flag, sts);
  mpix_progress_others(NULL);
  if (!any_cr(n, reqs)) return PMPI_Testall(n, reqs, flag, sts);
  MPI_Request* plain = malloc(sizeof(*plain) * (size_t)n);
  int* where = malloc(sizeof(int) * (size_t)n);
  int m = 0, rc = MPI_SUCCESS, all = 1;
  for (int i = 0; i < n && rc == MPI_SUCCESS; ++i) {
    mpix_cr* cr = mpix_find(reqs[i]);
    int f = 0;
    if (!cr) {
      plain[m] = reqs[i];
      where[m++] = i;
    } else if ((rc = mpix_test_cr(cr, &f, at(sts, i))) == MPI_SUCCESS && !f) {
      all = 0;
    }
  }
  if (rc == MPI_SUCCESS && all && m) {
    MPI_Status* ps =
        sts == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : malloc(sizeof(*ps) * (size_t)m);
    rc = PMPI_Testall(m, plain, &all, ps);
    for (int k = 0; k < m && all; ++k) {
      reqs[where[k]] = plain[k];
      if (ps != MPI_STATUSES_IGNORE) sts[where[k]] = ps[k];
    }
    if (ps != MPI_STATUSES_IGNORE) free(ps);
  }
  *flag = rc == MPI_SUCCESS && all;
  free(plain);
  free(where);
  return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int* index, int* flag, MPI_Status* s) {
  if (!atomic_load(&mpix_ncr) || !any_cr(n, reqs)) {
    if (atomic_load(&mpix_ncr)) mpix_progress_others(NULL);
    return PMPI_Testany(n, reqs, index, flag, s);
  }
  int active = 0;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    ++active;
    int rc = test_one(&reqs[i], flag, s);
    if (rc != MPI_SUCCESS) return rc;
    if (*flag) {
      *index = i;
      return MPI_SUCCESS;
    }
  }
  *index = MPI_UNDEFINED;
  *flag = active == 0;
  if (*flag) mpix_empty_status(s);
  return MPI_SUCCESS;
}

int MPI_Testsome(int n, MPI_Request reqs[], int* outcount, int idx[], MPI_Status sts[]) {
  if (!atomic_load(&mpix_ncr) || !any_cr(n, reqs)) {
    if (atomic_load(&mpix_ncr)) mpix_progress_others(NULL);
    return PMPI_Testsome(n, reqs, outcount, idx, sts);
  }
  int active = 0, out = 0;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    ++active;
    int flag = 0;
    int rc = test_one(&reqs[i], &flag, at(sts, out));
    if (rc != MPI_SUCCESS) return rc;
    if (flag) idx[out++] = i;
  }
  *outcount = active ? out : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

/* The waits: the tests again until done, yielding now and then (a continuation request
 * has no event a blocking wait could sleep on). */
int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
  if (!atomic_load(&mpix_ncr)) return PMPI_Waitall(n, reqs, sts);
  for (int flag = 0, spins = 0;; ++spins) {
    int rc = MPI_Testall(n, reqs, &flag, sts);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (spins % 64 == 63) sched_yield();
  }
}

int MPI_Waitany(int n, MPI_Request reqs[], int* index, MPI_Status* s) {
  if (!atomic_load(&mpix_ncr)) return PMPI_Waitany(n, reqs, index, s);
  for (int flag = 0, spins = 0;; ++spins) {
    int rc = MPI_Testany(n, reqs, index, &flag, s);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (spins % 64 == 63) sched_yield();
  }
}

int MPI_Waitsome(int n, MPI_Request reqs[], int* outcount, int idx[], MPI_Status sts[]) {
  if (!atomic_load(&mpix_ncr)) return PMPI_Waitsome(n, reqs, outcount, idx, sts);
  for (int spins = 0;; ++spins) {
    int rc = MPI_Testsome(n, reqs, outcount, idx, sts);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;
    if (spins % 64 == 63) sched_yield();
  }
}

/* An active continuation request is released once its continuations have run; they still
 * run, from the interposed calls of any thread (seed 3.2). */
int MPI_Request_free(MPI_Request* r) {
  mpix_cr* cr = r ? mpix_find(*r) : NULL;
  if (!cr) {
    if (r && *r != MPI_REQUEST_NULL) mpix_persistent_set(*r, 0);
    return PMPI_Request_free(r);
  }
  *r = MPI_REQUEST_NULL;
  mpix_free_cr(cr);
  return MPI_SUCCESS;
}

/* Persistent point-to-point requests stay the program's after attach. */
#define MPIX_PERSISTENT(name)                                                                     \
  int MPI_##name(const void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, \
                 MPI_Request* r) {                                                                \
    int rc = PMPI_##name(buf, count, type, peer, tag, comm, r);                                   \
    if (rc == MPI_SUCCESS && !mpix_persistent_set(*r, 1)) rc = MPI_ERR_NO_MEM;                    \
    return rc;                                                                                    \
  }
MPIX_PERSISTENT(Send_init)
MPIX_PERSISTENT(Ssend_init)
MPIX_PERSISTENT(Bsend_init)
MPIX_PERSISTENT(Rsend_init)

int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                  MPI_Request* r) {
  int rc = PMPI_Recv_init(buf, count, type, peer, tag, comm, r);
  if (rc == MPI_SUCCESS && !mpix_persistent_set(*r, 1)) rc = MPI_ERR_NO_MEM;
  return rc;
}
