// SPDX-License-Identifier: BSD-3-Clause
// The dataflow executor (engine/exec) in one process over the Weft engine: a chain of tasks
// under each way of driving the engine and with several workers, and a task that throws,
// which run() must hand back to its caller (not end the process), leaving the executor fit
// for another run.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/exec/executor.hpp"
#include "weft/weft.h"

namespace {

using weft::exec::flow_ref;
using weft::exec::task_key;

// Tasks 0..n-1 in a chain on rank 0: task k adds k to the 8-byte sum of task k - 1, and
// writes it out; task `bad` (when below n) throws instead.
class chain : public weft::exec::graph {
 public:
  chain(task_key n, task_key bad) : n_(n), bad_(bad) {}
  void local_tasks(int, std::vector<task_key>& out) const override {
    for (task_key k = 0; k < n_; ++k) out.push_back(k);
  }
  int rank_of(task_key) const override { return 0; }
  void inputs(task_key t, std::vector<flow_ref>& out) const override {
    if (t > 0) out.push_back({t - 1, 0});
  }
  uint32_t noutputs(task_key) const override { return 1; }
  size_t output_size(task_key, uint32_t) const override { return sizeof(uint64_t); }
  void successors(task_key t, uint32_t, std::vector<task_key>& out) const override {
    if (t + 1 < n_) out.push_back(t + 1);
  }
  void run(task_key t, const std::vector<const void*>& in, const std::vector<void*>& out) override {
    if (t == bad_) throw std::runtime_error("task 7 refused");
    uint64_t sum = 0;
    if (t > 0) std::memcpy(&sum, in[0], sizeof(sum));
    sum += t;
    std::memcpy(out[0], &sum, sizeof(sum));
    if (t + 1 == n_) last = sum;
  }
  uint64_t last = 0;

 private:
  task_key n_, bad_;
};

class Executor : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(weft_g_runtime_init(), WEFT_OK);
    ASSERT_EQ(weft_engine_alloc(nullptr, &e_), WEFT_OK) << weft_last_error();
  }
  void TearDown() override {
    EXPECT_EQ(weft_engine_free(&e_), WEFT_OK);
    weft_g_runtime_fina();
  }
  weft_engine_t e_ = nullptr;
};

using drive_by = weft::exec::options::drive_by;

TEST_F(Executor, ChainUnderEveryDriveAndWorkers) {
  for (drive_by d : {drive_by::workers, drive_by::driver, drive_by::automatic})
    for (int workers : {1, 3}) {
      weft::exec::options o;
      o.drive = d;
      o.workers = workers;
      weft::exec::executor x(e_, o);
      if (d != drive_by::automatic) {
        EXPECT_EQ(x.workers_drive(), d == drive_by::workers);
      }
      chain g(200, 200);
      const weft::exec::run_stats s = x.run(g);
      EXPECT_EQ(s.tasks, 200u);
      EXPECT_EQ(g.last, 199u * 200u / 2) << "drive " << int(d) << ", " << workers << " workers";
    }
}

TEST_F(Executor, TaskThatThrowsEndsTheRunNotTheProcess) {
  for (drive_by d : {drive_by::workers, drive_by::driver}) {
    weft::exec::options o;
    o.drive = d;
    o.workers = 2;
    weft::exec::executor x(e_, o);
    chain bad(50, 7);
    try {
      x.run(bad);
      ADD_FAILURE() << "run() returned although task 7 threw";
    } catch (const std::runtime_error& err) {
      EXPECT_STREQ(err.what(), "task 7 refused");
    }
    chain good(20, 20);  // the same executor runs again
    EXPECT_EQ(x.run(good).tasks, 20u);
    EXPECT_EQ(good.last, 19u * 20u / 2);
  }
}

TEST_F(Executor, DriveNames) {
  drive_by d = drive_by::driver;
  EXPECT_TRUE(weft::exec::drive_from_name("workers", d));
  EXPECT_EQ(d, drive_by::workers);
  EXPECT_TRUE(weft::exec::drive_from_name("auto", d));
  EXPECT_EQ(d, drive_by::automatic);
  EXPECT_FALSE(weft::exec::drive_from_name("everyone", d));
  EXPECT_EQ(d, drive_by::automatic);
}

}  // namespace
