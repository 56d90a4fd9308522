// SPDX-License-Identifier: BSD-3-Clause
// The API in one process without a launcher: rank 0 of 1, sending to itself.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>
#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
#include <weft/weft.hpp>

#include "core/device.hpp"

static_assert(std::is_trivially_copyable_v<weft::device_t>);
static_assert(std::is_trivially_copyable_v<weft::comp_t>);
static_assert(std::is_trivially_copyable_v<weft::runtime_t>);
static_assert(std::is_trivially_copyable_v<weft::matching_engine_t>);
static_assert(std::is_trivially_copyable_v<weft::packet_pool_t>);
static_assert(std::is_trivially_copyable_v<weft::rmr_t>);
static_assert(sizeof(weft::device_t) == sizeof(void*));

thread_local weft::device_t tls_device;  // the paper's per-thread device idiom compiles

class Api : public ::testing::Test {
 protected:
  void SetUp() override { weft::g_runtime_init(); }
  void TearDown() override {
    if (!weft::get_g_runtime().is_empty()) weft::g_runtime_fina();
  }
};

TEST_F(Api, SingletonIsRankZeroOfOne) {
  EXPECT_EQ(weft::get_rank_me(), 0);
  EXPECT_EQ(weft::get_rank_n(), 1);
  EXPECT_EQ(weft::get_rank_local(), 0);
  EXPECT_EQ(weft::get_rank_local_n(), 1);
  EXPECT_STREQ(weft::get_version(), WEFT_VERSION_STRING);
}

TEST_F(Api, TestPeerKnowsThisRankAndRefusesOthersOutOfRange) {
  weft::device_t d = weft::alloc_device();
  EXPECT_TRUE(d.test_peer(0));                 // this rank
  EXPECT_TRUE(weft::device_t{}.test_peer(0));  // the default device
  EXPECT_EQ(d.get_counter(weft::counter_t::peers_dead), 0u);
  for (int bad : {-1, 1}) {
    try {
      d.test_peer(bad);
      ADD_FAILURE() << "test_peer(" << bad << ") returned";
    } catch (const weft::fatal_error& e) {
      EXPECT_EQ(e.call(), "test_peer");
      EXPECT_EQ(e.argument(), "rank");
      EXPECT_EQ(e.value(), std::to_string(bad));
    }
  }
  int alive = 0;
  EXPECT_EQ(weft_device_test_peer(nullptr, 0, &alive), WEFT_OK);
  EXPECT_EQ(alive, 1);
  EXPECT_EQ(weft_device_test_peer(nullptr, 3, &alive), WEFT_ERR_USAGE);
  EXPECT_NE(std::string(weft_last_error()).find("test_peer"), std::string::npos);
  weft::free_device(&d);
}

TEST_F(Api, AttributesHaveDocumentedDefaultsAndLimits) {
  auto rt = weft::get_g_runtime();
  EXPECT_EQ(rt.get_attr_packet_size(), 8192u);
  EXPECT_EQ(rt.get_attr_eager_size(), 8192u - 32);
  EXPECT_EQ(rt.get_attr_inject_size(), 32u);
  EXPECT_EQ(rt.get_attr_match_buckets(), 65536u);
  EXPECT_EQ(rt.get_attr_inbox_depth(), 256u);
  EXPECT_EQ(weft::get_default_matching_engine().get_attr_nbuckets(), 65536u);
  EXPECT_EQ(weft::max_tag, UINT64_MAX);
  EXPECT_EQ(weft::get_default_device().get_attr_index(), 0);
}

TEST_F(Api, AttributesCanBeSetAtAllocation) {
  weft::runtime_t rt =
      weft::alloc_runtime_x().packet_size(1024).eager_size(500).inject_size(16).inbox_depth(64)();
  EXPECT_EQ(rt.get_attr_packet_size(), 1024u);
  EXPECT_EQ(rt.get_attr_eager_size(), 500u);
  EXPECT_EQ(rt.get_attr_inject_size(), 16u);
  EXPECT_EQ(rt.get_attr_inbox_depth(), 64u);
  weft::device_t d = weft::alloc_device_x().runtime(rt).inbox_depth(16)();
  EXPECT_EQ(d.get_attr_inbox_depth(), 16u);
  EXPECT_EQ(d.get_attr_index(), 1);
  weft::free_device(&d);
  EXPECT_TRUE(d.is_empty());
  weft::free_runtime(&rt);
}

TEST_F(Api, BadAttributesAreRefusedWithNameAndValue) {
  try {
    weft::alloc_runtime_x().packet_size(1000)();
    FAIL() << "no exception";
  } catch (const weft::fatal_error& e) {
    EXPECT_EQ(e.call(), "alloc_runtime");
    EXPECT_EQ(e.argument(), "packet_size");
    EXPECT_EQ(e.value(), "1000");
  }
  EXPECT_THROW(weft::alloc_runtime_x().eager_size(100000)(), weft::fatal_error);
  EXPECT_THROW(weft::g_runtime_init(), weft::fatal_error);  // already active
}

// The argument a call refuses, or "" when it accepts.
template <typename Fn>
std::string refused_argument(Fn&& fn) {
  try {
    fn();
  } catch (const weft::fatal_error& e) {
    return e.argument();
  }
  return "";
}

// Absurd sizes fail at once, naming the argument: they used to loop for ever rounding up
// to a power of two, abort in the allocator, or throw std::bad_alloc.
TEST_F(Api, AbsurdSizesAreRefusedAtTheCall) {
  const size_t huge = SIZE_MAX / 2 + 2, big = size_t(1) << 40;
  EXPECT_EQ(refused_argument([&] { weft::alloc_cq_x().depth(huge)(); }), "depth");
  EXPECT_EQ(refused_argument([&] { weft::alloc_cq_x().depth(big)(); }), "depth");
  EXPECT_EQ(refused_argument([&] { weft::alloc_matching_engine_x().nbuckets(huge)(); }),
            "nbuckets");
  EXPECT_EQ(refused_argument([&] { weft::alloc_device_x().inbox_depth(SIZE_MAX)(); }),
            "inbox_depth");
  EXPECT_EQ(refused_argument([&] { weft::alloc_runtime_x().match_buckets(SIZE_MAX)(); }),
            "match_buckets");
  EXPECT_EQ(refused_argument([&] { weft::alloc_runtime_x().cq_depth(SIZE_MAX)(); }), "cq_depth");
  EXPECT_EQ(refused_argument([&] { weft::alloc_packet_pool_x().npackets(huge)(); }), "npackets");
  // In range, but more memory than there is: Weft's error, not std::bad_alloc. (Not under
  // a sanitizer, whose allocator ends the process on such a request by design.)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(refused_argument([&] { weft::alloc_runtime_x().max_requests(size_t(1) << 30)(); }),
            "runtime attributes");
  EXPECT_EQ(refused_argument(
                [&] { weft::alloc_packet_pool_x().packet_size(size_t(1) << 30).npackets(1000)(); }),
            "npackets");
