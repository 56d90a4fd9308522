// SPDX-License-Identifier: BSD-3-Clause
// mechanism: which way large messages moved over shared memory. Rank 0 sends 160 messages
// of 1 MiB to rank 1, four in flight, each with its own pattern, which rank 1 checks; then
// rank 0 reads its device's counters of the bytes each mechanism moved and checks them
// against WEFT_SHM_PUT: pipeline or cma, all of them that way; auto with the test hook
// WEFT_TEST_PIPELINE_DELAY making the pipelined copy slow, at least 4 bytes in 5 by
// cross-memory attach (auto must notice and switch); auto alone, every byte one way or the
// other (either may be the faster one on this machine this minute). Rank 1 checks how it
// stored them against WEFT_SHM_STORES: streaming, every pipelined byte around the cache;
// cached, none (auto tries both on 1 MiB transfers: any share). With WEFT_SHM_CHANNELS=1
// and the pipeline, three of every four transfers wait for the one channel: rank 0 checks
// that its data backlog took them (backlog_pushes) and rank 1 that each arrived whole.
// By cross-memory attach, rank 1 checks how much it read itself (bytes_split_read): the
// second half of every message (WEFT_SHM_SPLIT's default is below 1 MiB), none when WEFT_SHM_SPLIT=0
// or when the test hook WEFT_TEST_SPLIT_UNREAD makes it answer that it could not (then rank
// 0 copies those halves too: its counts above still hold).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

int scenario_mechanism() {
  using namespace mp;
  const int me = weft::get_rank_me();
  constexpr size_t size = size_t(1) << 20, nmsgs = 160, window = 4;
  const char* put = getenv("WEFT_SHM_PUT");
  const std::string mode = put && *put ? put : "auto";
  const char* delay = getenv("WEFT_TEST_PIPELINE_DELAY");
  const bool slow_pipeline = delay && atoi(delay) > 0;
  std::vector<std::vector<char>> bufs(window, std::vector<char>(size));
  weft::comp_t sync = weft::alloc_sync_x().threshold(window)();
  weft::device_t dev = weft::get_default_device();
  const uint64_t p0 = dev.get_counter(weft::counter_t::bytes_pipelined);
  const uint64_t c0 = dev.get_counter(weft::counter_t::bytes_cross_memory);
  const uint64_t s0 = dev.get_counter(weft::counter_t::bytes_streamed);
  const uint64_t b0 = dev.get_counter(weft::counter_t::backlog_pushes);
  const uint64_t r0 = dev.get_counter(weft::counter_t::bytes_split_read);
  const char* split_env = getenv("WEFT_SHM_SPLIT");
  const char* unread_env = getenv("WEFT_TEST_SPLIT_UNREAD");
  const bool unread = unread_env && std::string(unread_env) == "1";
  // Every message is split unless WEFT_SHM_SPLIT says 0 (the tests set no other value).
  const bool split = !(split_env && std::string(split_env) == "0");
  const char* channels = getenv("WEFT_SHM_CHANNELS");
  const bool one_channel = channels && std::string(channels) == "1";
  const char* stores_env = getenv("WEFT_SHM_STORES");
  const std::string stores = stores_env && *stores_env ? stores_env : "auto";
  for (size_t m = 0; m < nmsgs; m += window) {
    for (size_t k = 0; k < window; ++k) {
      if (me == 0) fill(bufs[k].data(), size, m + k);
      weft::status_t s = post_until([&] {
        return me == 0 ? weft::post_send(1, bufs[k].data(), size, int(k), sync)
                       : weft::post_recv(0, bufs[k].data(), size, int(k), sync);
      });
      CHECK(s.error.is_posted());
    }
    std::vector<weft::status_t> st(window);
    wait_sync(sync, st.data());
    for (size_t k = 0; k < window; ++k) {
      CHECK(st[k].error.is_done());
      CHECK_EQ(st[k].size, size);
      if (me == 1) CHECK_EQ(verify(bufs[k].data(), size, m + k), SIZE_MAX);
    }
  }
  if (me == 0) {
    const uint64_t p = dev.get_counter(weft::counter_t::bytes_pipelined) - p0;
    const uint64_t c = dev.get_counter(weft::counter_t::bytes_cross_memory) - c0;
    printf("rank 0: WEFT_SHM_PUT=%s%s: %llu bytes pipelined, %llu by cross-memory attach\n",
           mode.c_str(), slow_pipeline ? " (pipeline slowed)" : "",
           static_cast<unsigned long long>(p), static_cast<unsigned long long>(c));
    CHECK_EQ(p + c, uint64_t(size * nmsgs));
    if (mode == "pipeline") CHECK_EQ(c, uint64_t(0));
    if (mode == "cma") CHECK_EQ(p, uint64_t(0));
    if (mode == "auto" && slow_pipeline) CHECK(c >= 4 * p);
    const uint64_t queued = dev.get_counter(weft::counter_t::backlog_pushes) - b0;
    printf("rank 0: %llu items backlogged\n", static_cast<unsigned long long>(queued));
    if (one_channel && mode == "pipeline") CHECK(queued >= nmsgs / window);
  } else {
    const uint64_t s = dev.get_counter(weft::counter_t::bytes_streamed) - s0;
    printf("rank 1: WEFT_SHM_STORES=%s: %llu bytes taken in with streaming stores\n",
           stores.c_str(), static_cast<unsigned long long>(s));
    if (stores == "cached" || mode == "cma") CHECK_EQ(s, uint64_t(0));
    if (stores == "streaming" && mode == "pipeline") CHECK_EQ(s, uint64_t(size * nmsgs));
    CHECK(s <= uint64_t(size * nmsgs));
    const uint64_t r = dev.get_counter(weft::counter_t::bytes_split_read) - r0;
    printf("rank 1: WEFT_SHM_SPLIT=%s%s: %llu bytes read from rank 0 by this rank\n",
           split_env ? split_env : "(unset)", unread ? " (reads refused)" : "",
           static_cast<unsigned long long>(r));
    if (mode == "cma") CHECK_EQ(r, split && !unread ? uint64_t(size / 2 * nmsgs) : uint64_t(0));
    if (mode == "pipeline" || !split || unread) CHECK_EQ(r, uint64_t(0));
    CHECK(r <= uint64_t(size / 2 * nmsgs));
  }
  weft::barrier();
  weft::free_comp(&sync);
  return finish("mechanism");
}

