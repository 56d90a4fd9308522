// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's choice of large-transfer mechanism (src/net/shm/chooser.hpp),
// driven with transfers whose durations the test sets on a clock of its own (wall-clock
// sleeps stretch under load and made this test flaky): a slow first window (first touches)
// must not decide, and a mechanism that stays slower must lose.
#include <gtest/gtest.h>

#include <cstdint>

#include "net/shm/chooser.hpp"

using weft::net::shm::chooser;
using weft::net::shm::put_mode;

namespace {

constexpr size_t kSize = 64 << 10;  // size class 0: windows of 16 transfers

// One transfer by the mechanism the chooser picks, lasting `pipeline_us` or `cma_us` on the
// test's clock `now`, one after the other.
struct driver {
  chooser c;
  int64_t now = 1000000;
  put_mode transfer(int pipeline_us, int cma_us) {
    const put_mode m = c.choose(kSize);
    c.start(m, kSize, now);
    now += int64_t(m == put_mode::pipeline ? pipeline_us : cma_us) * 1000;
    c.finish(m, kSize, now);
    return m;
  }
};

}  // namespace

TEST(Chooser, SlowFirstWindowDoesNotDecide) {
  driver d;
  // First window of each: cold (the pipeline ten times slower than cma, as measured once).
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.transfer(3000, 300), put_mode::pipeline);
  // Warm from here: the pipeline is ten times faster. It gets its first figure, then cma
  // gets its warm-up and its figure.
  int pipeline = 0;
  for (int i = 0; i < 48; ++i) pipeline += d.transfer(100, 1000) == put_mode::pipeline;
  EXPECT_EQ(pipeline, 16);  // its figure window; cma's two windows follow
  for (int i = 0; i < 32; ++i) EXPECT_EQ(d.transfer(100, 1000), put_mode::pipeline);
}

TEST(Chooser, SlowerMechanismLoses) {
  driver d;
  for (int i = 0; i < 64; ++i) d.transfer(1000, 100);  // both warm-ups and figures
  for (int i = 0; i < 32; ++i) EXPECT_EQ(d.transfer(1000, 100), put_mode::cma);
}

TEST(Chooser, SlowerOneIsRetriedAfterItsPeriod) {
  driver d;
  for (int i = 0; i < 64; ++i) d.transfer(1000, 100);  // cma ten times faster
  // The period is 512 transfers times the ratio (10): no pipeline before it...
  int pipeline = 0;
  for (int i = 0; i < 5000; ++i) pipeline += d.transfer(1000, 100) == put_mode::pipeline;
  EXPECT_EQ(pipeline, 0);
  // ... and a window of it once the period is over (the machine may have changed phase).
  for (int i = 0; i < 400; ++i) pipeline += d.transfer(1000, 100) == put_mode::pipeline;
  EXPECT_EQ(pipeline, 16);
}