#endif
  weft::g_runtime_fina();
  for (const char* v : {"18446744073709551615", "16G"}) {
    setenv("WEFT_MATCH_BUCKETS", v, 1);
    EXPECT_EQ(refused_argument([] { weft::g_runtime_init(); }), "WEFT_MATCH_BUCKETS") << v;
    if (!weft::get_g_runtime().is_empty()) weft::g_runtime_fina();
  }
  unsetenv("WEFT_MATCH_BUCKETS");
  setenv("WEFT_CQ_DEPTH", "18446744073709551615", 1);
  EXPECT_EQ(refused_argument([] { weft::g_runtime_init(); }), "WEFT_CQ_DEPTH");
  unsetenv("WEFT_CQ_DEPTH");
  weft::g_runtime_init();
}

// Silently accepted once: each is refused naming the argument.
TEST_F(Api, BadArgumentsAreRefusedNamingThem) {
  char buf[8];
  EXPECT_EQ(refused_argument([&] {
              (void)weft::post_comm_x(weft::direction_t(7), 0, buf, sizeof(buf), weft::comp_t{})();
            }),
            "direction");
  EXPECT_EQ(refused_argument([&] {
              (void)weft::post_send_x(0, nullptr, 0, 1, weft::comp_t{}).buffers(nullptr, 3)();
            }),
            "buffers");
  EXPECT_EQ(refused_argument([&] { (void)weft::cancel_recv(99, buf, 1, weft::comp_t{}); }), "rank");
  // Memory that is not mapped cannot be registered.
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* gone = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  munmap(static_cast<char*>(gone) + page, page);  // a hole in the middle
  EXPECT_EQ(refused_argument([&] { weft::register_memory(gone, 4 * page); }), "base");
  munmap(gone, 4 * page);
}

// A handle used after its object was freed (a stale copy) is refused, naming the argument,
// whether or not the memory holds a new object since: handles carry a generation.
TEST_F(Api, StaleHandlesAreRefused) {
  auto stale = [](auto&& fn) {
    try {
      fn();
    } catch (const weft::fatal_error& e) {
      return std::string(e.what()).find("a stale handle") != std::string::npos;
    }
    return false;
  };
  weft::comp_t cq = weft::alloc_cq(), cq_copy = cq;
  weft::free_comp(&cq);
  EXPECT_TRUE(stale([&] { weft::free_comp(&cq_copy); }));
  EXPECT_TRUE(stale([&] { weft::cq_pop(cq_copy); }));
  weft::comp_t again = weft::alloc_cq();  // most likely the same memory
  int v = 1;
  EXPECT_TRUE(stale([&] { (void)weft::post_send(0, &v, sizeof(v), 1, cq_copy); }));
  EXPECT_EQ(refused_argument([&] { (void)weft::post_send(0, &v, sizeof(v), 1, cq_copy); }),
            "local_comp");
  EXPECT_TRUE(weft::cq_pop(again).error.is_retry());  // the new one works
  // ... for posts too: a handle with a generation tag (the freed memory, reused) is checked
  // under its tag and read below through comp_of. A send to itself, matched by a receive,
  // both completing on the new queue.
  ASSERT_NE(reinterpret_cast<uintptr_t>(again.p) >> 48, 0u) << "not the reused memory";
  int got = 0;
  weft::status_t r = weft::post_recv(0, &got, sizeof(got), 7, again);
  weft::status_t s = weft::post_send(0, &v, sizeof(v), 7, again);
  int done = r.error.is_done() + s.error.is_done();
  while (done < 2) {
    weft::progress();
    if (weft::cq_pop(again).error.is_done()) ++done;
  }
  EXPECT_EQ(got, 1);
  weft::free_comp(&again);

  std::vector<char> region(4096);
  weft::mr_t mr = weft::register_memory(region.data(), region.size()), mr_copy = mr;
  weft::deregister_memory(&mr);
  EXPECT_TRUE(stale([&] { weft::deregister_memory(&mr_copy); }));
  EXPECT_TRUE(stale([&] { weft::get_rmr(mr_copy); }));

  weft::device_t d = weft::alloc_device(), d_copy = d;
  weft::free_device(&d);
  EXPECT_TRUE(stale([&] { weft::free_device(&d_copy); }));
  EXPECT_TRUE(stale([&] { weft::progress_x().device(d_copy)(); }));

  weft::packet_pool_t pool = weft::alloc_packet_pool(), pool_copy = pool;
  weft::free_packet_pool(&pool);
  EXPECT_TRUE(stale([&] { weft::free_packet_pool(&pool_copy); }));
  weft::matching_engine_t e = weft::alloc_matching_engine(), e_copy = e;
  weft::free_matching_engine(&e);
  EXPECT_TRUE(stale([&] { weft::free_matching_engine(&e_copy); }));

  // A device handle of a runtime that was freed, and the runtime's own handle.
  weft::runtime_t rt = weft::alloc_runtime(), rt_copy = rt;
  weft::device_t rt_dev = weft::get_default_device(rt);
  weft::free_runtime(&rt);
  EXPECT_TRUE(stale([&] { weft::progress_x().device(rt_dev)(); }));
  EXPECT_TRUE(stale([&] { weft::free_runtime(&rt_copy); }));
  EXPECT_TRUE(stale([&] { (void)rt_copy.get_attr_packet_size(); }));

  // The global runtime's default device after g_runtime_fina.
  weft::device_t g_dev = weft::get_default_device();
  weft::g_runtime_fina();
  EXPECT_TRUE(stale([&] { weft::progress_x().device(g_dev)(); }));
  EXPECT_TRUE(
      stale([&] { (void)weft::post_send_x(0, &v, sizeof(v), 1, weft::comp_t{}).device(g_dev)(); }));
}

TEST_F(Api, EnvironmentGivesDefaults) {
  weft::g_runtime_fina();
  setenv("WEFT_PACKET_SIZE", "4K", 1);
  setenv("WEFT_MATCH_BUCKETS", "128", 1);
  weft::g_runtime_init();
  EXPECT_EQ(weft::get_g_runtime().get_attr_packet_size(), 4096u);
  EXPECT_EQ(weft::get_g_runtime().get_attr_match_buckets(), 128u);
  weft::g_runtime_fina();
  setenv("WEFT_PACKET_SIZE", "lots", 1);
  try {
    weft::g_runtime_init();
    FAIL() << "no exception";
  } catch (const weft::fatal_error& e) {
    EXPECT_EQ(e.argument(), "WEFT_PACKET_SIZE");
    EXPECT_EQ(e.value(), "lots");
  }
  unsetenv("WEFT_PACKET_SIZE");
  unsetenv("WEFT_MATCH_BUCKETS");
  weft::g_runtime_init();
}

TEST_F(Api, InjectSendCompletesImmediatelyWithData) {
  char msg[8] = "abcdefg";
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  int ctx = 0;
  weft::status_t s = weft::post_am_x(0, msg, 8, weft::comp_t{}, rc).tag(3).user_context(&ctx)();
  ASSERT_TRUE(s.error.is_done());
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.tag, 3u);
  EXPECT_EQ(s.buf, msg);
  EXPECT_EQ(s.size, 8u);
  EXPECT_EQ(s.user_context, &ctx);
  weft::status_t r;
  do {
    weft::progress();
    r = weft::cq_pop(cq);
  } while (r.error.is_retry());
  EXPECT_STREQ(static_cast<char*>(r.buf), "abcdefg");
  EXPECT_EQ(r.get_buffer().size, 8u);
  std::free(r.buf);
  weft::free_comp(&cq);
}

