/* SPDX-License-Identifier: BSD-3-Clause */
/* How the MPI engine finds completed requests, as PaRSEC's engine does (seed 000 section
 * 4.2.3): MPI_Testsome over the whole request array each pass, entries appended at the
 * back and the array compacted after a pass so free entries stay at the back. */
#include "engine/mpi/mpi_engine.h"

int mpi_slot_new(mpi_engine* m) {
  return m->n < mpi_array_max ? m->n++ : -1;
}

void mpi_slot_watch(mpi_engine* m, int i) {
  (void)m;
  (void)i;
}

void mpi_slot_free(mpi_engine* m, int i) {
  m->ents[i].kind = entry_free; /* compacted away by mpi_slots_settle */
}

void mpi_slot_cancel(mpi_engine* m, int i) {
  MPI_Cancel(&m->reqs[i]);
  MPI_Wait(&m->reqs[i], MPI_STATUS_IGNORE);
}

int mpi_collect(mpi_engine* m) {
  int out = 0;
  if (m->n) MPI_Testsome(m->n, m->reqs, &out, m->idx, m->st);
  return out == MPI_UNDEFINED ? 0 : out;
}

void mpi_slots_settle(mpi_engine* m) {
  int k = 0;
  for (int i = 0; i < m->n; ++i) {
    if (m->ents[i].kind == entry_free) continue;
    m->reqs[k] = m->reqs[i];
    m->ents[k++] = m->ents[i];
  }
  m->n = k;
}

int mpi_slots_init(mpi_engine* m) {
  (void)m;
  return WEFT_OK;
}

void mpi_slots_fini(mpi_engine* m) {
  (void)m;
}
