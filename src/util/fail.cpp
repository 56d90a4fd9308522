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

}  // namespace util
}  // namespace weft