// peers_progress: a device allocated with it moves its puts by the measured choice over
// shared memory (both mechanisms get used while the chooser explores), unless WEFT_SHM_RMA
// is set; the default device keeps cross-memory attach. Rank 0 puts 48 regions of 1 MiB,
// one at a time, on each device; rank 1 checks each one's bytes when its notification comes
// and answers, so that the next may overwrite it.
namespace {

void put_rounds(weft::device_t dev, char* src, char* dst, size_t size, weft::rmr_t peer,
                weft::rcomp_t rc, weft::comp_t rcq, size_t rounds, size_t seed) {
  using namespace mp;
  const int me = weft::get_rank_me();
  weft::comp_t sync = weft::alloc_sync();
  for (size_t r = 0; r < rounds; ++r) {
    weft::status_t st;
    char ack = 0;
    if (me == 0) {
      fill(src, size, seed + r);
      st = post_until([&] {
        return weft::post_put_x(1, src, size, sync, 0, peer).remote_comp(rc).tag(7).device(dev)();
      });
      if (!st.error.is_done()) wait_sync(sync, &st, dev);
      CHECK(st.error.is_done());
      st = post_until([&] { return weft::post_recv(1, &ack, 1, 8, sync); });
      if (!st.error.is_done()) wait_sync(sync, &st);
      CHECK(st.error.is_done());
    } else {
      st = wait_cq(rcq, dev);
      CHECK(st.error.is_done());
      CHECK_EQ(st.size, size);
      CHECK_EQ(verify(dst, size, seed + r), SIZE_MAX);
      st = post_until([&] { return weft::post_send(0, &ack, 1, 8, sync); });
      if (!st.error.is_done()) wait_sync(sync, &st);
      CHECK(st.error.is_done());
    }
  }
  weft::free_comp(&sync);
}

}  // namespace

int scenario_peers_progress() {
  using namespace mp;
  const int me = weft::get_rank_me();
  constexpr size_t size = size_t(1) << 20, rounds = 48;
  const char* rma = getenv("WEFT_SHM_RMA");
  const std::string mode = rma && *rma ? rma : "";
  weft::device_t dev = weft::alloc_device_x().peers_progress(true)();
  weft::device_t dflt = weft::get_default_device();
  CHECK(dev.get_attr_peers_progress());
  CHECK(!dflt.get_attr_peers_progress());
  std::vector<char> src(size), dst(size);
  weft::mr_t mr = weft::register_memory(dst.data(), size);
  weft::comp_t rcq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();
  const weft::rmr_t peer = swap_rmr(1 - me, 1 - me, weft::get_rmr(mr));
  auto bytes = [](weft::device_t d, weft::counter_t c) { return d.get_counter(c); };
  const uint64_t p0 = bytes(dev, weft::counter_t::bytes_pipelined);
  const uint64_t c0 = bytes(dev, weft::counter_t::bytes_cross_memory);
  put_rounds(dev, src.data(), dst.data(), size, peer, rc, rcq, rounds, 100);
  const uint64_t q0 = bytes(dflt, weft::counter_t::bytes_pipelined);
  put_rounds(dflt, src.data(), dst.data(), size, peer, rc, rcq, rounds, 200);
  if (me == 0) {
    const uint64_t p = bytes(dev, weft::counter_t::bytes_pipelined) - p0;
    const uint64_t c = bytes(dev, weft::counter_t::bytes_cross_memory) - c0;
    const uint64_t q = bytes(dflt, weft::counter_t::bytes_pipelined) - q0;
    printf(
        "rank 0: WEFT_SHM_RMA=%s: peers_progress device %llu bytes pipelined, %llu by "
        "cross-memory attach; default device %llu pipelined\n",
        mode.empty() ? "(unset)" : mode.c_str(), static_cast<unsigned long long>(p),
        static_cast<unsigned long long>(c), static_cast<unsigned long long>(q));
    CHECK_EQ(p + c, uint64_t(size * rounds));
    // Unset: the chooser's first windows (a warm-up and a figure of 8 transfers each in
    // this size class) go by the pipeline; set to cma: none; the default device: none.
    if (mode.empty()) CHECK(p >= 16 * size);
    if (mode == "cma") CHECK_EQ(p, uint64_t(0));
    if (mode.empty() || mode == "cma") CHECK_EQ(q, uint64_t(0));
  }
  weft::barrier();
  weft::deregister_rcomp(rc);
  weft::deregister_memory(&mr);
  weft::free_comp(&rcq);
  weft::free_device(&dev);
  return finish("peers_progress");
}
