#include "comp/comp.hpp"

namespace weft::detail {

sync_impl::sync_impl(size_t threshold)
    : comp_impl(comp_kind::sync), threshold_(threshold), statuses_(new status_t[threshold]) {}

bool sync_impl::signal(const status_t& s) {
  size_t i = claimed_.fetch_add(1, std::memory_order_relaxed);
  if (i < threshold_) statuses_[i] = s;
  ready_.fetch_add(1, std::memory_order_release);
  return true;
}

bool sync_impl::test(status_t* out) {
  if (ready_.load(std::memory_order_acquire) < threshold_) return false;
  if (out)
    for (size_t i = 0; i < threshold_; ++i) out[i] = statuses_[i];
  // Reset for reuse; signals beyond the threshold before the reset are a usage error.
  claimed_.store(0, std::memory_order_relaxed);
  ready_.store(0, std::memory_order_release);
  return true;
}

}  // namespace weft::detail
