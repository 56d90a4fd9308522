// SPDX-License-Identifier: BSD-3-Clause
// Monotonic time in nanoseconds, one spelling for every layer. now_ns() is CLOCK_MONOTONIC
// (a vDSO call, some 20 ns): timeouts, the idle policy, failure detection. coarse_now_ns()
// is CLOCK_MONOTONIC_COARSE (the kernel tick, 1-10 ms, a few ns to read): checks that only
// need to run every so many milliseconds. util::ticks() stays the cheaper counter for
// setting one short duration against another on one thread.
#pragma once

#include <time.h>

#include <cstdint>

namespace weft::util {

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace weft::util
