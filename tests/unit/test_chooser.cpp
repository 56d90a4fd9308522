// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's choice of large-transfer mechanism (src/net/shm/chooser.hpp),
// driven with transfers whose copy times the test gives (wall-clock sleeps stretch under
// load and made this test flaky): a slow first window (first touches) must not decide, a
// mechanism that stays slower must lose, and a failed transfer is no figure.
#include <gtest/gtest.h>

#include <cstdint>

#include "net/shm/chooser.hpp"

using weft::net::shm::chooser;
using weft::net::shm::put_mode;

namespace {

constexpr size_t kSize = 64 << 10;  // size class 0: windows of 16 transfers

// One transfer by the mechanism the chooser picks, copying for `pipeline_us` or `cma_us`
// (in ticks of a microsecond here: the chooser only sets one against the other).
struct driver {
  chooser c;
  put_mode transfer(int pipeline_us, int cma_us) {
    const put_mode m = c.choose(kSize);
    c.start(m, kSize);
    c.record(m, kSize, uint64_t(m == put_mode::pipeline ? pipeline_us : cma_us));
    return m;
  }
};

// Both mechanisms' warm-up windows and figures (64 transfers), then the early retry of the
// slower one (two windows after its figure window began: transfers 80-95): the periods hold
// from here.
void settle(driver& d, int pipeline_us, int cma_us) {
  for (int i = 0; i < 96; ++i) d.transfer(pipeline_us, cma_us);
}

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
  // The pipeline for a window, cma's early retry, then the pipeline again.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.transfer(100, 1000), put_mode::pipeline);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.transfer(100, 1000), put_mode::cma);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(d.transfer(100, 1000), put_mode::pipeline);
}

TEST(Chooser, EarlyRetryReplacesAColdFigure) {
  driver d;
  // The pipeline's figure window is cold (its buffers' first touches): 300x slower than it
  // is; cma 1.5x slower than the warm pipeline. cma wins at first...
  for (int i = 0; i < 16; ++i) d.transfer(100, 150);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.transfer(30000, 150), put_mode::pipeline);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(d.transfer(100, 150), put_mode::cma);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.transfer(100, 150), put_mode::cma);
  // ... until the early retry: its figure replaces the cold one (an average of the two
  // would still lose to cma), and the pipeline wins from then on.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.transfer(100, 150), put_mode::pipeline);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(d.transfer(100, 150), put_mode::pipeline);
}

TEST(Chooser, SlowerMechanismLoses) {
  driver d;
  settle(d, 1000, 100);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(d.transfer(1000, 100), put_mode::cma);
}

TEST(Chooser, SlowerOneIsRetriedAfterItsPeriod) {
  driver d;
  settle(d, 1000, 100);  // cma ten times faster; its early retry began at transfer 80
  // The period is 512 transfers times the ratio (10): no pipeline before it...
  int pipeline = 0;
  for (int i = 0; i < 5000; ++i) pipeline += d.transfer(1000, 100) == put_mode::pipeline;
  EXPECT_EQ(pipeline, 0);
  // ... and a window of it once the period is over (the machine may have changed phase).
  for (int i = 0; i < 400; ++i) pipeline += d.transfer(1000, 100) == put_mode::pipeline;
  EXPECT_EQ(pipeline, 16);
}

TEST(Chooser, FailedTransfersAreNoFigure) {
  driver d;
  settle(d, 100, 1000);  // the pipeline ten times faster
  // Refused pipelined transfers are started but never recorded: they shorten the period
  // but leave the figures as they were, so the pipeline keeps winning.
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(d.c.choose(kSize), put_mode::pipeline);
    d.c.start(put_mode::pipeline, kSize);
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(d.transfer(100, 1000), put_mode::pipeline);
}

// The target's choice of stores is the same chooser over its own two ways: with streaming
// stores copying four times faster (a destination beyond the caches), it settles on them;
// when that changes (the buffers fit again), the retry finds out and it goes back.
TEST(Chooser, TargetStoresFollowTheFasterCopy) {
  using weft::net::shm::store_chooser;
  using weft::net::shm::store_mode;
  constexpr size_t size = 4 << 20;  // class 2: windows of 4 transfers
  store_chooser c;
  auto transfer = [&](int cached_us, int streaming_us) {
    const store_mode m = c.choose(size);
    c.start(m, size);
    c.record(m, size, uint64_t(m == store_mode::cached ? cached_us : streaming_us));
    return m;
  };
  for (int i = 0; i < 64; ++i) transfer(400, 100);  // warm-ups, figures, the early retry
  for (int i = 0; i < 64; ++i) EXPECT_EQ(transfer(400, 100), store_mode::streaming);
  int cached = 0;
  for (int i = 0; i < 4000; ++i) cached += transfer(100, 400) == store_mode::cached;
  EXPECT_GT(cached, 3500);  // back to cached once the retry saw it faster
}
