// SPDX-License-Identifier: BSD-3-Clause
// Memory that the other processes of this host can map: what alloc_memory hands out. An
// allocation is an anonymous memory file (memfd) mapped here, its descriptor kept open for
// as long as the allocation lives, so that a peer allowed to attach to this process (the
// permission cross-memory attach needs) takes its own copy with pidfd_getfd and maps the
// same pages. A put into such a region is then one memcpy by the initiator: no system call
// per transfer, no pinning, no CPU of the target (peer_maps.hpp is the initiator's side).
// The allocations of this process are recorded here, so that registering memory inside
// one (by any backend, mixed included) finds its descriptor.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::net::shm {

// A new zeroed allocation of at least `size` bytes (whole pages), or nullptr with errno set.
void* alloc_shareable(size_t size);
// Gives back an allocation of alloc_shareable; false when `base` is not one.
bool free_shareable(void* base);
// Whether [base, base + size) lies in one allocation: then its descriptor, the offset of
// `base` in it, and the descriptor's inode number (a peer checks the file it took by that
// number: should a stale registration outlive its allocation, the descriptor may name
// another file by then).
bool find_shareable(const void* base, size_t size, int& fd, uint64_t& offset, uint64_t& ino);

}  // namespace weft::net::shm
