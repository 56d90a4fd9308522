// SPDX-License-Identifier: BSD-3-Clause
// The initiator's side of shareable memory (shareable.hpp): the peers' allocations that
// this process has mapped, so that a put or get into one is a memcpy. A region whose record
// names a descriptor is mapped on its first access: this process takes a copy of the
// owner's descriptor (pidfd_getfd, allowed where cross-memory attach is), checks that it is
// the file registered (its inode number), and maps the whole file.
//
// Each peer has a fixed number of mapping slots, found without a lock: an access counts
// itself in its slot while it copies, and a slot is reused only when nobody copies through
// it and its region is no longer registered (then the mapping is undone, and the owner's
// memory goes back to the system). With every slot holding a live region, an access goes
// by cross-memory attach instead: nothing waits, nothing grows. Slots are filled under a
// mutex: a region's first access, not the critical path.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "net/shm/regions.hpp"

namespace weft::net::shm {

class peer_maps {
 public:
  peer_maps(const region_table& regions, std::vector<pid_t> pids, int me);
  ~peer_maps();
  peer_maps(const peer_maps&) = delete;
  peer_maps& operator=(const peer_maps&) = delete;

  static constexpr uint32_t nslots = 32;  // per peer

  // The local address of byte `addr` of region `k` of `rank`, whose record `e` the caller
  // holds (region_table::acquire), or nullptr: not shareable, not permitted, or no slot
  // free. On success `use` names the slot to hand back with done() after the copy.
  char* map(int rank, rkey_t k, const region_entry& e, uint64_t addr, uint32_t& use);
  void done(int rank, uint32_t use);

 private:
  struct slot {
    std::atomic<int64_t> refs{-1};  // -1: empty; otherwise the copies through it now
    std::atomic<uint64_t> key{0}, generation{0};
    char* base = nullptr;  // the whole file; written while refs is -1, read after it is not
    size_t len = 0;
  };
  struct per_rank {
    slot slots[nslots];
    int pidfd = -1;
    bool denied = false;  // pidfd_open or pidfd_getfd refused: never tried again
  };
  char* find(per_rank& pr, rkey_t k, uint32_t& use);
  char* add(int rank, per_rank& pr, rkey_t k, const region_entry& e, uint32_t& use);
  bool take_slot(int rank, per_rank& pr, uint32_t& index);
  char* open_file(int rank, per_rank& pr, const region_entry& e, size_t& len);

  const region_table& regions_;
  std::vector<pid_t> pids_;
  std::vector<std::unique_ptr<per_rank>> ranks_;
  std::mutex lock_;
};

}  // namespace weft::net::shm
