// SPDX-License-Identifier: BSD-3-Clause
// The counting table of one rank: k-mer -> occurrences, written by every thread at once.
// Shards by hash, each an open-addressing array under its own spinlock (a thread holds one
// for a handful of probes; with thousands of shards two threads rarely meet), growing at
// 80% full: linear probing still ends within a line or two there, and each growth costs
// fresh memory, the dearest thing on a virtual machine (growing at half full, the 39
// million distinct 21-mers of docs/kmer.md's input took 3.4 GB instead of 1.9).
// Every array lies in one arena of huge pages (arena.hpp), untouched until the counting
// threads first write it, in parallel. k-mers reach the table through an apply_pipe, which
// prefetches each one's line a few k-mers before counting it, so that the table's cache
// misses overlap instead of following one another. Filled, then read once for the
// histogram.
#ifndef WEFT_APPS_KMER_TABLE_HPP
#define WEFT_APPS_KMER_TABLE_HPP

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <thread>
#include <vector>

#include "arena.hpp"
#include "bloom.hpp"
#include "kmer.hpp"

namespace kmer {

class count_table {
 public:
  explicit count_table(size_t expected)
      : shards_(nshards), mem_(reserve_for(expected), first_bytes(expected)) {
    const size_t first = first_slots(expected);
    for (shard& s : shards_) {
      s.mask.store(first - 1, std::memory_order_relaxed);
      s.slots.store(take(first), std::memory_order_relaxed);
    }
  }
  ~count_table() {  // the arena unmaps its own; what came from calloc is freed here
    for (shard& s : shards_)
      if (!mem_.owns(s.slots.load(std::memory_order_relaxed)))
        std::free(s.slots.load(std::memory_order_relaxed));
  }
  count_table(const count_table&) = delete;
  count_table& operator=(const count_table&) = delete;

  // Adds `n` occurrences of `k` (hash h = kmer::hash(k)).
  void add(const mer_t& k, uint64_t h, uint32_t n = 1) {
    shard& s = shards_[h % nshards];
    for (int spins = 0; s.lock.test_and_set(std::memory_order_acquire);)
      if (++spins % 64 == 0)
        std::this_thread::yield();  // a holder descheduled: more threads than cores
    if (5 * (s.used + 1) > 4 * s.cap()) grow(s);
    slot& e = find(s.slots.load(std::memory_order_relaxed), s.cap(), k, h);
    if (!e.count) {
      e.key = k;
      ++s.used;
    }
    e.count += n;
    s.lock.clear(std::memory_order_release);
  }

  // Starts bringing in the line where add(k, h) will look first. No lock: a shard growing
  // meanwhile makes it a wasted prefetch, never a wrong count.
  void prefetch(uint64_t h) const {
    const shard& s = shards_[h % nshards];
    const slot* a = s.slots.load(std::memory_order_relaxed);
    __builtin_prefetch(a + ((h >> 12) & (s.mask.load(std::memory_order_relaxed))), 1);
  }

  // count -> number of distinct k-mers seen that many times, over part `part` of `nparts`
  // of the shards (after filling; threads may count the parts at once: sum_histograms).
  std::map<uint64_t, uint64_t> histogram(size_t part = 0, size_t nparts = 1) const {
    std::map<uint64_t, uint64_t> h;
    for (size_t i = part * nshards / nparts; i < (part + 1) * nshards / nparts; ++i) {
      const slot* a = shards_[i].slots.load(std::memory_order_relaxed);
      for (size_t j = 0; j < shards_[i].cap(); ++j)
        if (a[j].count) ++h[a[j].count];
    }
    return h;
  }

  size_t distinct() const {
    size_t n = 0;
    for (const shard& s : shards_) n += s.used;
    return n;
  }
  // Shards whose array lies past the arena's reservation (from calloc): for the tests.
  size_t shards_outside_arena() const {
    size_t n = 0;
    for (const shard& s : shards_) n += !mem_.owns(s.slots.load(std::memory_order_relaxed));
    return n;
  }