// post_send_x and post_am_x with nothing but a device and a tag take the short path
// (post_short_impl: arguments in registers); any other setter takes the general one. Both
// deliver the same messages, count them the same, and refuse the same calls with the same
// words: every refusal of the short path is the general path's own.
TEST_F(Api, ShortPostsMatchTheGeneralPath) {
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::device_t d = weft::alloc_device();
  const weft::device_t dflt = weft::get_default_device();
  char msg[40] = "short or general";
  // Progress until `done` holds, for at most ten seconds: a message that never arrives
  // fails the test instead of hanging it.
  auto until = [&](auto&& done, weft::device_t on = weft::device_t{}) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      if (done()) return true;
      if (std::chrono::steady_clock::now() > end) return false;
      weft::progress_x().device(on.p ? on : d)();
    }
  };
  const uint64_t inject0 = d.get_counter(weft::counter_t::sent_inject);
  const uint64_t eager0 = d.get_counter(weft::counter_t::sent_eager);
  for (int general = 0; general < 2; ++general) {
    for (size_t n : {size_t(0), size_t(8), sizeof(msg)}) {
      const weft::tag_t tag = (weft::tag_t(1) << 40) + n * 2 + weft::tag_t(general);
      weft::post_am_x x(0, msg, n, weft::comp_t{}, rc);
      x.device(d).tag(tag);
      if (general) x.allow_retry(true);  // the default value, but a setter of the general path
      const weft::status_t s = x();
      ASSERT_TRUE(s.error.is_done()) << s.error.get_str();
      EXPECT_EQ(s.rank, 0);
      EXPECT_EQ(s.tag, tag);
      EXPECT_EQ(s.buf, msg);
      EXPECT_EQ(s.size, n);
      EXPECT_EQ(s.user_context, nullptr);
      weft::status_t r;
      ASSERT_TRUE(until([&] { return !(r = weft::cq_pop(cq)).error.is_retry(); })) << n;
      ASSERT_TRUE(r.error.is_done());
      EXPECT_EQ(r.tag, tag);
      ASSERT_EQ(r.size, n);
      EXPECT_EQ(std::memcmp(r.buf, msg, n), 0);
      std::free(r.buf);
    }
  }
  // 0 and 8 bytes inject, 40 eager (inject_size 32), twice each; the default device none.
  EXPECT_EQ(d.get_counter(weft::counter_t::sent_inject) - inject0, 4u);
  EXPECT_EQ(d.get_counter(weft::counter_t::sent_eager) - eager0, 2u);
  // A send on the default device (no device named), matched by a receive.
  int v = 42, got = 0;
  const uint64_t dflt0 = dflt.get_counter(weft::counter_t::sent_inject);
  weft::status_t rv = weft::post_recv(0, &got, sizeof(got), 9, cq);
  ASSERT_TRUE(weft::post_send_x(0, &v, sizeof(v), 9, weft::comp_t{})().error.is_done());
  until([&] { return rv.error.is_done() || !weft::cq_pop(cq).error.is_retry(); }, dflt);
  EXPECT_EQ(got, 42) << "the send was not matched";
  EXPECT_EQ(dflt.get_counter(weft::counter_t::sent_inject) - dflt0, 1u);
  // Large: the general path's rendezvous, posted, then complete.
  std::vector<char> big(1 << 20, 'b');
  weft::comp_t sent = weft::alloc_sync();
  weft::status_t bs = weft::post_am_x(0, big.data(), big.size(), sent, rc).device(d)();
  ASSERT_TRUE(bs.error.is_posted()) << bs.error.get_str();
  weft::status_t br;
  ASSERT_TRUE(until([&] { return !(br = weft::cq_pop(cq)).error.is_retry(); }));
  EXPECT_EQ(br.size, big.size());
  std::free(br.buf);
  ASSERT_TRUE(until([&] { return weft::sync_test(sent, nullptr); }));
  weft::free_comp(&sent);
  auto why = [](auto&& fn) {
    try {
      fn();
    } catch (const weft::fatal_error& e) {
      return e.call() + " " + e.argument() + ": " + e.what();
    }
    return std::string("accepted");
  };
  // A device in reused memory: its handle carries a generation, which the short path checks
  // (and strips) as the general one does.
  weft::device_t gone = weft::alloc_device(), gone_copy = gone;
  weft::free_device(&gone);
  weft::device_t again = weft::alloc_device();
  ASSERT_NE(reinterpret_cast<uintptr_t>(again.p) >> 48, 0u) << "not the reused memory";
  const uint64_t again0 = again.get_counter(weft::counter_t::sent_inject);
  ASSERT_TRUE(weft::post_am_x(0, msg, 8, weft::comp_t{}, rc).device(again)().error.is_done());
  EXPECT_EQ(again.get_counter(weft::counter_t::sent_inject) - again0, 1u);
  weft::status_t ar;
  ASSERT_TRUE(until([&] { return !(ar = weft::cq_pop(cq)).error.is_retry(); }, again));
  ASSERT_TRUE(ar.error.is_done());
  EXPECT_EQ(std::memcmp(ar.buf, msg, 8), 0);
  std::free(ar.buf);
  EXPECT_EQ(why([&] {
              (void)weft::post_am_x(0, msg, 8, weft::comp_t{}, rc).device(gone_copy)();
            }).rfind("post_am device: ", 0),
            0u);
  weft::free_device(&again);
  // A full backend (a two-message inbox, nothing consumed): retry_nomem with the post's own
  // fields, counted as a retry, the same both ways; then both messages are there.
  weft::device_t full = weft::alloc_device_x().inbox_depth(2)();
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(weft::post_am_x(0, msg, 8, weft::comp_t{}, rc).device(full)().error.is_done());
  for (int general = 0; general < 2; ++general) {
    const uint64_t retries0 = full.get_counter(weft::counter_t::retries);
    weft::post_am_x x(0, msg, 8, weft::comp_t{}, rc);
    x.device(full).tag(77);
    if (general) x.allow_retry(true);
    const weft::status_t fs = x();
    EXPECT_EQ(int(fs.error.errorcode), int(weft::errorcode_t::retry_nomem)) << general;
    EXPECT_EQ(fs.rank, 0);
    EXPECT_EQ(fs.tag, 77u);
    EXPECT_EQ(fs.buf, msg);
    EXPECT_EQ(fs.size, 8u);
    EXPECT_EQ(full.get_counter(weft::counter_t::retries) - retries0, 1u) << general;
  }
  for (int i = 0; i < 2; ++i) {
    weft::status_t fr;
    ASSERT_TRUE(until([&] { return !(fr = weft::cq_pop(cq)).error.is_retry(); }, full));
    EXPECT_EQ(std::memcmp(fr.buf, msg, 8), 0);
    std::free(fr.buf);
  }
  weft::free_device(&full);
  // Refusals: the same words both ways.
  weft::comp_t graph = weft::alloc_graph();
  auto both = [&](int rank, void* buf, size_t n, weft::comp_t comp, weft::rcomp_t to) {
    const std::string shrt =
        why([&] { (void)weft::post_am_x(rank, buf, n, comp, to).device(d)(); });
    const std::string gen =
        why([&] { (void)weft::post_am_x(rank, buf, n, comp, to).device(d).allow_retry(true)(); });
    EXPECT_EQ(shrt, gen);
    return shrt;
  };
  EXPECT_EQ(both(1, msg, 8, weft::comp_t{}, rc).rfind("post_am rank: ", 0), 0u);
  EXPECT_EQ(both(-1, msg, 8, weft::comp_t{}, rc).rfind("post_am rank: ", 0), 0u);
  EXPECT_EQ(both(0, nullptr, 8, weft::comp_t{}, rc).rfind("post_am local_buffer: ", 0), 0u);
  EXPECT_EQ(both(0, msg, 8, weft::comp_t{}, rc + 100).rfind("post_am remote_comp: ", 0), 0u);
  EXPECT_EQ(both(0, msg, 8, graph, rc).rfind("post_am local_comp: ", 0), 0u);
  EXPECT_EQ(why([&] {
              (void)weft::post_send_x(2, &v, sizeof(v), 1, weft::comp_t{})();
            }).rfind("post_send rank: ", 0),
            0u);
  weft::free_comp(&graph);
  weft::free_device(&d);
  weft::free_comp(&cq);
}

