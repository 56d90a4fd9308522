// SPDX-License-Identifier: BSD-3-Clause
// A free list of objects of one type that grows in chunks and gives memory back only when
// destroyed: a backend's operations in flight take one without calling the allocator once
// the pool has grown to the most ever in flight together.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "util/spinlock.hpp"

namespace weft::util {

template <typename T, size_t Chunk = 64>
class object_pool {
 public:
  // A value-initialised object.
  T* get() {
    T* t;
    {
      lock_guard<spinlock> g(lock_);
      if (free_.empty()) grow();
      t = free_.back();
      free_.pop_back();
    }
    *t = T{};
    return t;
  }
  void put(T* t) {
    lock_guard<spinlock> g(lock_);
    free_.push_back(t);  // never reallocates: capacity covers every object
  }

 private:
  void grow() {
    chunks_.push_back(std::make_unique<T[]>(Chunk));
    free_.reserve(chunks_.size() * Chunk);
    for (size_t i = 0; i < Chunk; ++i) free_.push_back(&chunks_.back()[i]);
  }
  spinlock lock_;
  std::vector<T*> free_;
  std::vector<std::unique_ptr<T[]>> chunks_;
};

}  // namespace weft::util
