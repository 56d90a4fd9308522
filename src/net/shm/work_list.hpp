// SPDX-License-Identifier: BSD-3-Clause
// Transfers in flight on a device. Any thread may add; one thread at a time advances them
// (a try-lock: a second poller skips the list instead of waiting).
#pragma once

#include <atomic>
#include <vector>

#include "util/spinlock.hpp"

namespace weft::net::shm {

template <typename T>
class work_list {
 public:
  void add(const T& item) {
    util::lock_guard<util::spinlock> g(incoming_lock_);
    incoming_.push_back(item);
    has_incoming_.store(true, std::memory_order_release);
    pending_.fetch_add(1, std::memory_order_release);
  }

  // fn(T&) returns true when the item is finished and may be dropped.
  template <typename Fn>
  size_t advance(Fn&& fn) {
    if (pending_.load(std::memory_order_acquire) == 0) return 0;
    if (!owner_.try_lock()) return 0;
    if (has_incoming_.load(std::memory_order_acquire)) take_incoming();
    size_t finished = 0;
    for (size_t i = 0; i < items_.size();) {
      if (fn(items_[i])) {
        items_[i] = items_.back();
        items_.pop_back();
        ++finished;
      } else {
        ++i;
      }
    }
    if (finished) pending_.fetch_sub(finished, std::memory_order_release);
    owner_.unlock();
    return finished + 1;
  }

  // Blocks out advance() (it waits for a running one) and drops items matching pred, which
  // may change the items it keeps.
  template <typename Pred>
  void remove_if(Pred&& pred) {
    util::lock_guard<util::spinlock> o(owner_);
    take_incoming();
    size_t removed = 0;
    for (size_t i = 0; i < items_.size();) {
      if (pred(items_[i])) {
        items_[i] = items_.back();
        items_.pop_back();
        ++removed;
      } else {
        ++i;
      }
    }
    if (removed) pending_.fetch_sub(removed, std::memory_order_release);
  }

  bool empty() const { return pending_.load(std::memory_order_acquire) == 0; }

 private:
  // Under owner_: the items added since, into items_. Only when there are some: a poll of
  // transfers in flight took a second lock for nothing on every call.
  void take_incoming() {
    util::lock_guard<util::spinlock> g(incoming_lock_);
    for (auto& t : incoming_) items_.push_back(t);
    incoming_.clear();
    has_incoming_.store(false, std::memory_order_relaxed);
  }

  util::spinlock owner_;
  std::vector<T> items_;
  util::spinlock incoming_lock_;
  std::vector<T> incoming_;
  std::atomic<bool> has_incoming_{false};  // incoming_ is not empty (set under its lock)
  std::atomic<size_t> pending_{0};
};

}  // namespace weft::net::shm
