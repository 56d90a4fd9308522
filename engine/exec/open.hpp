// SPDX-License-Identifier: BSD-3-Clause
// Opening and closing the engine a program on the executor runs over, by name: "weft" (the
// Weft engine, over the Weft runtime) or "mpi" (the MPI engine, over MPI_COMM_WORLD with
// MPI_THREAD_MULTIPLE; only in programs built with an MPI's wrapper and -DWEFT_EXEC_MPI).
// The task benchmarks and the applications share it, so both engines start and stop the
// same way everywhere.
#pragma once

#include <cstdio>
#include <string>

#include "weft/engine.h"
#ifdef WEFT_EXEC_MPI
#include <mpi.h>

#include "weft/engine_mpi.h"
#endif

namespace weft::exec {

// The engine named `name`, or null after a message on stderr naming `program`.
inline weft_engine_t open_engine(const std::string& name, const char* program, int& argc,
                                 char**& argv) {
  weft_engine_t e = nullptr;
  int rc = WEFT_ERR_USAGE;
  if (name == "weft") {
    if (weft_g_runtime_init() != WEFT_OK) {
      std::fprintf(stderr, "%s: %s\n", program, weft_last_error());
      return nullptr;
    }
    rc = weft_engine_alloc(nullptr, &e);
  } else if (name == "mpi") {
#ifdef WEFT_EXEC_MPI
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    rc = weft_engine_alloc_mpi(MPI_COMM_WORLD, nullptr, &e);
#else
    (void)argc, (void)argv;
    std::fprintf(stderr,
                 "%s: --engine mpi: this build has no MPI engine (use %s_mpich or %s_openmpi)\n",
                 program, program, program);
    return nullptr;
#endif
  } else {
    std::fprintf(stderr, "%s: --engine %s: weft or mpi\n", program, name.c_str());
    return nullptr;
  }
  if (rc != WEFT_OK) {
    std::fprintf(stderr, "%s: %s\n", program, weft_last_error());
    return nullptr;
  }
  return e;
}

// Frees the engine and finalizes what open_engine started; false after a message.
inline bool close_engine(weft_engine_t& e, const std::string& name, const char* program, int me) {
  bool ok = true;
  if (weft_engine_free(&e) != WEFT_OK) {
    std::fprintf(stderr, "rank %d: %s: %s\n", me, program, weft_last_error());
    ok = false;
  }
#ifdef WEFT_EXEC_MPI
  // Every transfer finished on both sides before finalize: MPICH over UCX's tcp otherwise
  // waits in finalize for a rendezvous acknowledgement the peer, already past its own
  // finalize's first steps, no longer sends.
  if (name == "mpi") {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
  }
#endif
  if (name == "weft") weft_g_runtime_fina();
  return ok;
}

}  // namespace weft::exec
