// SPDX-License-Identifier: BSD-3-Clause
// A cheap monotonic counter for comparing short durations on one thread (the time stamp
// counter where there is one, nanoseconds otherwise). Its unit is unspecified: use it only
// to set one duration against another.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include "util/clock.hpp"
#endif

namespace weft::util {

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return uint64_t(now_ns());
#endif
}

}  // namespace weft::util
