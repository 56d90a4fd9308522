// SPDX-License-Identifier: BSD-3-Clause
// The counting table of one rank: k-mer -> occurrences, written by every thread at once.
// Shards by hash, each an open-addressing array under its own spinlock (a thread holds one
// for a handful of probes; with thousands of shards two threads rarely meet), growing at
// half full. A shard's array is allocated by its first add, so that the threads touching the
// table's gigabytes for the first time are the counting ones, in parallel, not the one that
// built it. Filled, then read once for the histogram.
#ifndef WEFT_APPS_KMER_TABLE_HPP
#define WEFT_APPS_KMER_TABLE_HPP

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "bloom.hpp"
#include "kmer.hpp"

namespace kmer {

class count_table {
 public:
  explicit count_table(size_t expected) : shards_(nshards) {
    const size_t per = expected / nshards * 2 + 16;
    while (first_ < per) first_ *= 2;
  }

  // Adds `n` occurrences of `k` (hash h = kmer::hash(k)).
  void add(const mer_t& k, uint64_t h, uint32_t n = 1) {
    shard& s = shards_[h % nshards];
    for (int spins = 0; s.lock.test_and_set(std::memory_order_acquire);)
      if (++spins % 64 == 0)
        std::this_thread::yield();  // a holder descheduled: more threads than cores
    if (s.slots.empty()) s.slots.assign(first_, slot{});
    if (2 * (s.used + 1) > s.slots.size()) grow(s);
    slot& e = find(s, k, h);
    if (!e.count) {
      e.key = k;
      ++s.used;
    }
    e.count += n;
    s.lock.clear(std::memory_order_release);
  }

  // count -> number of distinct k-mers seen that many times, over part `part` of `nparts`
  // of the shards (after filling; threads may count the parts at once: sum_histograms).
  std::map<uint64_t, uint64_t> histogram(size_t part = 0, size_t nparts = 1) const {
    std::map<uint64_t, uint64_t> h;
    for (size_t i = part * nshards / nparts; i < (part + 1) * nshards / nparts; ++i)
      for (const slot& e : shards_[i].slots)
        if (e.count) ++h[e.count];
    return h;
  }

  size_t distinct() const {
    size_t n = 0;
    for (const shard& s : shards_) n += s.used;
    return n;
  }

 private:
  static constexpr size_t nshards = 4096;
  struct slot {
    mer_t key{0, 0};
    uint64_t count = 0;  // 0: empty
  };
  struct shard {
    std::atomic_flag lock = ATOMIC_FLAG_INIT;
    size_t used = 0;
    std::vector<slot> slots;
  };

  static slot& find(shard& s, const mer_t& k, uint64_t h) {
    const size_t mask = s.slots.size() - 1;
    for (size_t i = (h >> 12) & mask;; i = (i + 1) & mask)  // low bits chose the shard
      if (!s.slots[i].count || s.slots[i].key == k) return s.slots[i];
  }

  static void grow(shard& s) {
    std::vector<slot> old(s.slots.size() * 2);
    old.swap(s.slots);
    for (const slot& e : old)
      if (e.count) find(s, e.key, hash(e.key)) = e;
  }

  std::vector<shard> shards_;
  size_t first_ = 16;  // a shard's first capacity (a power of two)
};

// One k-mer at its owner: pass 0 fills the filter; pass 1 counts it (every one with
// `exact`, else only those the filter saw repeated).
inline void apply(int pass, bool exact, bloom2* bloom, count_table* table, const mer_t& k,
                  uint64_t h) {
  if (pass == 0)
    bloom->insert(k, h);
  else if (exact || bloom->repeated(k, h))
    table->add(k, h);
}

}  // namespace kmer

#endif
