// SPDX-License-Identifier: BSD-3-Clause
// Puts with a remote notification, two ranks: ping-pong latency (each side waits for the
// other's notification, then puts back) and rate (windows of 64 notified puts, each window
// acknowledged by one notified put back). Rank 0 prints one RESULT line per figure; run it
// under each backend and mechanism (WEFT_BACKEND, WEFT_OFI_CQ_DATA) to compare them.
// --alloc: the target windows come from alloc_memory (over shared memory, a put into one is
// a memcpy through the initiator's mapping) instead of a registered vector.
// --am: active messages of the same sizes through the same loops instead (into the same
// queue, each received buffer freed): what a put costs beyond a message, read like for like.
//   bench_put_notify [--iters N] [--sizes a,b,c] [--alloc] [--am]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <weft/weft.hpp>

namespace {

using clk = std::chrono::steady_clock;

struct pair_state {
  int me, peer;
  weft::comp_t rcq, lcq;
  weft::rcomp_t rcomp;
  weft::mr_t mr;
  weft::rmr_t theirs;
  std::vector<char> window, src;
  bool alloc, am;
  long local_pending = 0;

  pair_state(size_t bytes, bool alloc_, bool am_)
      : window(alloc_ ? 0 : bytes), src(bytes, 1), alloc(alloc_), am(am_) {
    me = weft::get_rank_me();
    peer = 1 - me;
    rcq = weft::alloc_cq_x().depth(4096)();
    lcq = weft::alloc_cq_x().depth(4096)();
    rcomp = weft::register_rcomp(rcq);
    mr = alloc ? weft::alloc_memory(bytes) : weft::register_memory(window.data(), window.size());
    weft::rmr_t mine = weft::get_rmr(mr);
    weft::comp_t s = weft::alloc_sync();
    weft::comp_t r = weft::alloc_sync();
    // A post that returns done at once signals nothing.
    auto posted = [](auto post) {
      for (;;) {
        weft::status_t st = post();
        if (!st.error.is_retry()) return st.error.is_posted();
        weft::progress();
      }
    };
    bool wait_r = posted([&] { return weft::post_recv(peer, &theirs, sizeof(theirs), 1, r); });
    bool wait_s = posted([&] { return weft::post_send(peer, &mine, sizeof(mine), 1, s); });
    while ((wait_r && !weft::sync_test(r, nullptr)) || (wait_s && !weft::sync_test(s, nullptr)))
      weft::progress();
    weft::free_comp(&s);
    weft::free_comp(&r);
    weft::barrier();
  }
  ~pair_state() {
    drain_local();
    weft::barrier();
    alloc ? weft::free_memory(&mr) : weft::deregister_memory(&mr);
    weft::deregister_rcomp(rcomp);
    weft::free_comp(&rcq);
    weft::free_comp(&lcq);
  }
  void put(size_t size, weft::tag_t tag) {
    for (;;) {
      weft::status_t s = am ? weft::post_am_x(peer, src.data(), size, lcq, rcomp).tag(tag)()
                            : weft::post_put_x(peer, src.data(), size, lcq, 0, theirs)
                                  .remote_comp(rcomp)
                                  .tag(tag)();
      if (s.error.is_posted()) ++local_pending;
      if (!s.error.is_retry()) return;
      weft::progress();
    }
  }
  void wait_notification() {
    for (;;) {
      weft::status_t s = weft::cq_pop(rcq);
      if (s.error.is_done()) {
        if (am) std::free(s.buf);  // an active message's buffer is the program's
        return;
      }
      reap_local();
      weft::progress();
    }
  }
  void reap_local() {
    while (local_pending > 0 && weft::cq_pop(lcq).error.is_done()) --local_pending;
  }
  void drain_local() {
    while (local_pending > 0) {
      reap_local();
      weft::progress();
    }
  }
};

double latency_us(pair_state& p, size_t size, long iters) {
  auto once = [&] {
    if (p.me == 0) {
      p.put(size, 1);
      p.wait_notification();
    } else {
      p.wait_notification();
      p.put(size, 1);
    }
  };
  for (long i = 0; i < iters / 10; ++i) once();
  weft::barrier();
  auto t0 = clk::now();
  for (long i = 0; i < iters; ++i) once();
  return std::chrono::duration<double>(clk::now() - t0).count() / double(iters) / 2 * 1e6;
}

double rate_mps(pair_state& p, size_t size, long iters) {
  const long window = 64, rounds = std::max(1L, iters / window);
  weft::barrier();
  auto t0 = clk::now();
  for (long r = 0; r < rounds; ++r) {
    if (p.me == 0) {
      for (long w = 0; w < window; ++w) p.put(size, 2);
      p.wait_notification();
    } else {
      for (long w = 0; w < window; ++w) p.wait_notification();
      p.put(8, 3);
    }
  }
  p.drain_local();
  return double(rounds * window) / std::chrono::duration<double>(clk::now() - t0).count() / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  long iters = 20000;
  std::vector<size_t> sizes = {8, 4096, 65536};
  bool alloc = false, am = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) {
      iters = std::atol(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (char* t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ","))
        sizes.push_back(size_t(std::atol(t)));
    } else if (a == "--alloc") {
      alloc = true;
    } else if (a == "--am") {
      am = true;
    } else {
      std::fprintf(stderr, "bench_put_notify: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  weft::g_runtime_init();
  if (weft::get_rank_n() != 2) {
    if (weft::get_rank_me() == 0) std::fprintf(stderr, "bench_put_notify: needs 2 ranks\n");
    weft::g_runtime_fina();
    return 2;
  }
  size_t largest = 8;
  for (size_t s : sizes) largest = std::max(largest, s);
  {
    pair_state p(largest, alloc, am);
    for (size_t s : sizes) {
      const long n = s > 16384 ? iters / 10 : iters;
      const double lat = latency_us(p, s, n);
      const double rate = rate_mps(p, s, n);
      if (p.me == 0) {
        // The benchmarks' one RESULT format (bench/peers.py reads it).
        const char* fmt =
            "RESULT system=weft api=%s mode=process threads=1 resources=dedicated "
            "workload=%s size=%zu value=%.6g unit=%s memory=%s\n";
        const char* mem = alloc ? "alloc_memory" : "registered";
        const char* api = am ? "am_notify" : "put_notify";
        std::printf(fmt, api, "latency", s, lat, "us", mem);
        std::printf(fmt, api, "rate", s, rate, "Mmsg/s", mem);
        std::fflush(stdout);
      }
    }
  }
  weft::g_runtime_fina();
  return 0;
}
