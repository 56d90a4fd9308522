// SPDX-License-Identifier: BSD-3-Clause
// Work that layers above the core attach to every progress call, without the core depending
// on them: one pointer, loaded (relaxed) once per progress call, null when nothing waits.
#pragma once

#include <atomic>

namespace weft::impl {

// Run at the end of progress (the continuations of freed requests: src/cont).
inline std::atomic<void (*)()> progress_hook{nullptr};

}  // namespace weft::impl
