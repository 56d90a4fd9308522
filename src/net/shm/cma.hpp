// SPDX-License-Identifier: BSD-3-Clause
// Cross-memory attach (process_vm_readv/writev). A single call moves at most about 2 GiB
// and reports a short count without an error, so every transfer is looped to completion.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace weft::net::shm {

// 0 on success, otherwise an errno value.
int cma_read(pid_t pid, void* local, uint64_t remote, size_t size);
int cma_write(pid_t pid, const void* local, uint64_t remote, size_t size);

}  // namespace weft::net::shm
