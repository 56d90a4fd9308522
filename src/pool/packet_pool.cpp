// SPDX-License-Identifier: BSD-3-Clause
#include "pool/packet_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "util/fail.hpp"
#include "util/mpmc_queue.hpp"
#include "util/thread_index.hpp"

namespace weft::impl {

packet_pool_impl::packet_pool_impl(size_t packet_size, size_t npackets)
    : packet_size_(packet_size),
      npackets_(npackets),
      pow2_((packet_size & (packet_size - 1)) == 0),
      shift_(unsigned(__builtin_ctzll(packet_size))),
      out_(new std::atomic<uint8_t>[npackets ? npackets : 1]()),
      cache_max_(std::min<size_t>(32, npackets / 64)),
      deques_(64) {
  region_ =
      static_cast<char*>(std::aligned_alloc(4096, ((packet_size * npackets + 4095) / 4096) * 4096));
  if (!region_)
    util::fail("alloc_packet_pool", "npackets", std::to_string(npackets), "out of memory");
  deque& d = local();
  for (size_t i = 0; i < npackets; ++i) d.push_back(region_ + i * packet_size);
  util::add_thread_exit_hook(this, [](void* pool, size_t idx) {
    static_cast<packet_pool_impl*>(pool)->thread_exited(idx);
  });
}

// A thread's private stack goes back into its deque, where others can steal it, before its
// index passes to a new thread.
void packet_pool_impl::thread_exited(size_t idx) {
  deque* d = deques_.get(idx);
  if (!d) return;
  util::lock_guard<util::spinlock> g(d->lock);
  const size_t n = d->cached.load(std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i) d->push_back(d->cache[i]);
  d->cached.store(0, std::memory_order_relaxed);
}

packet_pool_impl::~packet_pool_impl() {
  util::remove_thread_exit_hook(this);
  for (size_t i = 0; i < deques_.size(); ++i) delete deques_.get(i);
  std::free(region_);
}

packet_pool_impl::deque& packet_pool_impl::make_local(size_t idx) {
  deque* d = deques_.get(idx);
  if (!d) {
    d = new deque;
    const size_t capacity = util::round_up_pow2(npackets_ ? npackets_ : 1);
    d->mask = capacity - 1;
    d->slots.reset(new void*[capacity]);
    deques_.put(idx, d);
  }
  return *d;
}

bool packet_pool_impl::steal_into(deque& mine) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  size_t n = deques_.size();
  if (n < 2) return false;
  deque* victim = deques_.get(rng() % n);
  if (!victim || victim == &mine || !victim->lock.try_lock()) return false;
  size_t take = (victim->count + 1) / 2;
  void* moved[256];
  size_t got = 0;
  while (got < take && got < 256) moved[got++] = victim->pop_front();
  victim->lock.unlock();
  if (!got) return false;
  util::lock_guard<util::spinlock> g(mine.lock);
  for (size_t i = 0; i < got; ++i) mine.push_back(moved[i]);
  return true;
}

// The private stack is empty: refill it from the deque, or steal.
void* packet_pool_impl::get_slow(deque& d) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      util::lock_guard<util::spinlock> g(d.lock);
      if (void* p = d.pop_back()) {
        // Refill half of the private stack while the lock is held anyway.
        size_t n = 0;
        while (n < cache_max_ / 2 && d.count) d.cache[n++] = d.pop_back();
        d.cached.store(n, std::memory_order_relaxed);
        return handed_out(p);
      }
    }
    if (!steal_into(d)) {
      // one sweep over every deque before reporting the pool empty
      for (size_t i = 0; i < deques_.size(); ++i) {
        deque* v = deques_.get(i);
        if (!v || v == &d || !v->lock.try_lock()) continue;
        void* p = v->pop_back();
        v->lock.unlock();
        if (p) return handed_out(p);
      }
      return nullptr;
    }
  }
  return nullptr;
}

void packet_pool_impl::refuse_return(const void* p, const char* call) const {
  util::fail(call, "packet", util::to_hex(p),
             "this packet is already back in its pool (returned twice, or never handed out)");
}

void packet_pool_impl::put_slow(deque& d, void* packet) {
  // The private stack is full (or has no room at all in a tiny pool): half of the stack goes to the
  // deque, where other threads can steal it.
  const size_t n = d.cached.load(std::memory_order_relaxed);
  util::lock_guard<util::spinlock> g(d.lock);
  d.push_back(packet);
  const size_t keep = cache_max_ - cache_max_ / 2;
  for (size_t i = keep; i < n; ++i) d.push_back(d.cache[i]);
  d.cached.store(keep, std::memory_order_relaxed);
}

size_t packet_pool_impl::available() const {
  size_t total = 0;
  for (size_t i = 0; i < deques_.size(); ++i)
    if (deque* d = deques_.get(i)) total += d->count + d->cached.load(std::memory_order_relaxed);
  return total;
}

}  // namespace weft::impl
