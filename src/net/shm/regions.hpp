// Registered memory on shared memory. Each rank keeps a table of its registered regions in
// a segment every local peer maps, so whoever touches a region (a peer writing or reading
// it by cross-memory attach, or the owner copying a pipelined put into it) checks the
// handle's generation and the bounds against the owner's own record first, and holds the
// region while it works: deregistration waits for accesses in progress and refuses new
// ones, so a stale handle can never reach memory that has been given back.
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

namespace weft::bootstrap {
class bootstrap;
}

namespace weft::net::shm {

struct alignas(util::cache_line) region_entry {
  std::atomic<uint64_t> state;  // generation << 1 | live
  uint64_t base;
  uint64_t size;
  std::atomic<uint32_t> users;  // accesses in progress, by any local rank
};

class region_table {
 public:
  // Collective: creates this rank's table and maps every peer's.
  region_table(bootstrap::bootstrap& boot, int context_id, size_t nentries);

  // The owner's side. add() fails (fatal_error) when the table is full.
  rkey_t add(void* base, size_t size);
  void retire(rkey_t k);      // refuses new accesses from now on
  bool idle(rkey_t k) const;  // no access in progress
  void recycle(rkey_t k);     // the slot may be reused (after idle)

  // Anyone's side: checks and holds region k of `rank` for an access to [addr, addr+size).
  // nullptr: held (release it when done); otherwise why it was refused. Key 0 is the
  // core's own protocol buffers: nothing to check or hold.
  const char* acquire(int rank, rkey_t k, uint64_t addr, size_t size);
  void release(int rank, rkey_t k);
  // Checks without holding (at posting; the access itself checks again).
  const char* check(int rank, rkey_t k, uint64_t addr, size_t size) const;

 private:
  region_entry* entry(int rank, uint64_t key) const;

  int me_;
  size_t nentries_;
  std::vector<std::unique_ptr<segment>> segs_;  // by rank
  std::vector<region_entry*> tables_;           // by rank
  std::mutex lock_;                             // the owner's free list
  std::vector<uint32_t> free_;
};

}  // namespace weft::net::shm
