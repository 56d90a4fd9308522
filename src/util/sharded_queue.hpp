// SPDX-License-Identifier: BSD-3-Clause
// A bounded MPMC queue made of up to `nshards` + 1 rings: one per thread index below
// nshards, each made when the thread of that index first pushes, and one that the threads
// of higher indices share. A thread pushes into its own ring and pops from its own ring
// first, then from the others in turn. A ring of its own has one producer, which pushes
// without a compare-and-swap (a locked instruction costs 5-6 ns on an AMD EPYC, one per
// message on the path of every completion); the shared ring takes the usual one.
//
// Why: one shared ring costs two contended read-modify-writes per push and pop (the tail
// and the head) plus the cell, each a cache-line transfer between cores; two threads that
// each push and pop on one queue ran at a twentieth of one thread's rate (3 vs 84 M pairs/s
// here). With a ring per thread, a thread that consumes what it produced (a thread that
// progresses a device and pops its queue) touches only its own lines. Order is kept per
// producing thread: what one thread pushed is popped in the order it was pushed, as with one
// ring; across producers no order exists anyway. Each ring holds `capacity` entries, so a
// queue that k threads signal may hold k x capacity (memory: made rings only).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "util/mpmc_queue.hpp"
#include "util/thread_index.hpp"

namespace weft::util {

template <typename T>
class sharded_queue {
 public:
  static constexpr size_t nshards = 16;  // rings of one producer; with the shared one at
                                         // most 32 (`used_` is a mask)

  explicit sharded_queue(size_t capacity)
      : capacity_(capacity), spare_(new mpmc_queue<T>(capacity)) {}
  ~sharded_queue() {
    for (auto& s : shards_) {
      mpmc_queue<T>* q = s.load(std::memory_order_relaxed);
      if (q != spare_) delete q;
    }
    delete spare_;
  }
  sharded_queue(const sharded_queue&) = delete;
  sharded_queue& operator=(const sharded_queue&) = delete;

  // Inline, with the ring's own push and pop: on the path of every completion.
  template <typename Fill>
  [[gnu::always_inline]] bool push_with(Fill&& fill) {
    const size_t t = thread_index();
    const size_t me = t < nshards ? t : nshards;
    mpmc_queue<T>* q = shards_[me].load(std::memory_order_acquire);
    if (!q) [[unlikely]]
      q = make_ring(me);
    return q->push_with(fill, q != spare_);  // this thread's own ring: the only producer
  }

  template <typename Take>
  [[gnu::always_inline]] bool pop_with(Take&& take) {
    // One ring in use (one thread signals this queue; the usual case): no thread index, no
    // sweep.
    const uint32_t used = used_.load(std::memory_order_acquire);
    if ((used & (used - 1)) == 0) [[likely]] {
      if (!used) return false;
      return shards_[size_t(__builtin_ctz(used))].load(std::memory_order_relaxed)->pop_with(take);
    }
    return pop_any(used, take);
  }

  size_t size_approx() const {
    size_t n = 0;
    for (const auto& s : shards_)
      if (const mpmc_queue<T>* q = s.load(std::memory_order_acquire)) n += q->size_approx();
    return n;
  }

 private:
  // Ring `me`, made on the first push of a thread of that index: a new one for a thread's
  // own ring, the spare for the shared one. If memory runs out the shared ring (the spare,
  // made at construction, so it always exists) takes the entry instead: nothing is refused
  // for want of a ring, and a ring of one producer never gets a second one.
  [[gnu::noinline]] mpmc_queue<T>* make_ring(size_t me) {
    mpmc_queue<T>* fresh = spare_;
    if (me != nshards) {
      try {
        fresh = new mpmc_queue<T>(capacity_);
      } catch (const std::bad_alloc&) {
        me = nshards;
      }
    }
    mpmc_queue<T>* expect = nullptr;
    if (!shards_[me].compare_exchange_strong(expect, fresh, std::memory_order_acq_rel)) {
      if (fresh != spare_) delete fresh;  // the shared ring, made by another thread first
      return expect;
    }
    used_.fetch_or(uint32_t(1) << me, std::memory_order_release);
    return fresh;
  }
  // Several rings in use: our own first, then the others, starting after our own (each
  // consumer sweeps from a different place): the rings made at or above ours, then those
  // below, visiting only the bits of `used` (no modulo of 17 per ring).
  template <typename Take>
  [[gnu::noinline]] bool pop_any(uint32_t used, Take& take) {
    const uint32_t from_me = ~uint32_t(0) << std::min(thread_index(), nshards);
    for (uint32_t part : {used & from_me, used & ~from_me})
      for (; part; part &= part - 1)
        if (shards_[size_t(__builtin_ctz(part))].load(std::memory_order_relaxed)->pop_with(take))
          return true;
    return false;
  }

  const size_t capacity_;
  mpmc_queue<T>* const spare_;     // the shared ring, and the fallback when memory runs out
  std::atomic<uint32_t> used_{0};  // bit i: ring i exists
  std::atomic<mpmc_queue<T>*> shards_[nshards + 1] = {};  // the last: shared
};

}  // namespace weft::util
