// SPDX-License-Identifier: BSD-3-Clause
// The inline puts of a device that await their targets' acknowledgments, oldest first.
// Acknowledgments come back nearly in posting order, so a search from the oldest finds its
// put at once; the vector with swap-removal this replaces scanned half a window of puts per
// acknowledgment (74 instructions per acknowledgment over bench_put_notify's latency and
// rate runs, callgrind). Storage only grows.
// Not thread-safe: the device guards it with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::net::shm {

class put_ring {
 public:
  struct entry {
    int rank;
    uint64_t ctx;
  };

  void push(const entry& e) {
    if (count_ == slots_.size()) grow();
    at(count_++) = e;
  }

  // Removes the put (rank, ctx); false when there is none. The oldest fills the gap, so
  // the others keep their order.
  bool take(int rank, uint64_t ctx) {
    for (size_t j = 0; j < count_; ++j) {
      entry& e = at(j);
      if (e.rank != rank || e.ctx != ctx) continue;
      e = at(0);
      head_ = (head_ + 1) & (slots_.size() - 1);
      --count_;
      return true;
    }
    return false;
  }

  // Drops every put for which pred(entry) holds (a dead peer's), in place: the kept ones
  // move towards the oldest, never over one not yet read.
  template <typename Pred>
  void erase_if(Pred&& pred) {
    size_t n = 0;
    for (size_t j = 0; j < count_; ++j)
      if (!pred(at(j))) at(n++) = at(j);
    count_ = n;
  }

  size_t size() const { return count_; }

 private:
  // The j-th oldest put in flight (j < count_, or the free slot at count_).
  entry& at(size_t j) { return slots_[(head_ + j) & (slots_.size() - 1)]; }

  void grow() {  // to the next power of two, oldest first at 0
    std::vector<entry> s(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t j = 0; j < count_; ++j) s[j] = at(j);
    slots_.swap(s);
    head_ = 0;
  }

  std::vector<entry> slots_;
  size_t head_ = 0, count_ = 0;
};

}  // namespace weft::net::shm
