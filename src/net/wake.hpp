// SPDX-License-Identifier: BSD-3-Clause
// Sleeping on file descriptors for blocking progress: up to `timeout_us` microseconds until
// one of them is readable (ppoll, so the timeout is not rounded up to milliseconds).
#pragma once

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <thread>

#include "net/backend.hpp"

namespace weft::net {

inline void sleep_on_fds(const int* fds, int n, uint32_t timeout_us) {
  pollfd p[2] = {};
  for (int i = 0; i < n && i < 2; ++i) p[i] = pollfd{fds[i], POLLIN, 0};
  timespec ts{time_t(timeout_us / 1000000), long(timeout_us % 1000000) * 1000};
  ppoll(p, nfds_t(n), &ts, nullptr);  // a signal (EINTR) is a spurious wake: allowed
}

// wait_for_message of a backend with a wake descriptor: sleeps on it once armed (nothing
// pending); a device without one naps up to 50 us at a time. False: something is pending.
inline bool wait_armed(device& d, uint32_t timeout_us) {
  if (d.arm_wake()) {
    const int fd = d.wake_fd();
    sleep_on_fds(&fd, 1, timeout_us);
    return true;
  }
  if (d.wake_fd() >= 0) return false;
  std::this_thread::sleep_for(std::chrono::microseconds(std::min<uint32_t>(timeout_us, 50)));
  return true;
}

}  // namespace weft::net
