// SPDX-License-Identifier: BSD-3-Clause
// The shm inbox lanes a device gets when WEFT_SHM_LANES is unset: the default device one
// per hardware thread of the rank's share of the host, as a power of two from 4 to 64;
// every other device 4.
#include <gtest/gtest.h>

#include "net/shm/layout.hpp"

using weft::net::shm::default_lanes;

TEST(Lanes, DefaultDeviceGetsAThreadsShareOfTheHost) {
  EXPECT_EQ(default_lanes(true, 16, 1), 16u);
  EXPECT_EQ(default_lanes(true, 16, 2), 8u);
  EXPECT_EQ(default_lanes(true, 24, 1), 32u);  // rounded up: every thread a lane
  EXPECT_EQ(default_lanes(true, 48, 4), 16u);
}

TEST(Lanes, NeverFewerThanFourNorMoreThanTheBellsMask) {
  EXPECT_EQ(default_lanes(true, 2, 1), 4u);
  EXPECT_EQ(default_lanes(true, 16, 16), 4u);
  EXPECT_EQ(default_lanes(true, 0, 0), 4u);  // unknown counts
  EXPECT_EQ(default_lanes(true, 512, 1), 64u);
}

TEST(Lanes, OtherDevicesKeepFour) {
  EXPECT_EQ(default_lanes(false, 64, 1), 4u);
  EXPECT_EQ(default_lanes(false, 2, 1), 4u);
}
