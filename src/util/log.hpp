// SPDX-License-Identifier: BSD-3-Clause
// Diagnostics controlled by WEFT_LOG_LEVEL (error, warn, info, debug; default warn).
#pragma once

#include <cstdio>

namespace weft::util {

enum class log_level : int { none = 0, error = 1, warn = 2, info = 3, debug = 4 };

log_level current_log_level();
void set_log_rank(int rank);
void log_message(log_level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace weft::util

#define WEFT_LOG(level, ...)                                                  \
  do {                                                                        \
    if (static_cast<int>(::weft::util::log_level::level) <=                   \
        static_cast<int>(::weft::util::current_log_level()))                  \
      ::weft::util::log_message(::weft::util::log_level::level, __VA_ARGS__); \
  } while (0)

// As WEFT_LOG, at a level chosen at run time (a first occurrence at warn, the rest at debug).
#define WEFT_LOG_AT(level_value, ...)                                                          \
  do {                                                                                         \
    const ::weft::util::log_level weft_log_at_ = (level_value);                                \
    if (static_cast<int>(weft_log_at_) <= static_cast<int>(::weft::util::current_log_level())) \
      ::weft::util::log_message(weft_log_at_, __VA_ARGS__);                                    \
  } while (0)
