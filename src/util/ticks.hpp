// SPDX-License-Identifier: BSD-3-Clause
// A cheap monotonic counter for comparing short durations on one thread (the time stamp
// counter where there is one, nanoseconds otherwise). Its unit is unspecified: use it only
// to set one duration against another.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace weft::util {

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
#endif
}

}  // namespace weft::util
