// WEFT_* environment defaults. Every variable read here is listed in docs/configuration.md.
#pragma once

#include <cstddef>
#include <string>

namespace weft::util {

// Size with an optional K/M/G suffix (powers of 1024). Throws fatal_error on garbage.
size_t env_size(const char* name, size_t fallback);
bool env_bool(const char* name, bool fallback);
std::string env_string(const char* name, const std::string& fallback);
// Whether `name` is set at all (even empty): how a launcher's environment is recognised.
bool env_set(const char* name);

}  // namespace weft::util
