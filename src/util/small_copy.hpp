// Copies of a few dozen bytes of run-time length without a call into the C library:
// message headers and inject payloads are 8 to 48 bytes, and a call to memcpy (through the
// PLT, then its size dispatch) costs more instructions than the copy itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::util {

inline void small_copy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  // Two overlapping fixed-size moves cover every length in [k, 2k].
  if (n >= 16 && n <= 32) {
    char a[16], b[16];
    std::memcpy(a, s, 16);
    std::memcpy(b, s + n - 16, 16);
    std::memcpy(d, a, 16);
    std::memcpy(d + n - 16, b, 16);
  } else if (n >= 8 && n < 16) {
    uint64_t a, b;
    std::memcpy(&a, s, 8);
    std::memcpy(&b, s + n - 8, 8);
    std::memcpy(d, &a, 8);
    std::memcpy(d + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    std::memcpy(&a, s, 4);
    std::memcpy(&b, s + n - 4, 4);
    std::memcpy(d, &a, 4);
    std::memcpy(d + n - 4, &b, 4);
  } else if (n < 4) {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    std::memcpy(d, s, n);
  }
}

}  // namespace weft::util