// Active messages of up to 16 bytes wait inside the completion queue's entry and get their
// malloc'd buffer in cq_pop; 17 bytes and up get it in progress. Either way the popping
// thread receives its own copy of exactly the bytes sent, which it frees.
TEST_F(Api, SmallActiveMessagesGetAMallocdBufferWhenPopped) {
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  unsigned char src[24];
  for (size_t n = 0; n <= 20; ++n) {
    for (size_t i = 0; i < sizeof(src); ++i) src[i] = static_cast<unsigned char>(n * 31 + i);
    ASSERT_TRUE(
        weft::post_am_x(0, src, n, weft::comp_t{}, rc).tag(weft::tag_t(n))().error.is_done());
  }
  for (int i = 0; i < 100; ++i) weft::progress();
  ASSERT_EQ(weft::cq_size(cq), 21u);
  std::thread([&] {
    for (size_t n = 0; n <= 20; ++n) {
      weft::status_t r = weft::cq_pop(cq);
      ASSERT_EQ(int(r.error.errorcode), int(weft::errorcode_t::done));
      EXPECT_EQ(r.tag, weft::tag_t(n));
      EXPECT_EQ(r.rank, 0);
      ASSERT_EQ(r.size, n);
      ASSERT_NE(r.buf, nullptr);
      const auto* got = static_cast<const unsigned char*>(r.buf);
      for (size_t i = 0; i < n; ++i)
        EXPECT_EQ(got[i], static_cast<unsigned char>(n * 31 + i)) << "size " << n << " byte " << i;
      std::free(r.buf);  // a plain malloc'd buffer: ASan checks the pairing
    }
    EXPECT_TRUE(weft::cq_pop(cq).error.is_retry());
  }).join();
  weft::free_comp(&cq);
}

// A completion queue with room for two: the other small messages wait in the inbox, with
// their payloads, until the queue has room, and nothing is lost or reordered.
TEST_F(Api, SmallActiveMessagesIntoAFullQueueWaitInTheInbox) {
  weft::comp_t cq = weft::alloc_cq_x().depth(2)();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  for (uint64_t v = 0; v < 6; ++v) {
    uint64_t payload = 0x1111111111111111ull * (v + 1);
    ASSERT_TRUE(
        weft::post_am_x(0, &payload, 8, weft::comp_t{}, rc).tag(weft::tag_t(v))().error.is_done());
  }
  uint64_t next = 0;
  for (int i = 0; i < 1000 && next < 6; ++i) {
    weft::progress();
    weft::status_t r = weft::cq_pop(cq);
    if (r.error.is_retry()) continue;
    ASSERT_TRUE(r.error.is_done());
    EXPECT_EQ(r.tag, weft::tag_t(next));
    ASSERT_EQ(r.size, 8u);
    uint64_t got;
    memcpy(&got, r.buf, 8);
    EXPECT_EQ(got, 0x1111111111111111ull * (next + 1));
    std::free(r.buf);
    ++next;
  }
  EXPECT_EQ(next, 6u);
  weft::free_comp(&cq);
}

TEST_F(Api, DisallowedRetryGoesToTheBacklog) {
  // A device with a two-message inbox: the third message cannot be queued until the
  // first ones are consumed, so it must come back from the backlog.
  weft::device_t d = weft::alloc_device_x().inbox_depth(2)();
  weft::comp_t cq = weft::alloc_cq();
  weft::comp_t sq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  int v[3] = {1, 2, 3};
  EXPECT_TRUE(weft::post_am_x(0, &v[0], 4, sq, rc).device(d)().error.is_done());
  EXPECT_TRUE(weft::post_am_x(0, &v[1], 4, sq, rc).device(d)().error.is_done());
  weft::status_t third = weft::post_am_x(0, &v[2], 4, sq, rc).device(d)();
  EXPECT_EQ(int(third.error.errorcode), int(weft::errorcode_t::retry_nomem));
  weft::status_t bl = weft::post_am_x(0, &v[2], 4, sq, rc).device(d).allow_retry(false)();
  EXPECT_EQ(int(bl.error.errorcode), int(weft::errorcode_t::posted_backlog));
  int got = 0, sum = 0;
  bool send_signalled = false;
  for (int i = 0; i < 1000 && (got < 3 || !send_signalled); ++i) {
    weft::progress_x().device(d)();
    weft::status_t r = weft::cq_pop(cq);
    if (r.error.is_done()) {
      sum += *static_cast<int*>(r.buf);
      std::free(r.buf);
      ++got;
    }
    weft::status_t s = weft::cq_pop(sq);
    if (s.error.is_done()) {
      EXPECT_EQ(int(s.error.errorcode), int(weft::errorcode_t::done_backlog));
      EXPECT_EQ(s.buf, &v[2]);
      send_signalled = true;
    }
  }
  EXPECT_EQ(got, 3);
  EXPECT_EQ(sum, 6);
  EXPECT_TRUE(send_signalled);
  weft::free_comp(&cq);
  weft::free_comp(&sq);
  weft::free_device(&d);
}

// The backlog's bound: with backlog_size 16, posts that refuse retry queue up to 16 items,
// then get retry_backlog; everything queued goes out, once each, when progress drains it.
TEST_F(Api, TheBacklogIsBoundedByBacklogSize) {
  weft::runtime_t rt = weft::alloc_runtime_x().backlog_size(16).inbox_depth(2)();
  EXPECT_EQ(rt.get_attr_backlog_size(), 16u);
  weft::device_t d = weft::alloc_device_x().runtime(rt)();
  weft::comp_t cq = weft::alloc_cq_x().runtime(rt)();
  weft::rcomp_t rc = weft::register_rcomp_x(cq).runtime(rt)();
  std::vector<uint64_t> v(64);
  size_t sent = 0, queued = 0;
  weft::status_t s;
  for (;; ++sent) {  // no progress: the inbox fills, then the backlog
    v[sent] = sent;
    s = weft::post_am_x(0, &v[sent], 8, weft::comp_t{}, rc).device(d).allow_retry(false)();
    if (!s.error.is_done() && !s.error.is_posted()) break;
    if (s.error.is_posted()) ++queued;
  }
  EXPECT_EQ(int(s.error.errorcode), int(weft::errorcode_t::retry_backlog));
  EXPECT_EQ(queued, 16u);
  EXPECT_STREQ(weft::get_errorcode_str(s.error.errorcode),
               "retry (the device's backlog is at backlog_size)");
  std::vector<int> seen(sent, 0);
  size_t got = 0;
  for (int i = 0; i < 10000 && got < sent; ++i) {
    weft::progress_x().device(d)();
    for (weft::status_t r = weft::cq_pop(cq); r.error.is_done(); r = weft::cq_pop(cq)) {
      uint64_t value;
      memcpy(&value, r.buf, 8);
      std::free(r.buf);
      ASSERT_LT(value, sent);
      ++seen[value];
      ++got;
    }
  }
  EXPECT_EQ(got, sent);
  for (size_t i = 0; i < sent; ++i) EXPECT_EQ(seen[i], 1) << "message " << i;
  weft::free_comp(&cq);
  weft::free_device(&d);
  weft::free_runtime(&rt);
}

