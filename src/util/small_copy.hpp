// SPDX-License-Identifier: BSD-3-Clause
// Copies of a few dozen bytes of run-time length without a call into the C library:
// message headers and inject payloads are 8 to 48 bytes, and a call to memcpy (through the
// PLT, then its size dispatch) costs more instructions than the copy itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::util {

// Two overlapping moves of a W-byte word cover every length in [sizeof(W), 2 sizeof(W)].
template <typename W>
inline void copy_overlapping(char* d, const char* s, size_t n) {
  W a, b;
  std::memcpy(&a, s, sizeof(W));
  std::memcpy(&b, s + n - sizeof(W), sizeof(W));
  std::memcpy(d, &a, sizeof(W));
  std::memcpy(d + n - sizeof(W), &b, sizeof(W));
}

struct bytes16 {
  char b[16];
};

[[gnu::always_inline]] inline void small_copy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  if (n >= 16 && n <= 32)
    copy_overlapping<bytes16>(d, s, n);
  else if (n >= 8 && n < 16)
    copy_overlapping<uint64_t>(d, s, n);
  else if (n >= 4 && n < 8)
    copy_overlapping<uint32_t>(d, s, n);
  else if (n < 4)
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  else
    std::memcpy(d, s, n);
}

}  // namespace weft::util
