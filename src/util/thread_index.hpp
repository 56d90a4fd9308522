// SPDX-License-Identifier: BSD-3-Clause
// A small dense index per thread, for per-thread slots in resources (packet pool deques,
// shared-memory inbox lanes), and a per-thread poll counter. An exited thread's index is
// given to the next new thread. Inline and in the
// initial-exec TLS model: the general-dynamic model of a shared library costs a call to
// __tls_get_addr on every access (measured at about 20 instructions per message).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::util {

struct thread_slot {
  size_t index_plus_one;  // 0: not yet assigned (zero-initialised, so no TLS guard)
  uint32_t polls;
};

extern thread_local constinit thread_slot this_thread_slot
    __attribute__((tls_model("initial-exec")));

size_t assign_thread_index();

// Called with a thread's index when the thread exits, before the index is given to another
// thread (under a lock: keep it short). A resource keyed by thread index registers one to
// take back what the thread kept privately, and removes it before it goes away.
using thread_exit_hook = void (*)(void* owner, size_t index);
void add_thread_exit_hook(void* owner, thread_exit_hook fn);
void remove_thread_exit_hook(void* owner);

inline size_t thread_index() {
  size_t i = this_thread_slot.index_plus_one;
  return i ? i - 1 : assign_thread_index();
}

// Counts this thread's calls to progress (advanced by the core's progress, read by the
// backends); for spreading occasional work without shared state.
inline uint32_t next_thread_poll() {
  return ++this_thread_slot.polls;
}
inline uint32_t thread_polls() {
  return this_thread_slot.polls;
}

}  // namespace weft::util
