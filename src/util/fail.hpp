// SPDX-License-Identifier: BSD-3-Clause
// Throwing weft::fatal_error with the call, the argument and the value named.
#pragma once

#include <new>
#include <string>

#include "weft/types.hpp"

namespace weft::util {

[[noreturn]] void fail(const std::string& call, const std::string& argument,
                       const std::string& value, const std::string& reason);

std::string to_hex(const void* p);

// Runs `make` (an allocation); std::bad_alloc becomes Weft's error naming the call, the
// argument whose size it was, and the value.
template <typename Make>
auto allocating(const char* call, const char* argument, size_t value, Make&& make) {
  try {
    return make();
  } catch (const std::bad_alloc&) {
    fail(call, argument, std::to_string(value), "out of memory");
  }
}

}  // namespace weft::util
