// SPDX-License-Identifier: BSD-3-Clause
// Weft bootstrapped from MPI: include in a program that uses MPI and call after MPI_Init
// (any MPI library: this header is compiled with the program's own mpicxx, and Weft itself
// does not link MPI). Weft and MPI traffic then coexist in the program.
//
//   MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
//   weft::use_mpi_bootstrap(MPI_COMM_WORLD);
//   weft::g_runtime_init();
#pragma once

#include <mpi.h>

#include "weft/weft.hpp"

namespace weft {

// Rank and size from `comm`, ranks on this host from MPI_COMM_TYPE_SHARED, and the address
// exchange by MPI_Allgather on a duplicate of `comm` (so it never matches the program's
// own messages). The duplicate is never freed: MPI_Finalize releases it.
inline void use_mpi_bootstrap(MPI_Comm comm = MPI_COMM_WORLD) {
  MPI_Comm dup, node;
  MPI_Comm_dup(comm, &dup);
  bootstrap_ops_t ops;
  MPI_Comm_rank(dup, &ops.rank);
  MPI_Comm_size(dup, &ops.size);
  MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, ops.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &ops.local_rank);
  MPI_Comm_size(node, &ops.local_size);
  MPI_Comm_free(&node);
  ops.allgather = [dup](const void* send, void* recv, size_t len) {
    MPI_Allgather(send, int(len), MPI_BYTE, recv, int(len), MPI_BYTE, dup);
  };
  set_bootstrap(std::move(ops));
}

}  // namespace weft
