// SPDX-License-Identifier: BSD-3-Clause
// The two-layer Bloom filter of HipMer's counting stage (seed 001 section 5.3): the first
// pass inserts every k-mer into layer 1; one already there (seen before, or a false
// positive) goes into layer 2. The counting pass then counts only the k-mers in layer 2, so
// k-mers seen once (mostly sequencing errors) stay out of the table, except false
// positives: every k-mer seen twice or more is counted exactly; the count-1 bin holds only
// singletons that collided. Bits are set with atomic or: any thread, no lock.
#ifndef WEFT_APPS_KMER_BLOOM_HPP
#define WEFT_APPS_KMER_BLOOM_HPP

#include <atomic>
#include <cstdint>
#include <memory>

#include "kmer.hpp"

namespace kmer {

class bloom2 {
 public:
  static constexpr int nhash = 3;
  // `bits` per layer, rounded up to a power of 2.
  explicit bloom2(size_t bits) {
    size_t n = 64;
    while (n < bits) n *= 2;
    words_ = n / 64;
    layer_[0].reset(new std::atomic<uint64_t>[words_]());
    layer_[1].reset(new std::atomic<uint64_t>[words_]());
  }

  // The first pass: into layer 1, or layer 2 when layer 1 had it.
  void insert(const mer_t& k, uint64_t h) {
    if (set(0, k, h)) set(1, k, h);
  }
  // The counting pass: whether k went into layer 2.
  bool repeated(const mer_t& k, uint64_t h) const {
    const uint64_t m = bits(k);
    return (layer_[1][h & (words_ - 1)].load(std::memory_order_relaxed) & m) == m;
  }
  // Starts bringing in the word that insert (pass 0) or repeated (pass 1) reads first.
  void prefetch(int pass, uint64_t h) const {
    if (pass == 0)
      __builtin_prefetch(&layer_[0][h & (words_ - 1)], 1);
    else
      __builtin_prefetch(&layer_[1][h & (words_ - 1)], 0);
  }

 private:
  // A blocked filter: all of a k-mer's bits lie in one word, so one atomic or sets them and
  // says whether they were all set before. Of two threads inserting the same k-mer at once
  // exactly one sees them all set: the second occurrence is never lost (bins >= 2 exact).
  static uint64_t bits(const mer_t& k) {
    const uint64_t g = k.hi * 0xd6e8feb86659fd93ull ^ k.lo * 0xa0761d6478bd642full;
    uint64_t m = 0;
    for (int i = 0; i < nhash; ++i) m |= uint64_t(1) << ((g >> (6 * i + 40)) & 63);
    return m;
  }
  bool set(int layer, const mer_t& k, uint64_t h) {
    const uint64_t m = bits(k);
    std::atomic<uint64_t>& w = layer_[layer][h & (words_ - 1)];
    if ((w.load(std::memory_order_relaxed) & m) == m) return true;
    return (w.fetch_or(m, std::memory_order_relaxed) & m) == m;
  }

  size_t words_;
  std::unique_ptr<std::atomic<uint64_t>[]> layer_[2];
};

}  // namespace kmer

#endif
