// Backlog queue (LCI paper 4.1.5): work that could not be submitted and cannot be handed
// back to the user (a control message to a full peer queue, a post whose caller refused
// retry, a signal to a full completion queue). Rare, so a spinlocked deque; an atomic
// count lets progress skip an empty queue without touching the lock.
#pragma once

#include <atomic>
#include <deque>
#include <functional>

#include "util/spinlock.hpp"

namespace weft::detail {

class backlog_queue {
 public:
  // An item returns true when it completed, false to stay queued.
  using item = std::function<bool()>;

  void push(item it) {
    util::lock_guard<util::spinlock> g(lock_);
    q_.push_back(std::move(it));
    size_.fetch_add(1, std::memory_order_release);
  }

  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
  size_t size() const { return size_.load(std::memory_order_acquire); }

  // Tries the queued items in order, each at most once, and stops after a run of
  // `max_failures` items that could not go yet (they move to the back, so the next drain
  // starts with others). Without that stop, a backlog of n signals waiting on one full
  // completion queue made every progress call cost n: 40000 active messages into a queue
  // of 1024 took 17.7 s. One thread at a time (try-lock).
  static constexpr size_t max_failures = 32;
  size_t drain() {
    if (empty() || !drain_lock_.try_lock()) return 0;
    size_t n = size(), done = 0, failures = 0;
    for (size_t i = 0; i < n && failures < max_failures; ++i) {
      item it;
      {
        util::lock_guard<util::spinlock> g(lock_);
        if (q_.empty()) break;
        it = std::move(q_.front());
        q_.pop_front();
      }
      if (it()) {
        size_.fetch_sub(1, std::memory_order_release);
        ++done;
        failures = 0;
      } else {
        ++failures;
        util::lock_guard<util::spinlock> g(lock_);
        q_.push_back(std::move(it));
      }
    }
    drain_lock_.unlock();
    return done;
  }

 private:
  util::spinlock lock_, drain_lock_;
  std::deque<item> q_;
  std::atomic<size_t> size_{0};
};

}  // namespace weft::detail
