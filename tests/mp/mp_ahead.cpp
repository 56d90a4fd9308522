// SPDX-License-Identifier: BSD-3-Clause
// ahead: rendezvous data sent ahead of the clear-to-send over shared memory (run with
// WEFT_SHM_PUT=pipeline, 2 ranks). Rank 0 sends, rank 1 receives; each checks its own
// statuses and counters, rank 1 every byte that arrived:
//   unexpected  8 messages of 100 000 bytes sent before any receive is posted: at most
//               channels - 1 of them go ahead (the rest the classic way), and all arrive
//               whole when rank 1 posts its receives, in reverse order;
//   truncated   a message of 100 000 bytes ahead into a receive of 50 000: the receive
//               ends truncated with the first 50 000 bytes and nothing written past them,
//               the send done;
//   am          an active message of 100 000 bytes ahead, its buffer from the allocator;
//   refused     10 active messages whose allocator fails: each send ends with
//               error_nomem, and each went ahead (a refused one gives its channel back).
// With WEFT_SHM_AHEAD=0 the same, every message the classic way (none ahead).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

namespace {

constexpr size_t kSize = 100000;
bool g_ahead = true;  // WEFT_SHM_AHEAD is not 0

void* failing_allocate(size_t, void*) {
  return nullptr;
}
void failing_deallocate(void*, void*) {}

uint64_t ahead_count() {
  return weft::get_default_device().get_counter(weft::counter_t::sent_ahead);
}

// Rank 0: 8 sends before rank 1 has posted anything; rank 1 posts after the barrier.
void unexpected(int me) {
  using namespace mp;
  constexpr size_t n = 8;
  std::vector<std::vector<char>> bufs(n, std::vector<char>(kSize + 1, 0x5a));
  weft::comp_t sync = weft::alloc_sync_x().threshold(n)();
  const uint64_t a0 = ahead_count();
  if (me == 0) {
    for (size_t k = 0; k < n; ++k) {
      fill(bufs[k].data(), kSize, 100 + k);
      weft::status_t s =
          post_until([&] { return weft::post_send(1, bufs[k].data(), kSize, int(k), sync); });
      CHECK(s.error.is_posted());
    }
    const uint64_t ahead = ahead_count() - a0;
    printf("rank 0: unexpected: %llu of %zu sends went ahead\n",
           static_cast<unsigned long long>(ahead), n);
    if (g_ahead) CHECK(ahead >= 1 && ahead <= 3);  // 4 channels: at most 3 not yet accepted
    if (!g_ahead) CHECK_EQ(ahead, uint64_t(0));
  }
  weft::barrier();  // rank 0's sends are out (and the data ahead in its channels)
  if (me == 1) {
    for (size_t k = n; k-- > 0;) {
      weft::status_t s =
          post_until([&] { return weft::post_recv(0, bufs[k].data(), kSize, int(k), sync); });
      CHECK(s.error.is_posted() || s.error.is_done());
      if (s.error.is_done()) (void)weft::comp_signal(sync, s);
    }
  }
  std::vector<weft::status_t> st(n);
  wait_sync(sync, st.data());
  for (auto& s : st) {
    CHECK(s.error.is_done());
    CHECK_EQ(s.size, kSize);
  }
  if (me == 1)
    for (size_t k = 0; k < n; ++k) {
      CHECK_EQ(verify(bufs[k].data(), kSize, 100 + k), SIZE_MAX);
      CHECK_EQ(bufs[k][kSize], 0x5a);
    }
  weft::free_comp(&sync);
}

void truncated(int me) {
  using namespace mp;
  constexpr size_t keep = 50000;
  std::vector<char> buf(kSize + 16, 0x5a);
  weft::comp_t sync = weft::alloc_sync();
  if (me == 1) {
    weft::status_t r = weft::post_recv(0, buf.data(), keep, 20, sync);
    CHECK(r.error.is_posted());
  }
  weft::barrier();  // the receive is posted: the data ahead is taken at once
  if (me == 0) {
    fill(buf.data(), kSize, 7);
    const uint64_t a0 = ahead_count();
    weft::status_t s = post_until([&] { return weft::post_send(1, buf.data(), kSize, 20, sync); });
    CHECK(s.error.is_posted());
    CHECK_EQ(ahead_count() - a0, uint64_t(g_ahead ? 1 : 0));
  }
  weft::status_t st;
  wait_sync(sync, &st);
  if (me == 0) {
    CHECK(st.error.is_done());
  } else {
    CHECK_EQ(int(st.error.errorcode), int(weft::errorcode_t::error_truncated));
    CHECK_EQ(st.size, keep);
    CHECK_EQ(verify(buf.data(), keep, 7), SIZE_MAX);
    for (size_t i = keep; i < buf.size(); ++i)
      if (buf[i] != 0x5a) {
        CHECK_EQ(i, SIZE_MAX);  // a byte past the receive was written
        break;
      }
  }
  weft::free_comp(&sync);
}

void am(int me, weft::comp_t cq, weft::rcomp_t rcomp) {
  using namespace mp;
  std::vector<char> buf(kSize);
  if (me == 0) {
    fill(buf.data(), kSize, 9);
    weft::comp_t sync = weft::alloc_sync();
    const uint64_t a0 = ahead_count();
    weft::status_t s =
        post_until([&] { return weft::post_am_x(1, buf.data(), kSize, sync, rcomp).tag(3)(); });
    CHECK(s.error.is_posted());
    CHECK_EQ(ahead_count() - a0, uint64_t(g_ahead ? 1 : 0));
    weft::status_t st;
    wait_sync(sync, &st);
    CHECK(st.error.is_done());
    weft::free_comp(&sync);
  } else {
    weft::status_t r = wait_cq(cq);
    CHECK(r.error.is_done());
    CHECK_EQ(r.size, kSize);
    CHECK_EQ(r.tag, weft::tag_t(3));
    CHECK_EQ(verify(r.buf, kSize, 9), SIZE_MAX);
    std::free(r.buf);
  }
  weft::barrier();
}

void refused(int me, weft::rcomp_t rcomp) {
  using namespace mp;
  constexpr int n = 10;
  if (me == 0) {
    std::vector<char> buf(kSize, 1);
    weft::comp_t sync = weft::alloc_sync();
    const uint64_t a0 = ahead_count();
    for (int i = 0; i < n; ++i) {
      weft::status_t s =
          post_until([&] { return weft::post_am_x(1, buf.data(), kSize, sync, rcomp)(); });
      CHECK(s.error.is_posted());
      weft::status_t st;
      wait_sync(sync, &st);
      CHECK_EQ(int(st.error.errorcode), int(weft::errorcode_t::error_nomem));
    }
    const uint64_t ahead = ahead_count() - a0;
    printf("rank 0: refused: %llu of %d went ahead\n", static_cast<unsigned long long>(ahead), n);
    CHECK_EQ(ahead, uint64_t(g_ahead ? n : 0));  // every refusal gave the channel back
    weft::free_comp(&sync);
  }
  weft::barrier();
}

}  // namespace

