#include "util/thread_index.hpp"

#include <atomic>

namespace weft::util {

thread_local thread_slot this_thread_slot __attribute__((tls_model("initial-exec"))) = {0, 0};

size_t assign_thread_index() {
  static std::atomic<size_t> next{0};
  size_t i = next.fetch_add(1, std::memory_order_relaxed);
  this_thread_slot.index_plus_one = i + 1;
  return i;
}

}  // namespace weft::util
