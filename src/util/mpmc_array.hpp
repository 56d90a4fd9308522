// SPDX-License-Identifier: BSD-3-Clause
// Rarely written, often read array (LCI paper 4.1.1): appends and writes take a lock,
// reads are lock-free. A resize publishes a doubled copy; old copies are kept until the
// array is destroyed so a concurrent reader never touches freed memory.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::util {

template <typename T>
class mpmc_array {
 public:
  explicit mpmc_array(size_t initial = 16) {
    auto first = std::make_unique<std::atomic<T>[]>(initial);
    for (size_t i = 0; i < initial; ++i) first[i].store(T{}, std::memory_order_relaxed);
    data_.store(first.get(), std::memory_order_release);
    capacity_.store(initial, std::memory_order_release);
    generations_.push_back(std::move(first));
  }

  // Lock-free; returns T{} for an index never written.
  T get(size_t i) const {
    if (i >= size_.load(std::memory_order_acquire)) return T{};
    return data_.load(std::memory_order_acquire)[i].load(std::memory_order_acquire);
  }
  size_t size() const { return size_.load(std::memory_order_acquire); }

  size_t push_back(T v) {
    std::lock_guard<std::mutex> g(lock_);
    size_t i = size_.load(std::memory_order_relaxed);
    reserve_locked(i + 1);
    data_.load(std::memory_order_relaxed)[i].store(v, std::memory_order_release);
    size_.store(i + 1, std::memory_order_release);
    return i;
  }

  void put(size_t i, T v) {
    std::lock_guard<std::mutex> g(lock_);
    reserve_locked(i + 1);
    data_.load(std::memory_order_relaxed)[i].store(v, std::memory_order_release);
    if (size_.load(std::memory_order_relaxed) <= i) size_.store(i + 1, std::memory_order_release);
  }

 private:
  void reserve_locked(size_t n) {
    size_t cap = capacity_.load(std::memory_order_relaxed);
    if (n <= cap) return;
    size_t ncap = cap;
    while (ncap < n) ncap *= 2;
    auto next = std::make_unique<std::atomic<T>[]>(ncap);
    auto* old = data_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < ncap; ++i)
      next[i].store(i < cap ? old[i].load(std::memory_order_relaxed) : T{},
                    std::memory_order_relaxed);
    data_.store(next.get(), std::memory_order_release);
    capacity_.store(ncap, std::memory_order_release);
    generations_.push_back(std::move(next));
  }

  std::atomic<std::atomic<T>*> data_{nullptr};
  std::atomic<size_t> capacity_{0};
  std::atomic<size_t> size_{0};
  std::mutex lock_;
  std::vector<std::unique_ptr<std::atomic<T>[]>> generations_;
};

}  // namespace weft::util
