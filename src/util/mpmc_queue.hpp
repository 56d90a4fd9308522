// SPDX-License-Identifier: BSD-3-Clause
// Bounded multi-producer multi-consumer queue (sequence-numbered cells, after D. Vyukov's
// design). No locks, no allocation after construction; push fails when full. A producer
// known to be the only one may push without a compare-and-swap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/spinlock.hpp"

namespace weft::util {

// The smallest power of two >= n; n must be at most 2^63 (callers check their sizes).
inline size_t round_up_pow2(size_t n) {
  if (n <= 1) return 1;
  return size_t(1) << (64 - __builtin_clzll(n - 1));
}

template <typename T>
class mpmc_queue {
 public:
  explicit mpmc_queue(size_t capacity)
      : mask_(round_up_pow2(capacity < 2 ? 2 : capacity) - 1), cells_(new cell[mask_ + 1]) {
    for (size_t i = 0; i <= mask_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  bool push(const T& v) {
    return push_with([&](T& slot) { slot = v; });
  }
  bool pop(T& out) {
    return pop_with([&](T& slot) { out = slot; });
  }

  // push and pop that write or read the value in its cell (a wide T need not be copied
  // whole): `fill(T&)` runs once a cell is claimed, `take(T&)` before it is given back.
  // `single`: the caller is the queue's only producer (consumers may be many), and takes
  // the cell with a plain store of the tail, whose line stays with it, instead of a
  // compare-and-swap. One function for both, so that `fill` is inlined at one place.
  template <typename Fill>
  [[gnu::always_inline]] bool push_with(Fill&& fill, bool single = false) {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      cell& c = cells_[pos & mask_];
      size_t seq = c.seq.load(std::memory_order_acquire);
      intptr_t dif = intptr_t(seq) - intptr_t(pos);
      if (dif == 0) {
        if (single)
          tail_.store(pos + 1, std::memory_order_relaxed);
        else if (!tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed))
          continue;
        fill(c.value);
        c.seq.store(pos + 1, std::memory_order_release);
        return true;
      } else if (dif < 0) {
        return false;
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  template <typename Take>
  [[gnu::always_inline]] bool pop_with(Take&& take) {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      cell& c = cells_[pos & mask_];
      size_t seq = c.seq.load(std::memory_order_acquire);
      intptr_t dif = intptr_t(seq) - intptr_t(pos + 1);
      if (dif == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          take(c.value);
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  size_t size_approx() const {
    size_t t = tail_.load(std::memory_order_relaxed), h = head_.load(std::memory_order_relaxed);
    return t > h ? t - h : 0;
  }
  size_t capacity() const { return mask_ + 1; }

 private:
  struct alignas(cache_line) cell {
    std::atomic<size_t> seq;
    T value;
  };
  const size_t mask_;
  std::unique_ptr<cell[]> cells_;
  alignas(cache_line) std::atomic<size_t> tail_{0};
  alignas(cache_line) std::atomic<size_t> head_{0};
};

}  // namespace weft::util
