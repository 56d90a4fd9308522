// SPDX-License-Identifier: BSD-3-Clause
#include "util/log.hpp"

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/settings.hpp"

namespace weft::util {
namespace {
log_level parse_level() {
  const std::string v = current_text(setting::log_level);
  const char* s = v.c_str();
  if (!*s) return log_level::warn;
  if (!strcmp(s, "none")) return log_level::none;
  if (!strcmp(s, "error")) return log_level::error;
  if (!strcmp(s, "warn")) return log_level::warn;
  if (!strcmp(s, "info")) return log_level::info;
  if (!strcmp(s, "debug")) return log_level::debug;
  fprintf(stderr, "weft: WEFT_LOG_LEVEL = '%s' is not one of none, error, warn, info, debug\n", s);
  return log_level::warn;
}
int g_rank = -1;
const char* level_name(log_level l) {
  switch (l) {
    case log_level::error: return "error";
    case log_level::warn: return "warn";
    case log_level::info: return "info";
    case log_level::debug: return "debug";
    default: return "";
  }
}
}  // namespace

log_level current_log_level() {
  static const log_level level = parse_level();
  return level;
}

void set_log_rank(int rank) {
  g_rank = rank;
}

void log_message(log_level level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "weft[%d] %s: %s\n", g_rank, level_name(level), buf);
}

}  // namespace weft::util