// With the request table full of unexpected messages, a receive for one of them, posted or
// tried, still succeeds: it needs no request of its own.
TEST_F(Api, AReceiveForAnArrivedMessageSucceedsWithTheTableFull) {
  weft::runtime_t rt = weft::alloc_runtime_x().max_requests(16)();
  weft::device_t d = weft::alloc_device_x().runtime(rt)();
  std::vector<uint64_t> out(24), in(24);
  size_t sent = 0;
  for (; sent < out.size(); ++sent) {  // 16 unexpected, the rest wait in the inbox
    out[sent] = 1000 + sent;
    weft::status_t s = weft::post_send_x(0, &out[sent], 8, weft::tag_t(sent), weft::comp_t{})
                           .device(d)
                           .runtime(rt)();
    ASSERT_TRUE(s.error.is_done());
  }
  for (int i = 0; i < 100; ++i) weft::progress_x().device(d)();
  weft::comp_t sync = weft::alloc_sync_x().runtime(rt)();
  for (size_t t = 0; t < sent; ++t) {
    weft::status_t s;
    for (int i = 0; i < 1000; ++i) {
      s = t % 2 ? weft::post_recv_x(0, &in[t], 8, weft::tag_t(t), sync).device(d).runtime(rt)()
                : weft::post_recv_x(0, &in[t], 8, weft::tag_t(t), sync)
                      .device(d)
                      .runtime(rt)
                      .allow_posted(false)();
      if (!s.error.is_retry()) break;
      weft::progress_x().device(d)();
    }
    if (s.error.is_posted()) weft::sync_wait_x(sync, &s).device(d)();
    EXPECT_TRUE(s.error.is_done()) << "tag " << t << ": " << s.error.get_str();
    EXPECT_EQ(in[t], 1000 + t);
  }
  weft::free_comp(&sync);
  weft::free_device(&d);
  weft::free_runtime(&rt);
}

// Testers and signallers at once: every signal is taken by exactly one successful test.
// (ThreadSanitizer cannot see a double take: the fields are atomics. The count can.)
TEST_F(Api, ConcurrentSyncTestsTakeEachSignalExactlyOnce) {
  weft::comp_t sync = weft::alloc_sync();
  constexpr int kSignals = 200000;
  std::atomic<int> taken{0}, signalled{0};
  std::atomic<bool> stop{false}, give_up{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kSignals / 2; ++i) {
        weft::status_t s;
        s.error = weft::errorcode_t::done;
        s.tag = weft::tag_t(i);
        (void)weft::comp_signal(sync, s);
        signalled.fetch_add(1);
      }
    });
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      while ((!stop.load() || taken.load() < signalled.load()) && !give_up.load()) {
        weft::status_t s;
        if (weft::sync_test(sync, &s)) taken.fetch_add(1);
        if (taken.load() > kSignals) return;
      }
    });
  threads[0].join();
  threads[1].join();
  stop = true;
  for (int i = 0; i < 1000000 && taken.load() < kSignals; ++i) std::this_thread::yield();
  give_up = true;  // a lost signal would keep the testers waiting for ever
  threads[2].join();
  threads[3].join();
  EXPECT_EQ(taken.load(), kSignals);
  EXPECT_FALSE(weft::sync_test(sync, nullptr));
  weft::free_comp(&sync);
}

// A handler inside progress that signals a full queue gets retry instead of spinning.
TEST_F(Api, AHandlerSignallingAFullQueueReturns) {
  weft::comp_t cq = weft::alloc_cq_x().depth(2)();
  weft::status_t fill;
  fill.error = weft::errorcode_t::done;
  ASSERT_TRUE(weft::comp_signal(cq, fill).is_done());
  ASSERT_TRUE(weft::comp_signal(cq, fill).is_done());
  std::atomic<int> answer{-1};
  weft::comp_t h = weft::alloc_handler([&](weft::status_t s) {
    std::free(s.buf);
    answer = int(weft::comp_signal(cq, fill).errorcode);
  });
  weft::rcomp_t rc = weft::register_rcomp(h);
  int v = 1;
  ASSERT_TRUE(weft::post_am(0, &v, sizeof(v), weft::comp_t{}, rc).error.is_done());
  for (int i = 0; i < 1000 && answer.load() < 0; ++i) weft::progress();
  EXPECT_EQ(answer.load(), int(weft::errorcode_t::retry_nomem));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(weft::cq_pop(cq).error.is_done());
  weft::free_comp(&h);
  weft::free_comp(&cq);
}

// allow_retry(false) without a completion object: an eager active message that waits in
// the backlog is a copy (the caller may reuse its buffer at once); an operation Weft could
// not copy is refused, since nobody would learn when the buffer is free.
TEST_F(Api, BackloggedWithoutACompletionObjectIsACopyOrRefused) {
  weft::runtime_t rt = weft::alloc_runtime_x().inbox_depth(2)();
  weft::device_t d = weft::alloc_device_x().runtime(rt)();
  weft::comp_t cq = weft::alloc_cq_x().runtime(rt)();
  weft::rcomp_t rc = weft::register_rcomp_x(cq).runtime(rt)();
  uint64_t v = 1;
  weft::status_t s;
  do {  // fill the inbox
    s = weft::post_am_x(0, &v, 8, weft::comp_t{}, rc).device(d).runtime(rt)();
  } while (s.error.is_done());
  v = 77;
  s = weft::post_am_x(0, &v, 8, weft::comp_t{}, rc).device(d).runtime(rt).allow_retry(false)();
  ASSERT_EQ(int(s.error.errorcode), int(weft::errorcode_t::posted_backlog));
  v = 99;  // reused at once: the backlog holds a copy
  bool seen = false;
  for (int i = 0; i < 10000 && !seen; ++i) {
    weft::progress_x().device(d)();
    for (weft::status_t r = weft::cq_pop(cq); r.error.is_done(); r = weft::cq_pop(cq)) {
      uint64_t got;
      memcpy(&got, r.buf, 8);
      std::free(r.buf);
      EXPECT_NE(got, 99u);
      seen |= got == 77;
    }
  }
  EXPECT_TRUE(seen);
  std::vector<char> big(1 << 20);
  char small[8];
  EXPECT_EQ(refused_argument([&] {
              (void)weft::post_send_x(0, big.data(), big.size(), 1, weft::comp_t{})
                  .device(d)
                  .runtime(rt)
                  .allow_retry(false)();
            }),
            "local_comp");
  EXPECT_EQ(refused_argument([&] {
              (void)weft::post_recv_x(0, small, 8, 1, weft::comp_t{})
                  .device(d)
                  .runtime(rt)
                  .allow_retry(false)();
            }),
            "local_comp");
  weft::free_comp(&cq);
  weft::free_device(&d);
  weft::free_runtime(&rt);
}

