#include "util/env.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/fail.hpp"

namespace weft::util {

bool env_set(const char* name) {
  return std::getenv(name) != nullptr;
}

size_t env_size(const char* name, size_t fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  size_t mult = 1;
  if (end && *end) {
    switch (*end) {
      case 'k':
      case 'K': mult = size_t(1) << 10; break;
      case 'm':
      case 'M': mult = size_t(1) << 20; break;
      case 'g':
      case 'G': mult = size_t(1) << 30; break;
      default: mult = 0;
    }
    if (mult && end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B")) mult = 0;
  }
  if (errno || end == s || mult == 0 || s[0] == '-')
    fail("environment", name, s, "expected a non-negative size such as 4096, 64K or 2M");
  return size_t(v) * mult;
}

bool env_bool(const char* name, bool fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on"))
    return true;
  if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off"))
    return false;
  fail("environment", name, s, "expected 1/0, true/false, yes/no or on/off");
}

std::string env_string(const char* name, const std::string& fallback) {
  const char* s = std::getenv(name);
  return (s && *s) ? std::string(s) : fallback;
}

}  // namespace weft::util
