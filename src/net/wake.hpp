// SPDX-License-Identifier: BSD-3-Clause
// Sleeping on file descriptors for blocking progress: up to `timeout_us` microseconds until
// one of them is readable (ppoll, so the timeout is not rounded up to milliseconds).
#pragma once

#include <poll.h>

#include <cstdint>
#include <ctime>

namespace weft::net {

inline void sleep_on_fds(const int* fds, int n, uint32_t timeout_us) {
  pollfd p[2] = {};
  for (int i = 0; i < n && i < 2; ++i) p[i] = pollfd{fds[i], POLLIN, 0};
  timespec ts{time_t(timeout_us / 1000000), long(timeout_us % 1000000) * 1000};
  ppoll(p, nfds_t(n), &ts, nullptr);  // a signal (EINTR) is a spurious wake: allowed
}

}  // namespace weft::net
