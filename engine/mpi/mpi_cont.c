/* SPDX-License-Identifier: BSD-3-Clause */
/* How the MPI engine finds completed requests in its continuation-based variant (seed 002
 * section 5.3.1, the comparison the seed makes for PaRSEC): every request gets a
 * continuation (MPIX_Continue, mpix/) on one poll-only continuation request when it is
 * started, so there is no set of pending requests to test: a pass is one MPI_Test of the
 * continuation request, whose continuations record which entries completed. Entries never
 * move (a freed one is reused), since a continuation holds its entry's address. Built
 * into libweft-engine-mpi-cont-<flavour>, linked with libweft-mpix-<flavour>. */
#include "engine/mpi/mpi_engine.h"
#include "mpix_continue.h"

/* Runs inside MPI_Test of the continuation request, always under the engine's lock. */
static void on_complete(MPI_Status* st, void* data) {
  mpi_entry* e = data;
  mpi_engine* m = e->owner;
  e->watched = 0;
  m->idx[m->nout] = (int)(e - m->ents);
  m->st[m->nout++] = *st;
}

int mpi_slot_new(mpi_engine* m) {
  if (m->nfree) return m->free_slots[--m->nfree];
  return m->n < mpi_array_max ? m->n++ : -1;
}

void mpi_slot_watch(mpi_engine* m, int i) {
  mpi_entry* e = &m->ents[i];
  e->owner = m;
  e->watched = 1;
  int flag = 0;
  MPIX_Continue(&m->reqs[i], &flag, on_complete, e, &e->st, m->cr); /* flag: always 0 */
}

void mpi_slot_free(mpi_engine* m, int i) {
  m->ents[i].kind = entry_free;
  m->free_slots[m->nfree++] = i;
}

/* A persistent receive cancelled: its continuation runs, and what it recorded is dropped. */
void mpi_slot_cancel(mpi_engine* m, int i) {
  if (m->ents[i].watched) MPI_Cancel(&m->reqs[i]);
  for (int flag; m->ents[i].watched;) MPI_Test(&m->cr, &flag, MPI_STATUS_IGNORE);
  int k = 0;
  for (int j = 0; j < m->nout; ++j)
    if (m->idx[j] != i) {
      m->idx[k] = m->idx[j];
      m->st[k++] = m->st[j];
    }
  m->nout = k;
}

int mpi_collect(mpi_engine* m) {
  int flag;
  MPI_Test(&m->cr, &flag, MPI_STATUS_IGNORE);
  const int out = m->nout;
  m->nout = 0;
  return out;
}

void mpi_slots_settle(mpi_engine* m) {
  (void)m;
}

int mpi_slots_init(mpi_engine* m) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "mpi_continue_poll_only", "true"); /* only the engine's passes run them */
  /* Never complete at attach: nothing tested (no progress) when a request is started. */
  MPI_Info_set(info, "mpi_continue_enqueue_complete", "true");
  const int rc = MPIX_Continue_init(&m->cr, info);
  MPI_Info_free(&info);
  return rc == MPI_SUCCESS ? WEFT_OK
                           : weft_engine_fail("weft_engine_alloc_mpi", "MPIX_Continue_init",
                                              "failed", "no continuation request");
}

void mpi_slots_fini(mpi_engine* m) {
  MPI_Request_free(&m->cr);
}
