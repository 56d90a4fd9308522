// SPDX-License-Identifier: BSD-3-Clause
// Work that layers above the core attach to every progress call, without the core depending
// on them: one pointer, loaded (relaxed) once per progress call, null when nothing waits;
// and, per thread, bookkeeping that a layer put off until this thread's outermost progress
// call returns (one atomic update for a batch of completions instead of one per item).
#pragma once

#include <atomic>

namespace weft::impl {

// Run at the end of progress (the continuations of freed requests: src/cont).
inline std::atomic<void (*)()> progress_hook{nullptr};

// This thread's progress calls in flight (nested when a callback progresses), and what to
// run when the outermost returns: set by a layer that deferred work (src/cont: continuations
// handing themselves back to their request), cleared by the function itself. initial-exec:
// read twice per progress call; the default model calls __tls_get_addr in a shared library.
struct progress_scope_state {
  int depth;
  void (*at_exit)();
};
inline thread_local progress_scope_state t_progress __attribute__((tls_model("initial-exec")));

// Brackets one progress call; its end runs the deferred work, also when an error unwinds it.
struct progress_scope {
  progress_scope() { ++t_progress.depth; }
  ~progress_scope() {
    if (--t_progress.depth == 0 && t_progress.at_exit) [[unlikely]]
      t_progress.at_exit();
  }
  progress_scope(const progress_scope&) = delete;
  progress_scope& operator=(const progress_scope&) = delete;
};

}  // namespace weft::impl