int scenario_ahead() {
  using namespace mp;
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("ahead needs 2 ranks");
  const char* env = getenv("WEFT_SHM_AHEAD");
  g_ahead = !(env && std::string(env) == "0");
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rcomp = weft::register_rcomp(cq);
  weft::comp_t nocq = weft::alloc_cq();
  weft::allocator_t failing{failing_allocate, failing_deallocate, nullptr};
  weft::rcomp_t norcomp = weft::register_rcomp_x(nocq).allocator(failing)();
  weft::barrier();
  unexpected(me);
  truncated(me);
  am(me, cq, rcomp);
  refused(me, norcomp);
  weft::free_comp(&nocq);
  weft::free_comp(&cq);
  return finish("ahead");
}

// Rank 1 dies with data of rank 0 sent ahead to it and not yet received: rank 0's sends
// fail naming it, and the channels they held serve rank 2 (data ahead again).
int scenario_ahead_to_dead() {
  using namespace mp;
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 3) die("ahead_to_dead needs 3 ranks");
  constexpr size_t n = 3;
  std::vector<std::vector<char>> bufs(n, std::vector<char>(kSize, 1));
  weft::comp_t sync = weft::alloc_sync_x().threshold(n)();
  weft::barrier();
  if (me == 0) {
    const uint64_t a0 = ahead_count();
    for (size_t k = 0; k < n; ++k) {
      weft::status_t s =
          post_until([&] { return weft::post_send(1, bufs[k].data(), kSize, int(k), sync); });
      CHECK(s.error.is_posted());
    }
    CHECK_EQ(ahead_count() - a0, uint64_t(n));  // 4 channels: 3 may wait for a receive
  }
  weft::barrier();  // rank 0's data is ahead; rank 1 never receives it
  if (me == 1) raise(SIGKILL);
  std::vector<char> out(kSize), in(kSize, 0);
  char ready = 0;
  if (me == 0) {
    std::vector<weft::status_t> st(n);
    wait_sync(sync, st.data());
    for (auto& s : st) {
      CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
      CHECK_EQ(s.rank, 1);
    }
    // Rank 2 has posted its receive when its word arrives.
    weft::comp_t r = weft::alloc_sync();
    weft::status_t rs = post_until([&] { return weft::post_recv(2, &ready, 1, 50, r); });
    if (!rs.error.is_done()) wait_sync(r, nullptr);
    fill(out.data(), kSize, 11);
    const uint64_t a0 = ahead_count();
    weft::comp_t s2 = weft::alloc_sync();
    weft::status_t s = post_until([&] { return weft::post_send(2, out.data(), kSize, 51, s2); });
    CHECK(s.error.is_posted());
    CHECK_EQ(ahead_count() - a0, uint64_t(1));  // the dead peer's channels were given back
    weft::status_t st2;
    wait_sync(s2, &st2);
    CHECK(st2.error.is_done());
    weft::free_comp(&s2);
    weft::free_comp(&r);
  } else if (me == 2) {
    weft::comp_t r = weft::alloc_sync();
    weft::status_t rs = weft::post_recv(0, in.data(), kSize, 51, r);
    CHECK(rs.error.is_posted());
    weft::comp_t w = weft::alloc_sync();
    weft::status_t ws = post_until([&] { return weft::post_send(0, &ready, 1, 50, w); });
    if (!ws.error.is_done()) wait_sync(w, nullptr);
    weft::status_t st;
    wait_sync(r, &st);
    CHECK(st.error.is_done());
    CHECK_EQ(verify(in.data(), kSize, 11), SIZE_MAX);
    weft::free_comp(&w);
    weft::free_comp(&r);
  }
  weft::free_comp(&sync);
  finish_and_exit("ahead_to_dead");  // the dead rank cannot join a barrier or finalize
}

