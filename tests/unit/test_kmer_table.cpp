// SPDX-License-Identifier: BSD-3-Clause
// The k-mer counter's table (apps/kmer/table.hpp) and its memory (arena.hpp): counts equal to
// a plain map's through growth, past the arena's reservation, from two threads at once, and
// through the prefetching apply_pipe as through direct adds.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <unordered_map>

#include "kmer/arena.hpp"
#include "kmer/table.hpp"

using kmer::count_table;
using kmer::mer_t;

namespace {

mer_t key_of(uint64_t i) {
  return {i * 0x9e3779b97f4a7c15ull >> 20, i};
}

// count -> distinct keys, from a plain map of key -> count.
std::map<uint64_t, uint64_t> histogram_of(const std::unordered_map<uint64_t, uint64_t>& m) {
  std::map<uint64_t, uint64_t> h;
  for (const auto& [k, c] : m) ++h[c];
  return h;
}

}  // namespace

TEST(KmerArena, TakesZeroedAlignedSlicesUntilTheReservationEnds) {
  kmer::arena a(size_t(4) << 20, size_t(4) << 20);
  char* p = static_cast<char*>(a.take(100));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(uintptr_t(p) % 64, 0u);
  EXPECT_TRUE(a.owns(p));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(p[i], 0);
  char* q = static_cast<char*>(a.take(1));
  EXPECT_EQ(q, p + 128);  // rounded up to a line
  EXPECT_EQ(a.take(size_t(4) << 20), nullptr);
  std::memset(q, 1, 64);
  kmer::arena::give_back(q, 64);  // no whole page inside: nothing given back
  EXPECT_EQ(q[0], 1);
  int x = 0;
  EXPECT_FALSE(a.owns(&x));
}

TEST(KmerArena, GivesBackTheWholePagesInsideASliceAndNothingElse) {
  kmer::arena a(size_t(4) << 20, size_t(4) << 20);
  char* p = static_cast<char*>(a.take(5 * 4096));
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, 5 * 4096);
  kmer::arena::give_back(p + 100, 3 * 4096);  // [100, 12388): only the pages at 4096, 8192
  for (size_t i = 0; i < 5 * 4096; ++i)
    ASSERT_EQ(p[i], i >= 4096 && i < 3 * 4096 ? 0 : 7) << "byte " << i;
}

TEST(KmerTable, CountsEqualAPlainMapThroughGrowthAndPastTheReservation) {
  // Expecting nothing: 16 slots a shard, a reservation of 8x that, so the shards grow many
  // times and their later arrays come from calloc.
  count_table t(0);
  std::unordered_map<uint64_t, uint64_t> want;
  for (uint64_t i = 0; i < 600000; ++i) {
    const uint64_t id = i % 7 == 0 ? 1000000 + i : i % 300000;  // singletons, and pairs
    const mer_t k = key_of(id);
    t.add(k, kmer::hash(k));
    ++want[id];
  }
  EXPECT_EQ(t.distinct(), want.size());
  EXPECT_GT(t.shards_outside_arena(), 0u);
  EXPECT_EQ(t.histogram(), histogram_of(want));
  std::map<uint64_t, uint64_t> parts;  // the histogram counted in three parts
  for (size_t p = 0; p < 3; ++p)
    for (const auto& [c, n] : t.histogram(p, 3)) parts[c] += n;
  EXPECT_EQ(parts, histogram_of(want));
}

TEST(KmerTable, TwoThreadsAddingTheSameKeysCountBoth) {
  count_table t(100000);
  auto fill = [&] {
    for (uint64_t i = 0; i < 200000; ++i) {
      const mer_t k = key_of(i % 50000);
      t.add(k, kmer::hash(k));
    }
  };
  std::thread other(fill);
  fill();
  other.join();
  EXPECT_EQ(t.distinct(), 50000u);
  EXPECT_EQ(t.histogram(), (std::map<uint64_t, uint64_t>{{8, 50000}}));
}

TEST(KmerTable, ThePipeCountsWhatDirectAddsCount) {
  count_table direct(1000), piped(1000);
  kmer::bloom2 bloom_direct(1 << 16), bloom_piped(1 << 16);
  {
    kmer::apply_pipe pipe(false, &bloom_piped, &piped);
    for (int pass = 0; pass < 2; ++pass) {
      for (uint64_t i = 0; i < 20000; ++i) {
        const mer_t k = key_of(i % 3000 + (i % 5 == 0 ? 5000 + i : 0));  // some singletons
        const uint64_t h = kmer::hash(k);
        kmer::apply(pass, false, &bloom_direct, &direct, k, h);
        pipe.push(pass, k, h);  // the pass changes with k-mers still in the pipe
      }
    }
  }  // the rest drained by the destructor
  EXPECT_EQ(piped.distinct(), direct.distinct());
  EXPECT_EQ(piped.histogram(), direct.histogram());
  kmer::apply_pipe short_run(true, nullptr, &piped);  // fewer k-mers than its depth
  const mer_t k = key_of(424242);
  short_run.push(1, k, kmer::hash(k));
  short_run.drain();
  EXPECT_EQ(piped.distinct(), direct.distinct() + 1);
}
