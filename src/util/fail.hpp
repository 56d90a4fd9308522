// Throwing weft::fatal_error with the call, the argument and the value named.
#pragma once

#include <string>

#include "weft/types.hpp"

namespace weft::util {

[[noreturn]] void fail(const std::string& call, const std::string& argument,
                       const std::string& value, const std::string& reason);

std::string to_hex(const void* p);

}  // namespace weft::util
