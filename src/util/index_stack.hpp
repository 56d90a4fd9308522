// SPDX-License-Identifier: BSD-3-Clause
// Lock-free LIFO of indices 0..n-1 (a Treiber stack whose head carries a tag against ABA).
// Used as the free list of fixed-capacity slabs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace weft::util {

class index_stack {
 public:
  static constexpr uint32_t empty = UINT32_MAX;

  explicit index_stack(uint32_t n) : next_(new std::atomic<uint32_t>[n]), n_(n) {
    for (uint32_t i = 0; i < n; ++i) next_[i].store(i + 1 < n ? i + 1 : empty);
    head_.store(pack(n ? 0 : empty, 0));
  }

  uint32_t pop() {
    uint64_t h = head_.load(std::memory_order_acquire);
    for (;;) {
      uint32_t idx = uint32_t(h);
      if (idx == empty) return empty;
      uint64_t nh = pack(next_[idx].load(std::memory_order_relaxed), uint32_t(h >> 32) + 1);
      if (head_.compare_exchange_weak(h, nh, std::memory_order_acq_rel, std::memory_order_acquire))
        return idx;
    }
  }

  void push(uint32_t idx) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    for (;;) {
      next_[idx].store(uint32_t(h), std::memory_order_relaxed);
      uint64_t nh = pack(idx, uint32_t(h >> 32) + 1);
      if (head_.compare_exchange_weak(h, nh, std::memory_order_release, std::memory_order_relaxed))
        return;
    }
  }

  uint32_t capacity() const { return n_; }

 private:
  static uint64_t pack(uint32_t idx, uint32_t tag) { return (uint64_t(tag) << 32) | idx; }
  alignas(64) std::atomic<uint64_t> head_;
  std::unique_ptr<std::atomic<uint32_t>[]> next_;
  uint32_t n_;
};

}  // namespace weft::util