 private:
  static constexpr size_t nshards = 4096;
  struct slot {
    mer_t key;
    uint64_t count;  // 0: empty (fresh memory is all zero)
  };
  struct shard {
    std::atomic_flag lock = ATOMIC_FLAG_INIT;
    size_t used = 0;
    std::atomic<slot*> slots{nullptr};
    // Slots - 1 (a power of two, less one): written under the lock, read without it by
    // prefetch.
    std::atomic<size_t> mask{0};
    size_t cap() const { return mask.load(std::memory_order_relaxed) + 1; }
  };

  // A shard's first capacity: twice its share of the expected k-mers, a power of two.
  static size_t first_slots(size_t expected) {
    const size_t per = expected / nshards * 2 + 16;
    size_t n = 16;
    while (n < per) n *= 2;
    return n;
  }
  static size_t first_bytes(size_t expected) {
    return nshards * first_slots(expected) * sizeof(slot);
  }
  // Room for every shard to double twice (1 + 2 + 4 times the first arrays), in address
  // space only: what is never touched costs nothing.
  static size_t reserve_for(size_t expected) { return 8 * first_bytes(expected); }

  // A zeroed array of n slots: from the arena, else from calloc (past the reservation).
  slot* take(size_t n) {
    void* p = mem_.take(n * sizeof(slot));
    if (!p && !(p = std::calloc(n, sizeof(slot)))) throw std::bad_alloc();
    return static_cast<slot*>(p);
  }
  // An array of n slots no longer used: its pages back to the kernel, or to calloc.
  void release(slot* a, size_t n) {
    if (mem_.owns(a))
      arena::give_back(a, n * sizeof(slot));
    else
      std::free(a);
  }

  static slot& find(slot* a, size_t cap, const mer_t& k, uint64_t h) {
    const size_t mask = cap - 1;
    for (size_t i = (h >> 12) & mask;; i = (i + 1) & mask)  // low bits chose the shard
      if (!a[i].count || a[i].key == k) return a[i];
  }

  void grow(shard& s) {
    slot* old = s.slots.load(std::memory_order_relaxed);
    const size_t n = s.cap();
    slot* a = take(2 * n);
    for (size_t i = 0; i < n; ++i)
      if (old[i].count) find(a, 2 * n, old[i].key, hash(old[i].key)) = old[i];
    s.mask.store(2 * n - 1, std::memory_order_relaxed);
    s.slots.store(a, std::memory_order_relaxed);
    release(old, n);
  }

  std::vector<shard> shards_;
  arena mem_;
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

// Applies k-mers `depth` behind their arrival, prefetching each one's filter word or table
// line as it arrives: a thread counting a batch then waits for several misses at once.
// One per thread (or per batch); drain() when the k-mers must be in (push drains by itself
// when the pass changes).
class apply_pipe {
 public:
  apply_pipe(bool exact, bloom2* bloom, count_table* table)
      : exact_(exact), bloom_(bloom), table_(table) {}
  ~apply_pipe() { drain(); }
  apply_pipe(const apply_pipe&) = delete;
  apply_pipe& operator=(const apply_pipe&) = delete;

  void push(int pass, const mer_t& k, uint64_t h) {
    if (pass != pass_) drain();
    pass_ = pass;
    if (bloom_) bloom_->prefetch(pass, h);
    if (pass == 1) table_->prefetch(h);
    entry& e = ring_[n_ % depth];
    if (n_ >= depth) apply(pass_, exact_, bloom_, table_, e.k, e.h);
    e = {k, h};
    ++n_;
  }
  void drain() {
    for (size_t i = n_ > depth ? n_ - depth : 0; i < n_; ++i)
      apply(pass_, exact_, bloom_, table_, ring_[i % depth].k, ring_[i % depth].h);
    n_ = 0;
  }

 private:
  static constexpr size_t depth = 8;
  struct entry {
    mer_t k;
    uint64_t h;
  };
  bool exact_;
  bloom2* bloom_;
  count_table* table_;
  int pass_ = 1;
  size_t n_ = 0;  // pushed since the last drain
  entry ring_[depth]{};
};

}  // namespace kmer

#endif
