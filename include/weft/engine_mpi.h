/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI engine (weft/engine.h over MPI, the baseline of seed 000 section 4.2), in the
 * library weft-engine-mpi-mpich or weft-engine-mpi-openmpi, built with that MPI's compiler
 * wrapper. MPI must be initialised with MPI_THREAD_MULTIPLE when the communication thread
 * runs or runtime threads post concurrently (MPI_THREAD_FUNNELED is enough otherwise). */
#ifndef WEFT_ENGINE_MPI_H
#define WEFT_ENGINE_MPI_H

#include <mpi.h>

#include "weft/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An MPI engine on a duplicate of `comm`. `attr` NULL: the defaults (progress_thread and
   put_eager do not apply: MPI has no progress thread, and puts always handshake; an auto
   comm_thread is decided by counting the ranks on this machine: collective). */
int weft_engine_alloc_mpi(MPI_Comm comm, const weft_engine_attr_t* attr, weft_engine_t* engine);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_ENGINE_MPI_H */
