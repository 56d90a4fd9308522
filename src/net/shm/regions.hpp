// SPDX-License-Identifier: BSD-3-Clause
// Registered memory on shared memory. Each rank keeps a table of its registered regions in
// a segment every local peer maps, so whoever touches a region (a peer writing or reading
// it by cross-memory attach, or the owner copying a pipelined put into it) checks the
// handle and the bounds against the owner's own record first, and holds the region while
// it works: deregistration waits for accesses in progress and refuses new ones, so a stale
// handle can never reach memory that has been given back.
//
// A handle (rkey) is whatever 128-bit name the owner registered the region under: a number
// of the table's own, or, in a mixed job, the network backend's key for the same memory, so
// that one handle serves a peer on this host and a peer across the network alike. Records
// are found by hashing the name (open addressing, linear probing); names are never reused.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/backend.hpp"
#include "net/shm/segment.hpp"
#include "util/spinlock.hpp"
#include "util/unguessable.hpp"

namespace weft::bootstrap {
class bootstrap;
}

namespace weft::net::shm {

struct alignas(util::cache_line) region_entry {
  std::atomic<uint64_t> state;  // generation << 1 | live; the generation grows per use
  std::atomic<uint64_t> name_key, name_generation;
  uint64_t base;
  uint64_t size;
  // Shareable memory (shareable.hpp): the owner's descriptor of the file the region lies
  // in, the file's inode number and the region's offset in it; map_fd -1 otherwise.
  int32_t map_fd;
  uint64_t map_ino, map_offset;
  // Accesses in progress, by any local rank. A line of its own: the owner's inline puts
  // hold the region on every put, and sharing the line with the fields above made each
  // initiator's check at posting miss on it again (a cross-core transfer per put).
  alignas(util::cache_line) std::atomic<uint32_t> users;
};

class region_table {
 public:
  // Collective: creates this rank's table and maps every peer's.
  region_table(bootstrap::bootstrap& boot, int context_id, size_t nentries);

  // The owner's side, by slot. add() fails (fatal_error) when the table is full; `name`
  // must not have been used before (key 0 is reserved). A region inside a shareable
  // allocation is recorded with its descriptor, for peers to map.
  uint32_t add(void* base, size_t size, rkey_t name);
  void retire(uint32_t slot);      // refuses new accesses from now on
  bool idle(uint32_t slot) const;  // no access in progress
  void recycle(uint32_t slot);     // the slot may be reused (after idle)
  // A name of the table's own, for registrations that have no other.
  rkey_t next_name() { return rkey_t{names_.next(), 0}; }

  // Anyone's side: checks and holds region `k` of `rank` for an access to [addr, addr+size).
  // nullptr: held in `slot` (release it when done); otherwise why it was refused. Key 0
  // names no region: refused.
  const char* acquire(int rank, rkey_t k, uint64_t addr, size_t size, uint32_t& slot);
  void release(int rank, uint32_t slot);
  // The record an access holds (slot from acquire).
  const region_entry& entry(int rank, uint32_t slot) const { return tables_[size_t(rank)][slot]; }
  // Whether `rank` has region `k` registered now.
  bool live(int rank, rkey_t k) const;
  // Whether region `k` of `rank` lies in shareable memory (at posting: the access checks
  // again, holding the record).
  bool shareable(int rank, rkey_t k) const;
  // Checks without holding (at posting; the access itself checks again).
  const char* check(int rank, rkey_t k, uint64_t addr, size_t size) const;
  // The slot where the search for `k` starts.
  uint32_t home(rkey_t k) const;

 private:
  struct header {
    std::atomic<uint32_t> attached;   // peers that mapped the table (to unlink it)
    std::atomic<uint32_t> max_probe;  // the farthest any record lies from its home slot
    uint64_t cookie;                  // the job's: a peer of another job refuses the table
  };
  uint32_t next(uint32_t slot) const { return slot + 1 < nentries_ ? slot + 1 : 1; }
  static bool named(const region_entry& e, rkey_t k);
  // Calls found(entry, slot, state, why) on each live record of `rank` named `k`, in search
  // order, until it returns true; then returns `why`. Otherwise why nothing was found.
  template <typename F>
  const char* search(int rank, rkey_t k, F&& found) const;
  static const char* outside(const region_entry& e, uint64_t addr, size_t size);

  int me_;
  uint32_t nentries_;
  std::vector<std::unique_ptr<segment>> segs_;  // by rank
  std::vector<header*> headers_;                // by rank
  std::vector<region_entry*> tables_;           // by rank
  std::mutex lock_;                             // the owner's slots in use
  std::vector<bool> in_use_;
  uint32_t used_ = 0;
  util::unguessable names_;
};

}  // namespace weft::net::shm
