// SPDX-License-Identifier: BSD-3-Clause
// Packet pool (LCI paper 4.1.2): fixed-size buffers in per-thread deques. A thread gets
// and puts at the tail of its own deque; when it runs dry it steals half of a random
// victim's packets from the head. Each deque has its own spinlock, so threads do not
// contend in the common case. get() returns nullptr after a failed steal (retry).
//
// In front of its deque, each thread keeps a small private stack that only it touches, so
// a get or put usually takes no lock (a locked instruction per packet twice per message
// was a measurable part of an active message's cost). The stack holds at most
// npackets / 64 (and at most 32) packets and trades half of them with the deque when it
// runs empty or full; stealers cannot reach it, so a thread that stops using the pool
// keeps at most that many packets out of circulation.
//
// Each packet has an "out" byte: set by get, cleared by put, which refuses a packet that is
// not out (returned twice, or never handed out) instead of handing it out twice later. The
// byte travels with the packet's owner (plain loads and stores, no locked instruction).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "util/generation.hpp"
#include "util/mpmc_array.hpp"
#include "util/spinlock.hpp"
#include "util/thread_index.hpp"

namespace weft::impl {

class packet_pool_impl {
 public:
  WEFT_GENERATIONAL_MEMORY  // behind packet_pool_t handles, which carry a generation
  packet_pool_impl(size_t packet_size, size_t npackets);
  ~packet_pool_impl();

  // Inline, the private stack only: a get and a put on every message that uses a packet.
  // A function that also held the locked paths spilled registers on every call (17 of a
  // get's 66 instructions); those paths live out of line.
  [[gnu::always_inline]] void* get() {
    deque& d = local();
    if (size_t n = d.cached.load(std::memory_order_relaxed)) [[likely]] {
      d.cached.store(n - 1, std::memory_order_relaxed);
      return handed_out(d.cache[n - 1]);
    }
    return get_slow(d);
  }
  // Returns a packet; `call` names the public call in the error for a packet that is not
  // out (a double return).
  [[gnu::always_inline]] void put(void* packet, const char* call = "put_upacket") {
    std::atomic<uint8_t>& o = out(packet);
    if (o.load(std::memory_order_relaxed) != 1) [[unlikely]]
      refuse_return(packet, call);
    o.store(0, std::memory_order_relaxed);
    deque& d = local();
    const size_t n = d.cached.load(std::memory_order_relaxed);
    if (n < cache_max_) [[likely]] {
      d.cache[n] = packet;
      d.cached.store(n + 1, std::memory_order_relaxed);
      return;
    }
    put_slow(d, packet);
  }
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
    size_t mask = 0;  // capacity - 1, a power of two: no division on the critical path
    // The owner's private stack, on lines of its own: stealers touch only the line above
    // (available() reads `cached`, but only when the pool is quiescent).
    alignas(util::cache_line) void* cache[32];
    std::atomic<size_t> cached{0};
    void push_back(void* p) { slots[(head + count++) & mask] = p; }
    void* pop_back() { return count ? slots[(head + --count) & mask] : nullptr; }
    void* pop_front() {
      void* p = slots[head];
      head = (head + 1) & mask;
      --count;
      return p;
    }
  };
  [[gnu::always_inline]] deque& local() {
    const size_t idx = util::thread_index();
    if (deque* d = deques_.get(idx)) [[likely]]
      return *d;
    return make_local(idx);
  }
  [[gnu::noinline]] deque& make_local(size_t idx);          // a thread's first use
  [[gnu::noinline]] void* get_slow(deque& d);               // the private stack is empty
  [[gnu::noinline]] void put_slow(deque& d, void* packet);  // ... or full
  bool steal_into(deque& mine);
  void thread_exited(size_t idx);

  std::atomic<uint8_t>& out(const void* p) {
    const size_t off = size_t(static_cast<const char*>(p) - region_);
    return out_[pow2_ ? off >> shift_ : off / packet_size_];
  }
  // The pool's own tail of get: marks the packet out.
  void* handed_out(void* p) {
    if (p) out(p).store(1, std::memory_order_relaxed);
    return p;
  }
  [[noreturn, gnu::cold]] void refuse_return(const void* p, const char* call) const;

  size_t packet_size_, npackets_;
  bool pow2_;       // packet_size is a power of two (the runtime's pools always are) ...
  unsigned shift_;  // ... and this its log2: a packet's index without a division
  std::unique_ptr<std::atomic<uint8_t>[]> out_;
  size_t cache_max_;  // private stack bound: npackets / 64, at most 32
  char* region_;
  util::mpmc_array<deque*> deques_;
};

}  // namespace weft::impl
