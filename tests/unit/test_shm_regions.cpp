// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory region table, driven directly in one process: records found by the name
// they were registered under (colliding names included), holes left by recycled records,
// stale and unknown names, bounds, holding against deregistration, and a full table.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/regions.hpp"
#include "weft/types.hpp"

using weft::net::rkey_t;
using weft::net::shm::region_table;

namespace {

// A job of one: the table maps no peer's, and its own segment has no name to clean up.
class alone final : public weft::bootstrap::bootstrap {
 public:
  alone() { job_id_ = "unit"; }
  const char* name() const override { return "alone"; }
  void put(const std::string&, const std::string&) override {}
  std::string get(int, const std::string&) override { return {}; }
  void fence() override {}
};

uint64_t addr(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

struct table_test : ::testing::Test {
  alone boot;
  char mem[4][256] = {};
};

TEST_F(table_test, EachNameFindsItsOwnRecordInAFullTable) {
  region_table t(boot, 0, 4);  // three usable slots
  const rkey_t names[3] = {{7, 1}, {7, 2}, {8, 1}};
  uint32_t slots[3];
  for (int i = 0; i < 3; ++i) slots[i] = t.add(mem[i], sizeof(mem[i]), names[i]);
  EXPECT_NE(slots[0], slots[1]);
  EXPECT_NE(slots[1], slots[2]);
  EXPECT_NE(slots[0], slots[2]);
  for (int i = 0; i < 3; ++i) {
    uint32_t held = 99;
    EXPECT_EQ(t.acquire(0, names[i], addr(mem[i]) + 10, 100, held), nullptr) << i;
    EXPECT_EQ(held, slots[i]);
    // The record holds this region's bounds, not a neighbour's.
    EXPECT_EQ(t.check(0, names[i], addr(mem[(i + 1) % 3]), 8),
              std::string("access outside the registered region"));
    EXPECT_FALSE(t.idle(held));
    t.release(0, held);
    EXPECT_TRUE(t.idle(held));
  }
  try {
    t.add(mem[3], sizeof(mem[3]), rkey_t{9, 0});
    ADD_FAILURE() << "a fourth registration fitted in three slots";
  } catch (const weft::fatal_error& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_SHM_REGIONS"), std::string::npos) << e.what();
  }
}

// Names that all start their search at the same slot of `t`.
std::vector<rkey_t> colliding(const region_table& t, size_t n) {
  std::vector<rkey_t> out{rkey_t{1000, 0}};
  for (uint64_t k = 1001; out.size() < n; ++k)
    if (t.home(rkey_t{k, 0}) == t.home(out[0])) out.push_back(rkey_t{k, 0});
  return out;
}

TEST_F(table_test, RecycledRecordsLeaveNoGapInTheSearch) {
  region_table t(boot, 0, 4);
  std::vector<rkey_t> names = colliding(t, 3);  // one chain through every slot
  uint32_t slots[3];
  for (int i = 0; i < 3; ++i) slots[i] = t.add(mem[i], sizeof(mem[i]), names[i]);
  for (int gone = 0; gone < 3; ++gone) {
    t.retire(slots[gone]);
    ASSERT_TRUE(t.idle(slots[gone]));
    t.recycle(slots[gone]);
    uint32_t held;
    EXPECT_NE(t.acquire(0, names[gone], addr(mem[gone]), 8, held), nullptr);
    for (int i = 0; i < 3; ++i) {
      if (i == gone) continue;
      EXPECT_EQ(t.acquire(0, names[i], addr(mem[i]), 8, held), nullptr) << gone << " " << i;
      t.release(0, held);
    }
    // A new name takes the freed slot; the old name still finds nothing.
    const rkey_t fresh{100 + uint64_t(gone), 5};
    slots[gone] = t.add(mem[gone], sizeof(mem[gone]), fresh);
    EXPECT_EQ(t.check(0, names[gone], addr(mem[gone]), 8),
              std::string("the region has been deregistered (or was never registered)"));
    EXPECT_EQ(t.check(0, fresh, addr(mem[gone]), 8), nullptr);
    names[gone] = fresh;
  }
}

TEST_F(table_test, HeldRecordOutlivesRetirementButRefusesNewAccess) {
  region_table t(boot, 0, 64);
  const rkey_t name = t.next_name();
  const uint32_t slot = t.add(mem[0], sizeof(mem[0]), name);
  uint32_t held;
  ASSERT_EQ(t.acquire(0, name, addr(mem[0]), 256, held), nullptr);
  t.retire(slot);
  EXPECT_FALSE(t.idle(slot));  // the access in progress is waited for
  uint32_t again;
  EXPECT_EQ(t.acquire(0, name, addr(mem[0]), 8, again),
            std::string("the region has been deregistered (or was never registered)"));
  t.release(0, held);
  EXPECT_TRUE(t.idle(slot));
}

TEST_F(table_test, BadNamesBoundsAndKeyZero) {
  region_table t(boot, 0, 64);
  const rkey_t name = t.next_name();
  EXPECT_NE(name.key, t.next_name().key);  // names are never handed out twice
  t.add(mem[0], sizeof(mem[0]), name);
  uint32_t held = 99;
  // Key 0 names no region: refused, nothing held (it once skipped every check).
  EXPECT_EQ(t.acquire(0, rkey_t{}, 0x1234, 8, held),
            std::string("key 0 names no registered region (a handle made by hand?)"));
  EXPECT_EQ(held, 0u);
  EXPECT_NE(t.check(0, rkey_t{}, 0x1234, 8), nullptr);
  EXPECT_GT(name.key, 0xffffffffull);  // not a count: not guessable
  EXPECT_EQ(t.acquire(0, rkey_t{name.key, name.generation + 1}, addr(mem[0]), 8, held),
            std::string("the region has been deregistered (or was never registered)"));
  EXPECT_EQ(t.acquire(0, name, addr(mem[0]) + 250, 8, held),
            std::string("access outside the registered region"));
  EXPECT_EQ(t.acquire(0, name, addr(mem[0]) - 1, 1, held),
            std::string("access outside the registered region"));
  EXPECT_EQ(t.acquire(0, name, addr(mem[0]), ~size_t(0), held),
            std::string("access outside the registered region"));
  EXPECT_EQ(t.acquire(3, name, addr(mem[0]), 8, held), std::string("no such rank on this host"));
  EXPECT_EQ(t.acquire(0, name, addr(mem[0]) + 248, 8, held), nullptr);  // the last 8 bytes
  t.release(0, held);
}

}  // namespace
