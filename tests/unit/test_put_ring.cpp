// SPDX-License-Identifier: BSD-3-Clause
// The shm backend's record of inline puts awaiting acknowledgment: acknowledgments in
// order, out of order and for puts it never had, growth past its first storage with the
// oldest not at the front, and a dead peer's puts dropped.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "net/shm/put_ring.hpp"

using weft::net::shm::put_ring;

TEST(PutRing, TakesInOrderAndRefusesWhatItNeverHad) {
  put_ring r;
  EXPECT_FALSE(r.take(0, 1));
  for (uint64_t c = 1; c <= 100; ++c) r.push({1, c});
  EXPECT_EQ(r.size(), 100u);
  EXPECT_FALSE(r.take(0, 1));    // right context, wrong rank
  EXPECT_FALSE(r.take(1, 101));  // never posted
  for (uint64_t c = 1; c <= 100; ++c) EXPECT_TRUE(r.take(1, c)) << c;
  EXPECT_EQ(r.size(), 0u);
  EXPECT_FALSE(r.take(1, 1));  // taken once only
}

TEST(PutRing, TakesInAnyOrderWhileGrowingAroundTheEnd) {
  put_ring r;
  std::vector<uint64_t> in_flight;
  std::mt19937 rng(7);
  uint64_t next = 1;
  // Take some, push more, repeatedly: the head wraps and growth copies a wrapped ring.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 13; ++i) {
      r.push({2, next});
      in_flight.push_back(next++);
    }
    std::shuffle(in_flight.begin(), in_flight.end(), rng);
    const size_t take = in_flight.size() / 2;
    for (size_t i = 0; i < take; ++i) {
      ASSERT_TRUE(r.take(2, in_flight.back())) << in_flight.back();
      in_flight.pop_back();
    }
    ASSERT_EQ(r.size(), in_flight.size());
  }
  for (uint64_t c : in_flight) EXPECT_TRUE(r.take(2, c)) << c;
  EXPECT_EQ(r.size(), 0u);
}

TEST(PutRing, DropsADeadPeersPutsAndKeepsTheOthers) {
  put_ring r;
  for (uint64_t c = 1; c <= 40; ++c) r.push({int(c % 3), c});
  EXPECT_TRUE(r.take(1, 1));  // the head moves first
  r.erase_if([](const put_ring::entry& e) { return e.rank == 2; });
  for (uint64_t c = 2; c <= 40; ++c) EXPECT_EQ(r.take(int(c % 3), c), c % 3 != 2) << c;
  EXPECT_EQ(r.size(), 0u);
  r.push({0, 99});  // usable after
  EXPECT_TRUE(r.take(0, 99));
}
