// SPDX-License-Identifier: BSD-3-Clause
#include "comp/comp.hpp"

namespace weft::impl {

sync_impl::sync_impl(size_t threshold)
    : comp_impl(comp_kind::sync),
      threshold_(threshold),
      ring_(new status_t[2 * threshold]),
      capacity_(2 * threshold) {}

void sync_impl::grow() {
  std::unique_ptr<status_t[]> ring(new status_t[capacity_ * 2]);
  for (size_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % capacity_];
  ring_ = std::move(ring);
  capacity_ *= 2;
  head_ = 0;
}

bool sync_impl::signal(const status_t& s) {
  util::lock_guard<util::spinlock> g(lock_);
  if (count_ == capacity_) grow();
  ring_[(head_ + count_) % capacity_] = s;
  ready_.store(++count_, std::memory_order_release);
  return true;
}

bool sync_impl::test(status_t* out) {
  if (ready_.load(std::memory_order_acquire) < threshold_) return false;
  util::lock_guard<util::spinlock> g(lock_);
  if (count_ < threshold_) return false;  // another tester took them
  if (out)
    for (size_t i = 0; i < threshold_; ++i) out[i] = ring_[(head_ + i) % capacity_];
  head_ = (head_ + threshold_) % capacity_;
  count_ -= threshold_;
  ready_.store(count_, std::memory_order_release);
  return true;
}

}  // namespace weft::impl
