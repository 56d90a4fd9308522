// A small dense index per thread, for per-thread slots in resources (packet pool deques,
// shared-memory inbox lanes), and a per-thread poll counter. Inline and in the
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

extern thread_local thread_slot this_thread_slot __attribute__((tls_model("initial-exec")));

size_t assign_thread_index();

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
