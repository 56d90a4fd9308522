// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's choice of large-transfer mechanism (src/net/shm/chooser.hpp),
// driven with transfers whose durations the test sets by sleeping between start and finish:
// a slow first window (first touches) must not decide, and a mechanism that stays slower
// must lose.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "net/shm/chooser.hpp"

using weft::net::shm::chooser;
using weft::net::shm::put_mode;

namespace {

constexpr size_t kSize = 64 << 10;  // size class 0: windows of 16 transfers

// One transfer by the mechanism the chooser picks, lasting `us` for that mechanism.
put_mode transfer(chooser& c, int pipeline_us, int cma_us) {
  const put_mode m = c.choose(kSize);
  c.start(m, kSize);
  std::this_thread::sleep_for(
      std::chrono::microseconds(m == put_mode::pipeline ? pipeline_us : cma_us));
  c.finish(m, kSize);
  return m;
}

}  // namespace

TEST(Chooser, SlowFirstWindowDoesNotDecide) {
  chooser c;
  // First window of each: cold (the pipeline ten times slower than cma, as measured once).
  for (int i = 0; i < 16; ++i) EXPECT_EQ(transfer(c, 3000, 300), put_mode::pipeline);
  // Warm from here: the pipeline is ten times faster. It gets its first figure, then cma
  // gets its warm-up and its figure.
  int pipeline = 0;
  for (int i = 0; i < 48; ++i) pipeline += transfer(c, 100, 1000) == put_mode::pipeline;
  EXPECT_EQ(pipeline, 16);  // its figure window; cma's two windows follow
  for (int i = 0; i < 32; ++i) EXPECT_EQ(transfer(c, 100, 1000), put_mode::pipeline);
}

TEST(Chooser, SlowerMechanismLoses) {
  chooser c;
  for (int i = 0; i < 64; ++i) transfer(c, 1000, 100);  // both warm-ups and figures
  for (int i = 0; i < 32; ++i) EXPECT_EQ(transfer(c, 1000, 100), put_mode::cma);
}
