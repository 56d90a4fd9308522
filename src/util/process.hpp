// SPDX-License-Identifier: BSD-3-Clause
// Whether a process of this host (and PID namespace) still exists.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cerrno>

namespace weft::util {

// EPERM: it exists but belongs to someone else.
inline bool process_exists(pid_t pid) {
  return kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace weft::util