TEST_F(Api, AllowDoneFalseSignalsInstead) {
  weft::comp_t sync = weft::alloc_sync();
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  int x = 5;
  weft::status_t s = weft::post_am_x(0, &x, 4, sync, rc).allow_done(false)();
  EXPECT_TRUE(s.error.is_posted());
  weft::status_t out;
  EXPECT_TRUE(weft::sync_test(sync, &out));
  EXPECT_TRUE(out.error.is_done());
  EXPECT_EQ(out.buf, &x);
  weft::status_t r;
  do {
    weft::progress();
    r = weft::cq_pop(cq);
  } while (r.error.is_retry());
  std::free(r.buf);
  weft::free_comp(&sync);
  weft::free_comp(&cq);
}

TEST_F(Api, ReceiveWithAllowPostedFalseIsATryReceive) {
  weft::comp_t sync = weft::alloc_sync();
  char buf[16] = {};
  weft::status_t s = weft::post_recv_x(0, buf, 16, 9, sync).allow_posted(false)();
  EXPECT_TRUE(s.error.is_retry());
  const char msg[] = "hello";
  ASSERT_TRUE(weft::post_send(0, const_cast<char*>(msg), 6, 9, weft::comp_t{}).error.is_done());
  for (int i = 0; i < 10; ++i) weft::progress();
  s = weft::post_recv_x(0, buf, 16, 9, sync).allow_posted(false)();
  ASSERT_TRUE(s.error.is_done());
  EXPECT_STREQ(buf, "hello");
  EXPECT_EQ(s.size, 6u);
  weft::free_comp(&sync);
}

TEST_F(Api, HandlerRunsOnSignal) {
  std::vector<int> seen;
  weft::comp_t h = weft::alloc_handler([&](weft::status_t s) {
    seen.push_back(int(s.tag));
    EXPECT_EQ(s.size, 0u);
    std::free(s.buf);  // an active message buffer belongs to the receiver, even when empty
  });
  weft::rcomp_t rc = weft::register_rcomp(h);
  for (int i = 0; i < 5; ++i)
    weft::post_am_x(0, nullptr, 0, weft::comp_t{}, rc).tag(weft::tag_t(i))();
  for (int i = 0; i < 20; ++i) weft::progress();
  ASSERT_EQ(seen.size(), 5u);
  std::sort(seen.begin(), seen.end());  // delivery may be out of order; each tag once
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4}));
  weft::free_comp(&h);
}

TEST_F(Api, FreeingADeviceWithPendingWorkIsRefused) {
  weft::device_t d = weft::alloc_device();
  weft::comp_t sync = weft::alloc_sync();
  char buf[8];
  weft::post_recv_x(0, buf, 8, 1, sync).device(d)();
  EXPECT_THROW(weft::free_device(&d), weft::fatal_error);
  EXPECT_FALSE(d.is_empty());
  EXPECT_TRUE(weft::cancel_recv_x(0, buf, 1, sync).device(d)());
  weft::free_device(&d);
  weft::free_comp(&sync);
}

TEST_F(Api, MalformedMessageIsFatalWhenAsked) {
  weft::runtime_t rt = weft::alloc_runtime_x().wire_errors_fatal(true)();
  EXPECT_TRUE(rt.get_attr_wire_errors_fatal());
  auto* dev = weft::util::live(weft::get_default_device(rt).p, "test", "device");
  char junk[3] = {1, 2, 3};
  ASSERT_TRUE(dev->net->try_send(0, junk, sizeof(junk), nullptr, 0));
  try {
    weft::progress_x().runtime(rt)();
    FAIL() << "no exception";
  } catch (const weft::fatal_error& e) {
    EXPECT_EQ(e.call(), "progress");
    EXPECT_NE(std::string(e.what()).find("from rank 0: truncated message of 3 bytes"),
              std::string::npos)
        << e.what();
  }
  // Traffic after it is undisturbed.
  weft::comp_t cq = weft::alloc_cq_x().runtime(rt)();
  weft::rcomp_t rc = weft::register_rcomp_x(cq).runtime(rt)();
  int v = 7;
  ASSERT_TRUE(weft::post_am_x(0, &v, 4, weft::comp_t{}, rc).runtime(rt)().error.is_done());
  weft::status_t r;
  do {
    weft::progress_x().runtime(rt)();
    r = weft::cq_pop(cq);
  } while (r.error.is_retry());
  EXPECT_EQ(*static_cast<int*>(r.buf), 7);
  std::free(r.buf);
  weft::free_comp(&cq);
  weft::free_runtime(&rt);
}

TEST_F(Api, BlockingProgressSleepsUntilAMessageArrives) {
  using clk = std::chrono::steady_clock;
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  // Nothing arrives: the call sleeps about the time asked for, then reports no progress.
  auto t0 = clk::now();
  EXPECT_TRUE(weft::progress_x().block_us(50000)().is_retry());
  double idle = std::chrono::duration<double>(clk::now() - t0).count();
  EXPECT_GE(idle, 0.04);
  EXPECT_LT(idle, 2.0);
  // A message from another thread wakes the sleeper long before its 5 s timeout.
  int v = 11;
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    weft::post_am(0, &v, sizeof(v), weft::comp_t{}, rc);
  });
  t0 = clk::now();
  weft::status_t r;
  do {
    weft::progress_x().block_us(5000000)();
    r = weft::cq_pop(cq);
  } while (r.error.is_retry() && clk::now() - t0 < std::chrono::seconds(10));
  double woke = std::chrono::duration<double>(clk::now() - t0).count();
  sender.join();
  ASSERT_TRUE(r.error.is_done());
  EXPECT_EQ(*static_cast<int*>(r.buf), 11);
  EXPECT_LT(woke, 2.0);
  std::free(r.buf);
  weft::free_comp(&cq);
}

// A handle goes through a void* and back (a runtime keeps it in its own C structures),
// generation and all: the stale one is still refused after the object is freed.
TEST_F(Api, HandlesRoundTripThroughOpaquePointers) {
  weft::comp_t cq = weft::alloc_cq();
  void* opaque = cq.get_opaque();
  weft::comp_t back = weft::comp_t::from_opaque(opaque);
  EXPECT_EQ(back.p, cq.p);
  weft::rcomp_t rc = weft::register_rcomp(back);
  int v = 42;
  ASSERT_TRUE(weft::post_am(0, &v, sizeof(v), weft::comp_t{}, rc).error.is_done());
  weft::status_t s;
  for (int i = 0; i < 1000 && !(s = weft::cq_pop(back)).error.is_done(); ++i) weft::progress();
  ASSERT_TRUE(s.error.is_done());
  EXPECT_EQ(*static_cast<int*>(s.buf), 42);
  std::free(s.buf);
  weft::device_t d = weft::get_default_device();
  EXPECT_EQ(weft::device_t::from_opaque(d.get_opaque()).get_attr_index(), 0);
  weft::runtime_t rt = weft::get_g_runtime();
  EXPECT_EQ(weft::runtime_t::from_opaque(rt.get_opaque()).get_attr_packet_size(),
            rt.get_attr_packet_size());
  weft::free_comp(&cq);
  EXPECT_THROW(weft::cq_pop(weft::comp_t::from_opaque(opaque)), weft::fatal_error);
}

namespace {
std::string g_refusal;
void keep_refusal(const weft::wire_error_t& e) {
  g_refusal = e.what;
}
}  // namespace

