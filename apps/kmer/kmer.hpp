// SPDX-License-Identifier: BSD-3-Clause
// k-mers as the counting app sees them (seed 001 section 5.3, after HipMer): 2 bits per
// base in a 128-bit word (k <= 63), A=0 C=1 G=2 T=3, the canonical form the smaller of a
// k-mer and its reverse complement (as `jellyfish count -C`), and the hash that picks the
// owning rank and the table shard. Bases other than ACGT (either case) end the current
// k-mer run, as jellyfish does with N. Shared by the Weft and the MPI versions.
#ifndef WEFT_APPS_KMER_KMER_HPP
#define WEFT_APPS_KMER_KMER_HPP

#include <cstddef>
#include <cstdint>

namespace kmer {

using word_t = unsigned __int128;
constexpr int max_k = 63;

struct mer_t {  // a canonical k-mer, as it travels and is stored
  uint64_t hi, lo;
  bool operator==(const mer_t& o) const { return hi == o.hi && lo == o.lo; }
};

inline mer_t to_key(word_t w) {
  return {uint64_t(w >> 64), uint64_t(w)};
}

// 0..3 for ACGT in either case, 4 for anything else.
inline int base_code(unsigned char c) {
  switch (c | 0x20) {
    case 'a': return 0;
    case 'c': return 1;
    case 'g': return 2;
    case 't': return 3;
    default: return 4;
  }
}

// 64 well-mixed bits of a key (the finaliser of a 64-bit multiplicative hash).
inline uint64_t hash(const mer_t& k) {
  uint64_t h =
      k.lo * 0x9e3779b97f4a7c15ull ^ (k.hi + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

// Rolls a window of k bases over a sequence, calling emit(key) for every canonical k-mer.
template <class Emit>
void for_each_kmer(const char* seq, size_t len, int k, Emit&& emit) {
  const word_t mask = k == 64 ? ~word_t(0) : (word_t(1) << (2 * k)) - 1;
  const int shift = 2 * (k - 1);
  word_t fwd = 0, rev = 0;
  int run = 0;  // valid bases in the window
  for (size_t i = 0; i < len; ++i) {
    const int b = base_code(static_cast<unsigned char>(seq[i]));
    if (b > 3) {
      run = 0;
      fwd = rev = 0;
      continue;
    }
    fwd = ((fwd << 2) | word_t(b)) & mask;
    rev = (rev >> 2) | (word_t(3 - b) << shift);
    if (++run >= k) emit(to_key(fwd < rev ? fwd : rev));
  }
}

// The k-mer's bases (for messages and tests).
inline void decode(const mer_t& key, int k, char* out) {
  const word_t w = (word_t(key.hi) << 64) | key.lo;
  for (int i = 0; i < k; ++i) out[i] = "ACGT"[int(w >> (2 * (k - 1 - i))) & 3];
}

}  // namespace kmer

#endif
