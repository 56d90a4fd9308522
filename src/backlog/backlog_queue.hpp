// SPDX-License-Identifier: BSD-3-Clause
// Backlog queue (LCI paper 4.1.5): work that could not be submitted and cannot be handed
// back to the user (a control message to a full peer queue, a post whose caller refused
// retry, a signal to a full completion queue). Items are plain values of one type, kept in
// a ring that grows by doubling under its lock up to a hard capacity: no allocation per
// item, and a bound the owner states (see device_impl for how the device keeps under it).
// Rare, so a spinlock; an atomic count lets progress skip an empty queue without the lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

#include "util/spinlock.hpp"

namespace weft::impl {

template <typename Item>
class backlog_queue {
  static_assert(std::is_trivially_copyable_v<Item>, "backlog items are plain values");

 public:
  explicit backlog_queue(size_t hard_capacity) : hard_(std::max<size_t>(hard_capacity, 1)) {}

  // False when the queue already holds its hard capacity (nothing queued then).
  bool push(const Item& it) {
    util::lock_guard<util::spinlock> g(lock_);
    if (count_ + in_hand_ >= hard_) return false;
    if (count_ == cap_ && !grow()) return false;
    ring_[(head_ + count_) % cap_] = it;
    ++count_;
    size_.fetch_add(1, std::memory_order_release);
    return true;
  }

  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
  // Items queued or being tried by drain.
  size_t size() const { return size_.load(std::memory_order_acquire); }
  size_t hard_capacity() const { return hard_; }

  // Tries the queued items in order, each at most once, with `run(Item&)` (true: done),
  // and stops after a run of `max_failures` items that could not go yet (they move to the
  // back, so the next drain starts with others). Without that stop, a backlog of n signals
  // waiting on one full completion queue made every progress call cost n: 40000 active
  // messages into a queue of 1024 took 17.7 s. One thread at a time (try-lock). An item
  // that fails keeps its place in the count, so pushes meanwhile cannot take it.
  static constexpr size_t max_failures = 32;
  template <typename Run>
  size_t drain(Run&& run) {
    if (empty() || !drain_lock_.try_lock()) return 0;
    util::lock_guard<util::spinlock> holding(drain_lock_, util::adopt_lock);
    size_t n = size(), done = 0, failures = 0;
    for (size_t i = 0; i < n && failures < max_failures; ++i) {
      Item it;
      {
        util::lock_guard<util::spinlock> g(lock_);
        if (count_ == 0) break;
        it = ring_[head_];
        head_ = (head_ + 1) % cap_;
        --count_;
        ++in_hand_;
      }
      const bool ok = run(it);
      util::lock_guard<util::spinlock> g(lock_);
      --in_hand_;
      if (ok) {
        size_.fetch_sub(1, std::memory_order_release);
        ++done;
        failures = 0;
        continue;
      }
      ++failures;
      // Room is certain: the item held its place (count_ + in_hand_ < hard_), and a full
      // ring grows (std::bad_alloc, as anywhere, when memory is gone).
      if (count_ == cap_) grow();
      ring_[(head_ + count_) % cap_] = it;
      ++count_;
    }
    return done;
  }

  // Tries the items oldest first and stops at the first that cannot go yet, which keeps
  // its place. For work that waits on one resource (transfers waiting for the backend's
  // channels): once one cannot go, a later one cannot either, and trying every queued
  // transfer on every progress call (up to max_failures of them, two lock round trips
  // each) took the time of the copies: 64 KiB messages, 64 in flight, went at 32 GB/s
  // against 41 with this (2026-11-26). One thread at a time, as drain.
  template <typename Run>
  size_t drain_in_order(Run&& run) {
    if (empty() || !drain_lock_.try_lock()) return 0;
    util::lock_guard<util::spinlock> holding(drain_lock_, util::adopt_lock);
    size_t done = 0;
    for (;;) {
      Item it;
      {
        util::lock_guard<util::spinlock> g(lock_);
        if (count_ == 0) break;
        it = ring_[head_];  // only the drainer moves head_; a push may grow the ring
      }
      const bool ok = run(it);
      util::lock_guard<util::spinlock> g(lock_);
      if (!ok) {
        ring_[head_] = it;
        break;
      }
      head_ = (head_ + 1) % cap_;
      --count_;
      size_.fetch_sub(1, std::memory_order_release);
      ++done;
    }
    return done;
  }

 private:
  // Under lock_: doubles the ring (at least 16 items, at most the hard capacity).
  bool grow() {
    const size_t cap = std::min(hard_, std::max<size_t>(16, cap_ * 2));
    if (cap <= cap_) return false;
    std::unique_ptr<Item[]> ring(new Item[cap]);
    for (size_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % cap_];
    ring_ = std::move(ring);
    cap_ = cap;
    head_ = 0;
    return true;
  }

  util::spinlock lock_, drain_lock_;
  const size_t hard_;
  std::unique_ptr<Item[]> ring_;
  size_t cap_ = 0, head_ = 0, count_ = 0, in_hand_ = 0;
  std::atomic<size_t> size_{0};
};

}  // namespace weft::impl
