// SPDX-License-Identifier: BSD-3-Clause
// Asks for a cache line with the intent to write it, ahead of the write. A producer that
// fills lines another core last wrote (the consumer's release of a ring cell) otherwise
// waits a whole cross-core transfer at each one; asked for a few cells ahead, the transfer
// overlaps the messages in between. On x86 this is PREFETCHW (a no-op hint on processors
// without it); elsewhere the compiler's write prefetch.
#pragma once

namespace weft::util {

[[gnu::always_inline]] inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  __asm__ volatile("prefetchw (%0)" ::"r"(p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace weft::util
