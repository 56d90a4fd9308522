// SPDX-License-Identifier: BSD-3-Clause
// Test-and-test-and-set spinlock with a try_lock for the paper's try-lock wrappers.
#pragma once

#include <atomic>
#include <cstddef>

namespace weft::util {

inline constexpr size_t cache_line = 64;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class spinlock {
 public:
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void lock() {
    while (!try_lock()) {
      while (locked_.load(std::memory_order_relaxed)) cpu_relax();
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Tag for a lock_guard that takes over a lock already held (after a successful try_lock).
struct adopt_lock_t {};
inline constexpr adopt_lock_t adopt_lock{};

template <typename Lock>
class lock_guard {
 public:
  explicit lock_guard(Lock& l) : l_(l) { l_.lock(); }
  lock_guard(Lock& l, adopt_lock_t) : l_(l) {}
  ~lock_guard() { l_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  Lock& l_;
};

}  // namespace weft::util