// pieces: a pipelined transfer alone in flight goes in quarters (run with
// WEFT_SHM_PUT=pipeline and WEFT_TEST_PIPELINE_DELAY=20000, 2 ranks). The target waits the
// delay before copying each piece, so one 64 KiB message alone takes at least four delays
// (one, in a single slot); rank 1 checks the time and every byte.
int scenario_pieces() {
  using namespace mp;
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("pieces needs 2 ranks");
  const char* delay_env = getenv("WEFT_TEST_PIPELINE_DELAY");
  const double delay = delay_env ? atof(delay_env) * 1e-6 : 0;
  if (delay <= 0) die("pieces needs WEFT_TEST_PIPELINE_DELAY");
  constexpr size_t size = 64 << 10;
  std::vector<char> buf(size, 0);
  weft::comp_t sync = weft::alloc_sync();
  if (me == 1) CHECK(weft::post_recv(0, buf.data(), size, 60, sync).error.is_posted());
  weft::barrier();
  // Rank 0 sends once rank 1's clock runs: a rank still in the barrier when the message
  // came would take it whole inside the barrier, before its clock started.
  const auto t0 = std::chrono::steady_clock::now();
  char go = 1;
  weft::comp_t g = weft::alloc_sync();
  weft::status_t gs = post_until([&] {
    return me == 1 ? weft::post_send(0, &go, 1, 61, g) : weft::post_recv(1, &go, 1, 61, g);
  });
  if (!gs.error.is_done()) wait_sync(g, nullptr);
  weft::free_comp(&g);
  if (me == 0) {
    fill(buf.data(), size, 13);
    weft::status_t s = post_until([&] { return weft::post_send(1, buf.data(), size, 60, sync); });
    CHECK(s.error.is_posted());
  }
  weft::status_t st;
  wait_sync(sync, &st);
  CHECK(st.error.is_done());
  CHECK_EQ(st.size, size);
  if (me == 1) {
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("rank 1: pieces: 64 KiB alone in %.1f ms (%.1f ms a piece)\n", took * 1e3, delay * 1e3);
    CHECK(took >= 4 * delay);  // four pieces, each after the delay
    CHECK_EQ(verify(buf.data(), size, 13), SIZE_MAX);
  }
  weft::barrier();
  weft::free_comp(&sync);
  return finish("pieces");
}
