#include "util/thread_index.hpp"

#include <atomic>

namespace weft::util {

size_t thread_index() {
  static std::atomic<size_t> next{0};
  thread_local size_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace weft::util
