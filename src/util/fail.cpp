// SPDX-License-Identifier: BSD-3-Clause
#include "util/fail.hpp"

#include <cstdio>

namespace weft {

fatal_error::fatal_error(std::string call, std::string argument, std::string value,
                         const std::string& reason)
    : std::runtime_error("weft: " + call + ": " + argument + " = " + value + ": " + reason),
      call_(std::move(call)),
      argument_(std::move(argument)),
      value_(std::move(value)) {}

namespace util {

void fail(const std::string& call, const std::string& argument, const std::string& value,
          const std::string& reason) {
  throw fatal_error(call, argument, value, reason);
}

std::string to_hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

void check_range(const char* call, const char* argument, size_t v, size_t lo, size_t hi) {
  if (v >= lo && v <= hi) return;
  auto shown = [](size_t x) {
    if (x >= 1024 && !(x & (x - 1))) return "2^" + std::to_string(__builtin_ctzll(x));
    return std::to_string(x);
  };
  fail(call, argument, std::to_string(v), "must be " + shown(lo) + " .. " + shown(hi));
}

}  // namespace util
}  // namespace weft