// Freeing in either order: free_comp releases the object's remote completions, and a later
// deregister_rcomp of a released handle does nothing; a handle never given out is refused.
TEST_F(Api, CompletionObjectsAndTheirHandlesFreeInEitherOrder) {
  weft::comp_t a = weft::alloc_cq();
  const weft::rcomp_t ra = weft::register_rcomp(a);
  weft::free_comp(&a);
  EXPECT_NO_THROW(weft::deregister_rcomp(ra));
  EXPECT_NO_THROW(weft::deregister_rcomp(ra));  // twice: still nothing
  weft::comp_t b = weft::alloc_cq();
  const weft::rcomp_t rb = weft::register_rcomp(b);
  weft::deregister_rcomp(rb);
  EXPECT_NO_THROW(weft::free_comp(&b));
  EXPECT_EQ(refused_argument([&] { weft::deregister_rcomp(rb + 1000); }), "rcomp");
  EXPECT_EQ(refused_argument([] { weft::deregister_rcomp(weft::rcomp_null); }), "rcomp");
  // A message naming a released handle is refused where it arrives, not delivered.
  weft::set_error_handler(keep_refusal);
  g_refusal.clear();
  int v = 1;
  ASSERT_TRUE(weft::post_am(0, &v, sizeof(v), weft::comp_t{}, ra).error.is_done());
  for (int i = 0; i < 1000 && g_refusal.empty(); ++i) weft::progress();
  EXPECT_NE(g_refusal.find("unknown remote completion"), std::string::npos) << g_refusal;
  weft::set_error_handler(nullptr);
}

// A runtime without defaults (a task runtime that manages its own resources): nothing is
// made for it, its devices number from 0, and a call that names no device, engine or pool
// is refused naming the missing one; with them named, everything works.
TEST_F(Api, ARuntimeWithoutDefaultsNumbersItsOwnResources) {
  weft::runtime_t rt = weft::alloc_runtime_x().alloc_defaults(false)();
  EXPECT_FALSE(rt.get_attr_alloc_defaults());
  EXPECT_TRUE(weft::get_default_device(rt).is_empty());
  EXPECT_TRUE(weft::get_default_packet_pool(rt).is_empty());
  EXPECT_TRUE(weft::get_default_matching_engine(rt).is_empty());
  EXPECT_EQ(refused_argument([&] { weft::alloc_device_x().runtime(rt)(); }), "packet_pool");
  weft::packet_pool_t pool = weft::alloc_packet_pool_x().runtime(rt)();
  weft::device_t d = weft::alloc_device_x().runtime(rt).packet_pool(pool)();
  EXPECT_EQ(d.get_attr_index(), 0);
  weft::matching_engine_t e = weft::alloc_matching_engine_x().runtime(rt)();
  weft::comp_t cq = weft::alloc_cq_x().runtime(rt)();
  weft::rcomp_t rc = weft::register_rcomp_x(cq).runtime(rt)();
  int v = 7, got = 0;
  EXPECT_EQ(refused_argument([&] { weft::post_am_x(0, &v, 4, weft::comp_t{}, rc).runtime(rt)(); }),
            "device");
  EXPECT_EQ(refused_argument([&] { weft::progress_x().runtime(rt)(); }), "device");
  EXPECT_EQ(refused_argument(
                [&] { weft::post_send_x(0, &v, 4, 1, weft::comp_t{}).runtime(rt).device(d)(); }),
            "matching_engine");
  EXPECT_EQ(refused_argument([&] { weft::get_upacket_x().runtime(rt)(); }), "packet_pool");
  // Named, they work: an active message and a send to itself on device 0 and the engine.
  ASSERT_TRUE(
      weft::post_am_x(0, &v, 4, weft::comp_t{}, rc).runtime(rt).device(d)().error.is_done());
  weft::status_t s;
  for (int i = 0; i < 1000 && !(s = weft::cq_pop(cq)).error.is_done(); ++i)
    weft::progress_x().device(d)();
  ASSERT_TRUE(s.error.is_done());
  EXPECT_EQ(*static_cast<int*>(s.buf), 7);
  std::free(s.buf);
  ASSERT_TRUE(weft::post_send_x(0, &v, 4, 3, weft::comp_t{})
                  .device(d)
                  .matching_engine(e)()
                  .error.is_done());
  weft::comp_t sync = weft::alloc_sync_x().runtime(rt)();
  weft::status_t r = weft::post_recv_x(0, &got, 4, 3, sync).device(d).matching_engine(e)();
  if (r.error.is_posted())
    for (int i = 0; i < 100000 && !weft::sync_test(sync, &r); ++i) weft::progress_x().device(d)();
  EXPECT_TRUE(r.error.is_done());
  weft::free_comp(&sync);
  EXPECT_EQ(got, 7);
  weft::free_comp(&cq);
  weft::free_matching_engine(&e);
  weft::free_device(&d);
  weft::free_packet_pool(&pool);
  weft::free_runtime(&rt);
}

namespace {
// An allocator that knows every buffer it gave out, as a runtime's own would.
struct counting_allocator {
  std::vector<void*> live;
  int allocated = 0, deallocated = 0;
  static void* allocate(size_t size, void* ctx) {
    auto* self = static_cast<counting_allocator*>(ctx);
    void* p = std::malloc(size ? size : 1);
    self->live.push_back(p);
    ++self->allocated;
    return p;
  }
  static void deallocate(void* p, void* ctx) {
    auto* self = static_cast<counting_allocator*>(ctx);
    self->live.erase(std::find(self->live.begin(), self->live.end(), p));
    ++self->deallocated;
    std::free(p);
  }
  bool gave(void* p) const { return std::find(live.begin(), live.end(), p) != live.end(); }
};
}  // namespace

// Arriving active messages' buffers come from the allocator given at registration (or the
// runtime's, set_allocator), for every protocol: small, eager and rendezvous.
TEST_F(Api, ActiveMessageBuffersComeFromTheAllocator) {
  counting_allocator mine, runtimes;
  weft::set_allocator({counting_allocator::allocate, counting_allocator::deallocate, &runtimes});
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t own = weft::register_rcomp_x(cq).allocator(
      {counting_allocator::allocate, counting_allocator::deallocate, &mine})();
  weft::rcomp_t inherited = weft::register_rcomp(cq);
  weft::set_allocator({});  // later registrations: malloc again
  weft::rcomp_t plain = weft::register_rcomp(cq);
  std::vector<char> big(100000, 'r');
  const size_t sizes[] = {8, 1000, big.size()};
  weft::comp_t sent = weft::alloc_cq();
  int pending = 0;
  for (weft::rcomp_t rc : {own, inherited, plain})
    for (size_t n : sizes) {
      weft::status_t s = weft::post_am(0, big.data(), n, sent, rc);
      ASSERT_FALSE(s.error.is_retry());
      pending += s.error.is_posted();
    }
  int got = 0;
  for (int i = 0; i < 100000 && (got < 9 || pending); ++i) {
    weft::progress();
    if (weft::cq_pop(sent).error.is_done()) --pending;
    weft::status_t s = weft::cq_pop(cq);
    if (!s.error.is_done()) continue;
    ++got;
    EXPECT_EQ(static_cast<char*>(s.buf)[s.size - 1], 'r');
    if (mine.gave(s.buf)) {
      counting_allocator::deallocate(s.buf, &mine);
    } else if (runtimes.gave(s.buf)) {
      counting_allocator::deallocate(s.buf, &runtimes);
    } else {
      std::free(s.buf);
    }
  }
  EXPECT_EQ(got, 9);
  EXPECT_EQ(mine.allocated, 3);
  EXPECT_EQ(runtimes.allocated, 3);
  EXPECT_EQ(mine.deallocated, 3);
  EXPECT_EQ(runtimes.deallocated, 3);
  EXPECT_EQ(refused_argument([] {
              weft::set_allocator({counting_allocator::allocate, nullptr, nullptr});
            }),
            "allocator");
  weft::free_comp(&cq);
  weft::free_comp(&sent);
}

