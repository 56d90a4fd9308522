// SPDX-License-Identifier: BSD-3-Clause
// The settings table (include/weft/settings.def) and its reader: every row well formed,
// every default valid, values from the environment parsed and range-checked, and an
// unknown WEFT_* variable named with the nearest known one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "util/settings.hpp"
#include "weft/weft.hpp"

using weft::util::setting;
using weft::util::setting_type;

TEST(Settings, EveryRowIsWellFormedAndItsDefaultValid) {
  std::set<std::string> envs, names;
  for (const auto& r : weft::util::setting_table()) {
    EXPECT_EQ(std::string(r.env).rfind("WEFT_", 0), 0u) << r.env;
    EXPECT_TRUE(envs.insert(r.env).second) << "twice: " << r.env;
    EXPECT_TRUE(names.insert(r.name).second) << "twice: " << r.name;
    EXPECT_GT(strlen(r.doc), 10u) << r.env;
    if (r.type == setting_type::size && *r.dflt) {
      size_t v = 0;
      ASSERT_TRUE(weft::util::parse_size(r.dflt, &v)) << r.env;
      if (*r.range) {
        EXPECT_NE(strstr(r.range, ".."), nullptr) << r.env;
      }
    }
    if (r.type == setting_type::text && *r.range && *r.dflt) {
      const std::string choices = std::string("|") + r.range + "|";
      EXPECT_NE(choices.find(std::string("|") + r.dflt + "|"), std::string::npos) << r.env;
    }
  }
  // Reading each one with nothing set gives its default without an error.
  for (int i = 0; i < int(setting::count); ++i) {
    const auto s = setting(i);
    const auto& r = weft::util::row_of(s);
    if (getenv(r.env)) continue;
    if (r.type == setting_type::size) {
      EXPECT_NO_THROW(weft::util::get_size(s)) << r.env;
    } else if (r.type == setting_type::flag) {
      EXPECT_NO_THROW(weft::util::get_flag(s)) << r.env;
    } else {
      EXPECT_EQ(weft::util::get_text(s), r.dflt) << r.env;
    }
    EXPECT_STREQ(weft::util::current_source(s), "default");
  }
}

TEST(Settings, SizesParseWithSuffixesAndPowers) {
  size_t v = 0;
  EXPECT_TRUE(weft::util::parse_size("4096", &v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(weft::util::parse_size("64K", &v));
  EXPECT_EQ(v, 65536u);
  EXPECT_TRUE(weft::util::parse_size("2MiB", &v));
  EXPECT_EQ(v, 2u << 20);
  EXPECT_TRUE(weft::util::parse_size("2^24", &v));
  EXPECT_EQ(v, 1u << 24);
  for (const char* bad :
       {"", "-1", "12Q", "1KX", "2^64", "x", "99999999999999999999", "20000000000G"})
    EXPECT_FALSE(weft::util::parse_size(bad, &v)) << bad;
}

// The error names the variable, the value and the range; an out-of-range value from a
// call names the call and the attribute.
TEST(Settings, BadValuesAreRefusedNamingTheVariable) {
  setenv("WEFT_SHM_LANES", "65", 1);
  try {
    weft::util::get_size(setting::shm_lanes);
    FAIL() << "no exception";
  } catch (const weft::fatal_error& e) {
    EXPECT_EQ(e.argument(), "WEFT_SHM_LANES");
    EXPECT_EQ(e.value(), "65");
    EXPECT_NE(std::string(e.what()).find("must be 1..64"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(weft::util::current_source(setting::shm_lanes), "environment");
  unsetenv("WEFT_SHM_LANES");
  setenv("WEFT_SHM_PUT", "telepathy", 1);
  EXPECT_THROW(weft::util::get_text(setting::shm_put), weft::fatal_error);
  setenv("WEFT_SHM_PUT", "cma", 1);
  EXPECT_EQ(weft::util::get_text(setting::shm_put), "cma");
  unsetenv("WEFT_SHM_PUT");
  setenv("WEFT_OFI_CQ_DATA", "perhaps", 1);
  EXPECT_THROW(weft::util::get_flag(setting::ofi_cq_data), weft::fatal_error);
  setenv("WEFT_OFI_CQ_DATA", "off", 1);
  EXPECT_FALSE(weft::util::get_flag(setting::ofi_cq_data));
  unsetenv("WEFT_OFI_CQ_DATA");
  try {
    weft::util::check_given(setting::max_requests, 8, "alloc_runtime");
    FAIL() << "no exception";
  } catch (const weft::fatal_error& e) {
    EXPECT_EQ(e.call(), "alloc_runtime");
    EXPECT_EQ(e.argument(), "max_requests");
  }
}

TEST(Settings, AMisspeltVariableIsNamedWithTheNearestSetting) {
  EXPECT_EQ(weft::util::closest_setting("WEFT_SHM_LANE"), "WEFT_SHM_LANES");
  EXPECT_EQ(weft::util::closest_setting("WEFT_PAKCET_SIZE"), "WEFT_PACKET_SIZE");
  EXPECT_EQ(weft::util::closest_setting("WEFT_SOMETHING_ELSE_ENTIRELY"), "");
}

// The C struct, the _x setters and the getters all come from the same rows: a runtime
// allocated with every attribute set reports each back.
TEST(Settings, AttributesRoundTripThroughTheCall) {
  weft::runtime_t rt = weft::alloc_runtime_x()
                           .packet_size(4096)
                           .npackets(64)
                           .inject_size(16)
                           .eager_size(1000)
                           .match_buckets(128)
                           .cq_depth(32)
                           .inbox_depth(16)
                           .max_requests(256)
                           .backlog_size(64)
                           .wire_errors_fatal(true)();
  EXPECT_EQ(rt.get_attr_packet_size(), 4096u);
  EXPECT_EQ(rt.get_attr_npackets(), 64u);
  EXPECT_EQ(rt.get_attr_inject_size(), 16u);
  EXPECT_EQ(rt.get_attr_eager_size(), 1000u);
  EXPECT_EQ(rt.get_attr_match_buckets(), 128u);
  EXPECT_EQ(rt.get_attr_cq_depth(), 32u);
  EXPECT_EQ(rt.get_attr_inbox_depth(), 16u);
  EXPECT_EQ(rt.get_attr_max_requests(), 256u);
  EXPECT_EQ(rt.get_attr_backlog_size(), 64u);
  EXPECT_TRUE(rt.get_attr_wire_errors_fatal());
  weft::free_runtime(&rt);
}
