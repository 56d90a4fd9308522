// Packet pool (LCI paper 4.1.2): fixed-size buffers in per-thread deques. A thread gets
// and puts at the tail of its own deque; when it runs dry it steals half of a random
// victim's packets from the head. Each deque has its own spinlock, so threads do not
// contend in the common case. get() returns nullptr after a failed steal (retry).
#pragma once

#include <cstddef>
#include <memory>

#include "util/mpmc_array.hpp"
#include "util/spinlock.hpp"

namespace weft::detail {

class packet_pool_impl {
 public:
  packet_pool_impl(size_t packet_size, size_t npackets);
  ~packet_pool_impl();

  void* get();
  void put(void* packet);
  bool owns(const void* p) const {
    auto c = static_cast<const char*>(p);
    return c >= region_ && c < region_ + packet_size_ * npackets_;
  }
  const char* region() const { return region_; }
  size_t packet_size() const { return packet_size_; }
  size_t npackets() const { return npackets_; }
  // Packets currently in the deques (not handed out); exact only when quiescent.
  size_t available() const;

 private:
  struct alignas(util::cache_line) deque {
    util::spinlock lock;
    size_t head = 0, count = 0;
    std::unique_ptr<void*[]> slots;
    size_t capacity = 0;
    void push_back(void* p) { slots[(head + count++) % capacity] = p; }
    void* pop_back() { return count ? slots[(head + --count) % capacity] : nullptr; }
    void* pop_front() {
      void* p = slots[head];
      head = (head + 1) % capacity;
      --count;
      return p;
    }
  };
  deque& local();
  bool steal_into(deque& mine);

  size_t packet_size_, npackets_;
  char* region_;
  util::mpmc_array<deque*> deques_;
};

}  // namespace weft::detail
