// SPDX-License-Identifier: BSD-3-Clause
#include "util/thread_index.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

namespace weft::util {

constinit thread_local thread_slot this_thread_slot
    __attribute__((tls_model("initial-exec"))) = {0, 0};

namespace {

// Indexes are reused: a thread that exits gives its index back (a program that makes
// threads over time would otherwise grow every per-thread table without bound). Before it
// does, every resource keyed by thread index is told (thread_exited), so that what the
// thread kept privately returns to circulation.
struct registry {
  std::mutex lock;
  size_t next = 0;
  std::vector<size_t> free;  // indexes of threads that exited
  std::vector<std::pair<void*, thread_exit_hook>> hooks;
};

registry& reg() {
  static registry* r = new registry;  // never destroyed: threads may exit after main
  return *r;
}

struct index_release {
  size_t index = SIZE_MAX;
  ~index_release() {
    if (index == SIZE_MAX) return;
    registry& r = reg();
    std::lock_guard<std::mutex> g(r.lock);
    for (auto& [owner, fn] : r.hooks) fn(owner, index);
    r.free.push_back(index);
    this_thread_slot.index_plus_one = 0;
  }
};
thread_local index_release t_release;

}  // namespace

size_t assign_thread_index() {
  registry& r = reg();
  size_t i;
  {
    std::lock_guard<std::mutex> g(r.lock);
    if (r.free.empty()) {
      i = r.next++;
    } else {  // the lowest free index, so tables stay dense
      auto it = std::min_element(r.free.begin(), r.free.end());
      i = *it;
      *it = r.free.back();
      r.free.pop_back();
    }
  }
  t_release.index = i;
  this_thread_slot.index_plus_one = i + 1;
  return i;
}

void add_thread_exit_hook(void* owner, thread_exit_hook fn) {
  registry& r = reg();
  std::lock_guard<std::mutex> g(r.lock);
  r.hooks.emplace_back(owner, fn);
}

void remove_thread_exit_hook(void* owner) {
  registry& r = reg();
  std::lock_guard<std::mutex> g(r.lock);
  std::erase_if(r.hooks, [owner](const auto& h) { return h.first == owner; });
}

}  // namespace weft::util
