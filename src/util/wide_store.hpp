// SPDX-License-Identifier: BSD-3-Clause
// Small objects written just before a copy reads them back. A load is served from the
// store buffer only when one earlier store covers it; a 16-byte load of a header or status
// written field by field (bytes, halves, words) waits instead until those stores reach the
// cache, a dozen cycles or more, once per message on each side. Writing such an object in
// the copy's own widths, 16-byte vectors and a last 8-byte word, keeps those loads fast.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace weft::util {

static_assert(std::endian::native == std::endian::little, "words below are little-endian");

using u64x2 = uint64_t __attribute__((vector_size(16)));

// Writes dst[0, 16) as one 16-byte store of words lo, hi.
[[gnu::always_inline]] inline void store16(void* dst, uint64_t lo, uint64_t hi) {
  const u64x2 v = {lo, hi};
  std::memcpy(dst, &v, sizeof(v));
}

// Two 4-byte fields side by side (lo first in memory) as one word.
[[gnu::always_inline]] inline uint64_t pair_word(uint32_t lo, uint32_t hi) {
  return uint64_t(lo) | uint64_t(hi) << 32;
}

// The eight bytes of a trivially copyable T of that size (a pointer, an enum and an int), as
// one word: what store16 takes.
template <typename T>
[[gnu::always_inline]] inline uint64_t word_of(const T& v) {
  static_assert(sizeof(T) == sizeof(uint64_t));
  uint64_t w;
  std::memcpy(&w, &v, sizeof(w));
  return w;
}

}  // namespace weft::util
