// SPDX-License-Identifier: BSD-3-Clause
// A device's performance counters (the rows of weft/counters.def). A shared device is
// used by many threads, so counting must not make them share a cache line: each thread
// index below `nshards` owns a shard it alone writes, with a plain load and store (no
// atomic read-modify-write, no lock prefix); a read sums the shards. Threads past that
// (rare: more than 64 live threads on one device) share a last shard with fetch_add.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "util/thread_index.hpp"
#include "weft/types.hpp"

namespace weft::impl {

class device_counters {
 public:
  static constexpr size_t ncounters = size_t(counter_t::count);
  static constexpr size_t nshards = 64;

  device_counters() : shards_(new shard[nshards + 1]) {}

  // Inline: on the path of every post and arrival.
  void add(counter_t c, uint64_t n = 1) { bump(own_shard(), c, n); }
  // One more of `one` and `n` more of `n_of` (a message and its bytes), one index lookup.
  void add_two(counter_t one, counter_t n_of, uint64_t n) {
    shard* s = own_shard();
    bump(s, one, 1);
    bump(s, n_of, n);
  }
  // Raises a high-water mark to `v` (off the critical path: backlog pushes).
  void raise(counter_t c, uint64_t v) {
    std::atomic<uint64_t>& a = shards_[nshards].v[size_t(c)];
    uint64_t cur = a.load(std::memory_order_relaxed);
    while (cur < v && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  }
  // The sum over the shards (for a high-water mark, the mark itself).
  uint64_t read(counter_t c) const {
    uint64_t sum = 0;
    for (size_t s = 0; s <= nshards; ++s)
      sum += shards_[s].v[size_t(c)].load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(64) shard {
    std::atomic<uint64_t> v[ncounters] = {};
  };
  // The calling thread's shard; past `nshards`, the shared last one.
  shard* own_shard() const {
    const size_t t = util::thread_index();
    return &shards_[t < nshards ? t : nshards];
  }
  // A shard of its own is written by one thread only: a plain load and store suffice.
  void bump(shard* s, counter_t c, uint64_t n) const {
    std::atomic<uint64_t>& a = s->v[size_t(c)];
    if (s != &shards_[nshards]) [[likely]]
      a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    else
      a.fetch_add(n, std::memory_order_relaxed);
  }
  std::unique_ptr<shard[]> shards_;
};

// The name of a counter, as in counters.def.
const char* counter_name(counter_t c);

}  // namespace weft::impl
