// SPDX-License-Identifier: BSD-3-Clause
// How a pipelined transfer over shared memory is cut into a channel's slots
// (src/net/shm/layout.hpp, piece_for): alone in flight, in quarters of whole pages, from a
// page to a slot; with other transfers in flight, whole slots.
#include <gtest/gtest.h>

#include "net/shm/layout.hpp"

using weft::net::shm::piece_for;

namespace {
constexpr size_t kSlot = 64 << 10;
}

TEST(Pieces, AloneInQuartersOfWholePages) {
  EXPECT_EQ(piece_for(64 << 10, kSlot, true), size_t(16) << 10);
  EXPECT_EQ(piece_for(32 << 10, kSlot, true), size_t(8) << 10);
  EXPECT_EQ(piece_for(40000, kSlot, true), size_t(12) << 10);  // 10000 up to whole pages
}

TEST(Pieces, NeverBelowAPageNorAboveASlot) {
  EXPECT_EQ(piece_for(9000, kSlot, true), size_t(4) << 10);
  EXPECT_EQ(piece_for(1, kSlot, true), size_t(4) << 10);
  EXPECT_EQ(piece_for(4 << 20, kSlot, true), kSlot);
  EXPECT_EQ(piece_for(256 << 10, kSlot, true), kSlot);
  EXPECT_EQ(piece_for(64 << 10, 4096, true), size_t(4096));  // WEFT_SHM_CHUNK=4K
}

TEST(Pieces, WithOthersInFlightWholeSlots) {
  EXPECT_EQ(piece_for(64 << 10, kSlot, false), kSlot);
  EXPECT_EQ(piece_for(9000, kSlot, false), kSlot);
}