// Active messages lent in place go only to a handler, never in a packet; a handler lent
// one reads it during the call, in every protocol (eager and rendezvous, loopback).
TEST_F(Api, InPlaceDeliveryLendsToAHandler) {
  weft::comp_t cq = weft::alloc_cq();
  EXPECT_EQ(refused_argument([&] { weft::register_rcomp_x(cq).in_place(true)(); }), "in_place");
  std::vector<std::pair<size_t, char>> seen;
  weft::comp_t h = weft::alloc_handler([&](weft::status_t s) {
    seen.emplace_back(s.size, s.size ? static_cast<char*>(s.buf)[s.size - 1] : 0);
  });
  EXPECT_EQ(
      refused_argument([&] { weft::register_rcomp_x(h).in_place(true).packet_delivery(true)(); }),
      "packet_delivery");
  weft::rcomp_t rc = weft::register_rcomp_x(h).in_place(true)();
  std::vector<char> big(100000, 'p');
  weft::comp_t sent = weft::alloc_cq();
  int pending = 0;
  for (size_t n : {size_t(8), size_t(1000), big.size()}) {
    weft::status_t s = weft::post_am(0, big.data(), n, sent, rc);
    ASSERT_FALSE(s.error.is_retry());
    pending += s.error.is_posted();
  }
  for (int i = 0; i < 100000 && (seen.size() < 3 || pending); ++i) {
    weft::progress();
    if (weft::cq_pop(sent).error.is_done()) --pending;
  }
  ASSERT_EQ(seen.size(), 3u);
  for (auto [size, last] : seen) EXPECT_EQ(last, 'p') << size;
  weft::free_comp(&sent);
  weft::free_comp(&h);
  weft::free_comp(&cq);
}

namespace {
// A runtime's own completion type: refuses its first signals (as a full structure of its
// own would), then records each value once.
struct refusing_comp final : weft::custom_comp {
  std::vector<int> got;
  int refusals = 3, signals = 0;
  bool signal(const weft::status_t& s) override {
    ++signals;
    if (refusals > 0) {
      --refusals;
      return false;
    }
    got.push_back(s.buf && s.size == sizeof(int) ? *static_cast<int*>(s.buf) : -1);
    if (s.size == sizeof(int)) std::free(s.buf);
    return true;
  }
};
}  // namespace

// The program's own completion object takes active messages and local completions; one it
// refuses comes again (from the backend or the backlog), exactly once when taken.
TEST_F(Api, CustomCompletionObjectsAreSignalledAndMayRefuse) {
  refusing_comp mine;
  weft::comp_t c = weft::alloc_custom_comp(&mine);
  weft::rcomp_t rc = weft::register_rcomp(c);
  for (int i = 0; i < 10; ++i)
    while (weft::post_am(0, &i, sizeof(i), weft::comp_t{}, rc).error.is_retry()) weft::progress();
  for (int i = 0; i < 10000 && mine.got.size() < 10; ++i) weft::progress();
  ASSERT_EQ(mine.got.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(mine.got[size_t(i)], i);
  EXPECT_EQ(mine.signals, 13);  // three refused, each offered again
  // A rendezvous send's local completion, refused once, comes from the backlog.
  mine.got.clear();
  mine.refusals = 1;
  std::vector<char> out(100000, 'c'), in(100000);
  weft::comp_t sync = weft::alloc_sync();
  weft::status_t r = weft::post_recv(0, in.data(), in.size(), 9, sync);
  weft::status_t s = weft::post_send(0, out.data(), out.size(), 9, c);
  ASSERT_TRUE(s.error.is_posted());
  for (int i = 0; i < 100000 && (mine.got.empty() || !weft::sync_test(sync, &r)); ++i)
    weft::progress();
  EXPECT_EQ(mine.got.size(), 1u);
  EXPECT_EQ(in[99999], 'c');
  EXPECT_EQ(refused_argument([] { weft::alloc_custom_comp(nullptr); }), "comp");
  weft::free_comp(&sync);
  weft::free_comp(&c);
}

// Tags are 64 bits end to end: a send, an active message and a put's notification carry
// the high half, and tags equal in their low 32 bits do not match each other.
TEST_F(Api, TagsAreSixtyFourBits) {
  const weft::tag_t big = (weft::tag_t(0xfeedu) << 40) | 5, low = 5;
  static_assert(weft::max_tag == UINT64_MAX);
  int out = 11, in = 0;
  weft::comp_t sync = weft::alloc_sync();
  ASSERT_TRUE(weft::post_send(0, &out, sizeof(out), big, weft::comp_t{}).error.is_done());
  // Same low half, other tag: no match, not even after progress.
  weft::status_t miss = weft::post_recv_x(0, &in, sizeof(in), low, sync).allow_posted(false)();
  for (int i = 0; i < 100 && miss.error.is_retry(); ++i) {
    weft::progress();
    miss = weft::post_recv_x(0, &in, sizeof(in), low, sync).allow_posted(false)();
  }
  EXPECT_TRUE(miss.error.is_retry());
  weft::status_t hit = weft::post_recv_x(0, &in, sizeof(in), big, sync).allow_posted(false)();
  ASSERT_TRUE(hit.error.is_done());
  EXPECT_EQ(hit.tag, big);
  EXPECT_EQ(in, 11);
  // An active message and a put's notification bring the whole tag.
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  ASSERT_TRUE(weft::post_am_x(0, &out, sizeof(out), weft::comp_t{}, rc).tag(big)().error.is_done());
  std::vector<char> region(4096), src(64, 'p');
  weft::mr_t mr = weft::register_memory(region.data(), region.size());
  weft::comp_t put_done = weft::alloc_sync();
  ASSERT_FALSE(weft::post_put_x(0, src.data(), src.size(), put_done, 128, weft::get_rmr(mr))
                   .remote_comp(rc)
                   .tag(big + 1)()
                   .error.is_retry());
  std::vector<weft::tag_t> tags;
  for (int i = 0; i < 100000 && tags.size() < 2; ++i) {
    weft::progress();
    weft::status_t s = weft::cq_pop(cq);
    if (!s.error.is_done()) continue;
    tags.push_back(s.tag);
    if (s.size == sizeof(int)) std::free(s.buf);
  }
  for (int i = 0; i < 100000 && !weft::sync_test(put_done, nullptr); ++i) weft::progress();
  ASSERT_EQ(tags.size(), 2u);
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags[0], big);
  EXPECT_EQ(tags[1], big + 1);
  EXPECT_EQ(region[128], 'p');
  weft::deregister_memory(&mr);
  weft::free_comp(&put_done);
  weft::free_comp(&cq);
  weft::free_comp(&sync);
}
