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
  void add(counter_t c, uint64_t n = 1) {
    const size_t t = util::thread_index();
    if (t < nshards) [[likely]]
      bump_own(shards_[t], c, n);
    else
      shards_[nshards].v[size_t(c)].fetch_add(n, std::memory_order_relaxed);
  }
  // One more of `one` and `n` more of `n_of` (a message and its bytes), one index lookup
  // and one test of whose shard it is.
  void add_two(counter_t one, counter_t n_of, uint64_t n) {
    const size_t t = util::thread_index();
    if (t < nshards) [[likely]] {
      bump_own(shards_[t], one, 1);
      bump_own(shards_[t], n_of, n);
    } else {
      shards_[nshards].v[size_t(one)].fetch_add(1, std::memory_order_relaxed);
      shards_[nshards].v[size_t(n_of)].fetch_add(n, std::memory_order_relaxed);
    }
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
  // A shard of its own is written by one thread only: a plain load and store suffice.
  static void bump_own(shard& s, counter_t c, uint64_t n) {
    std::atomic<uint64_t>& a = s.v[size_t(c)];
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::unique_ptr<shard[]> shards_;
};

// The name of a counter, as in counters.def.
const char* counter_name(counter_t c);

}  // namespace weft::impl
