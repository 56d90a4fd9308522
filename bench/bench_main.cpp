// SPDX-License-Identifier: BSD-3-Clause
// One benchmark program, built once per library (Weft, MPICH, Open MPI) from the same
// workload code. Rank 0 prints one RESULT line per figure.
//   bench <lat|rate|bw> [--mode am|sr] [--threads T] [--resources dedicated|shared|shared_cq]
//         [--iters N] [--sizes a,b,c] [--am-buffer malloc|packet|in_place] [--window W]
//         [--buffers window|one]
// Two ranks: lane t of rank 0 talks to lane t of rank 1. One rank: each lane talks to itself.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(BENCH_MPI)
#include "lane_mpi.hpp"
using world_t = bench::mpi_world;
using lane_t = bench::mpi_lane;
#if defined(BENCH_MPICH)
static const char* system_name = "mpich";
#else
static const char* system_name = "openmpi";
#endif
#else
#include "lane_weft.hpp"
using world_t = bench::weft_world;
using lane_t = bench::weft_lane;
static const char* system_name = "weft";
#endif

namespace {

using clk = std::chrono::steady_clock;

struct options {
  std::string workload = "rate", mode = "am";
  int threads = 1;
  bench::resources res = bench::resources::dedicated;
  long iters = 100000;
  std::vector<size_t> sizes;
  // Weft only: where arriving active messages land (lanes.hpp).
  bench::delivery am_delivery = bench::delivery::malloc_buf;
  // bw: transfers in flight per round; 0 keeps at most 16 MiB in flight (16 up to 1 MiB).
  size_t window = 0;
  // Weft only: a lane with nothing to do sleeps in progress_x().block_us(block_us) instead
  // of polling (lat --block-us N: the wake-up latency of blocking progress).
  uint32_t block_us = 0;
  // bw: every transfer in flight uses the same buffer pair (--buffers one), as osu_bw and
  // ucx_perftest do, instead of one pair per transfer (the default, --buffers window).
  bool one_buffer = false;
};

size_t bw_window(const options& o, size_t size) {
  if (o.window) return o.window;
  return std::max<size_t>(1, std::min<size_t>(16, (size_t(16) << 20) / std::max<size_t>(size, 1)));
}

// ---- workloads: identical for every library ----------------------------------------------

// Ping-pong; returns seconds per one-way message.
template <typename Lane>
double latency(Lane& l, bool initiator, bool loopback, bool am, long iters) {
  char buf[8] = {0};
  char rbuf[8];
  auto once = [&](bool first) {
    if (am) {
      if (first) l.am_send(buf, 8);
      l.am_wait();
      if (!first && !loopback) l.am_send(buf, 8);
    } else {
      l.recv(rbuf, 8, 0);
      if (first) l.send(buf, 8, 0);
      l.wait_all();
      if (!first && !loopback) {
        l.send(buf, 8, 0);
        l.wait_all();
      }
    }
  };
  for (long i = 0; i < iters / 10; ++i) once(initiator || loopback);
  auto t0 = clk::now();
  for (long i = 0; i < iters; ++i) once(initiator || loopback);
  double s = std::chrono::duration<double>(clk::now() - t0).count();
  return loopback ? s / double(iters) : s / double(iters) / 2;
}

// Windows of 64 eight-byte messages, each closed by an acknowledgment (none in loopback,
// where the lane consumes its own window). Returns messages sent.
template <typename Lane>
long rate(Lane& l, bool initiator, bool loopback, bool am, long iters) {
  const int window = 64;
  char buf[8] = {0};
  std::vector<char> rbufs(window * 8);
  const long rounds = iters / window;
  for (long r = 0; r < rounds; ++r) {
    if (am) {
      if (initiator || loopback)
        for (int w = 0; w < window; ++w) l.am_send(buf, 8);
      if (!initiator || loopback)
        for (int w = 0; w < window; ++w) l.am_wait();
      if (!loopback) {
        if (initiator)
          l.am_wait();
        else
          l.am_send(buf, 8);
      }
    } else {
      if (!initiator || loopback)
        for (int w = 0; w < window; ++w) l.recv(&rbufs[size_t(w) * 8], 8, 0);
      if (initiator || loopback)
        for (int w = 0; w < window; ++w) l.send(buf, 8, 0);
      if (!loopback) {
        if (initiator)
          l.recv(rbufs.data(), 8, bench::ack_tag);
        else {
          l.wait_all();
          l.send(buf, 8, bench::ack_tag);
        }
      }
      l.wait_all();
    }
  }
  return rounds * window;
}

// Windowed send/receive of `size` bytes, `window` at a time, with the same buffers every
// time: transfer w of a window at offset w * stride (0: all in one buffer). Returns bytes
// moved.
template <typename Lane>
double bandwidth(Lane& l, bool initiator, bool loopback, size_t size, size_t window, size_t stride,
                 std::vector<char>& sbuf, std::vector<char>& rbuf, long reps) {
  char ack[8] = {0};
  for (long r = 0; r < reps; ++r) {
    if (!initiator || loopback)
      for (size_t w = 0; w < window; ++w) l.recv(rbuf.data() + w * stride, size, 1);
    if (initiator || loopback)
      for (size_t w = 0; w < window; ++w) l.send(sbuf.data() + w * stride, size, 1);
    if (!loopback) {
      if (initiator)
        l.recv(ack, 8, bench::ack_tag);
      else {
        l.wait_all();
        l.send(ack, 8, bench::ack_tag);
      }
    }
    l.wait_all();
  }
  return double(size) * double(window) * double(reps);
}

// " key=first" when at least 95% of `total` is `part`, " key=second" when at most 5%, else
// " key=mixed:P%first"; "" when nothing was counted (MPI, eager sizes).
std::string share_field(const char* key, uint64_t part, uint64_t total, const char* first,
                        const char* second) {
  if (total == 0) return "";
  const int share = int(100 * double(part) / double(total) + 0.5);
  const std::string k = std::string(" ") + key + "=";
  if (share >= 95) return k + first;
  if (share <= 5) return k + second;
  return k + "mixed:" + std::to_string(share) + "%" + first;
}

// Which mechanism moved the sender's large transfers (pipeline or cma), from its counters
// before and after a run (Weft over shared memory).
std::string mechanism_field(std::pair<uint64_t, uint64_t> before,
                            std::pair<uint64_t, uint64_t> after) {
  const uint64_t p = after.first - before.first, c = after.second - before.second;
  return share_field("mechanism", p, p + c, "pipeline", "cma");
}

options parse(int argc, char** argv) {
  options o;
  if (argc > 1) o.workload = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--mode")
      o.mode = next();
    else if (a == "--threads")
      o.threads = atoi(next().c_str());
    else if (a == "--am-buffer") {
      std::string d = next();
      o.am_delivery = d == "packet"     ? bench::delivery::packet
                      : d == "in_place" ? bench::delivery::in_place
                                        : bench::delivery::malloc_buf;
    } else if (a == "--window")
      o.window = size_t(atol(next().c_str()));
    else if (a == "--buffers") {
      const std::string b = next();
      if (b != "one" && b != "window") {
        fprintf(stderr, "bench: --buffers %s: expected one or window\n", b.c_str());
        exit(2);
      }
      o.one_buffer = b == "one";
    } else if (a == "--block-us")
      o.block_us = uint32_t(atol(next().c_str()));
    else if (a == "--iters")
      o.iters = atol(next().c_str());
    else if (a == "--resources") {
      std::string r = next();
      o.res = r == "shared"      ? bench::resources::shared
              : r == "shared_cq" ? bench::resources::shared_cq
                                 : bench::resources::dedicated;
    } else if (a == "--sizes") {
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t c = s.find(',', p);
        o.sizes.push_back(size_t(atoll(s.substr(p, c - p).c_str())));
        p = c == std::string::npos ? s.size() : c + 1;
      }
    }
  }
  if (o.sizes.empty())
    for (size_t s = 8; s <= (size_t(4) << 20); s *= 4) o.sizes.push_back(s);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  options o = parse(argc, argv);
  world_t w;
  w.init(o.threads, o.res, o.am_delivery);
  w.block_us = o.block_us;
  const bool loopback = w.n == 1;
  const bool initiator = w.me == 0;
  const int peer = loopback ? w.me : 1 - w.me;
  const bool am = o.mode == "am";
  bench::g_oversubscribed =
      unsigned(o.threads * std::min(w.n, 2)) > std::thread::hardware_concurrency();
  if (w.me > 1) {  // only two ranks take part
    w.barrier();
    w.fina();
    return 0;
  }
  const char* mode_name = loopback ? "loopback" : o.threads > 1 ? "thread" : "process";
  auto report = [&](const char* workload, size_t size, double value, const char* unit,
                    const std::string& extra = "") {
    if (w.me != 0) return;
    printf(
        "RESULT system=%s api=%s mode=%s threads=%d resources=%s workload=%s size=%zu value=%.6g "
        "unit=%s%s\n",
        system_name, am ? bench::delivery_api(o.am_delivery) : "sr", mode_name, o.threads,
        bench::resources_name(o.res), workload, size, value, unit, extra.c_str());
    fflush(stdout);
  };

  std::vector<lane_t*> lanes;
  for (int t = 0; t < o.threads; ++t) lanes.push_back(new lane_t(w, t, peer));
  w.barrier();

  auto run_threads = [&](auto&& body) {
    std::vector<std::thread> ts;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    for (int t = 0; t < o.threads; ++t)
      ts.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        body(*lanes[size_t(t)]);
      });
    while (ready.load() < o.threads) std::this_thread::yield();
    w.barrier();
    auto t0 = clk::now();
    go.store(true);
    for (auto& th : ts) th.join();
    double s = std::chrono::duration<double>(clk::now() - t0).count();
    w.barrier();
    return s;
  };

  if (o.workload == "lat") {
    std::atomic<double> sum{0};
    run_threads([&](lane_t& l) {
      double v = latency(l, initiator, loopback, am, o.iters);
      double cur = sum.load();
      while (!sum.compare_exchange_weak(cur, cur + v)) {
      }
    });
    report(o.block_us ? "latency_blocking" : "latency", 8, sum.load() / o.threads * 1e6, "us");
  } else if (o.workload == "rate") {
    // Warm-up, untimed: first touches of buffers and packets, connection set-up.
    run_threads(
        [&](lane_t& l) { rate(l, initiator, loopback, am, std::max<long>(64, o.iters / 10)); });
    std::atomic<long> msgs{0};
    double s =
        run_threads([&](lane_t& l) { msgs.fetch_add(rate(l, initiator, loopback, am, o.iters)); });
    report("rate", 8, double(msgs.load()) / s / 1e6, "Mmsg/s");
  } else if (o.workload == "bw") {
    for (size_t size : o.sizes) {
      const size_t window = bw_window(o, size);
      const size_t stride = o.one_buffer ? 0 : size;
      long reps = std::max<long>(4, long((size_t(1) << 30) / (size * window)) * o.iters / 100000);
      std::vector<std::vector<char>> sb(size_t(o.threads)), rb(size_t(o.threads));
      for (int t = 0; t < o.threads; ++t) {
        sb[size_t(t)].assign(size + stride * (window - 1), 'a');
        rb[size_t(t)].assign(size + stride * (window - 1), 0);
      }
      auto lane_index = [&](lane_t& l) {
        size_t t = 0;
        while (lanes[t] != &l) ++t;
        return t;
      };
      // Warm-up: touch the buffers, set up the protocol, and give a library that measures
      // its mechanisms (Weft over shm) 32 transfers to do it.
      const long warm = std::max<long>(reps / 8, long(32 / window) + 1);
      run_threads([&](lane_t& l) {
        size_t t = lane_index(l);
        bandwidth(l, initiator, loopback, size, window, stride, sb[t], rb[t], warm);
      });
      std::atomic<double> bytes{0};
      const auto before = w.mechanism_bytes();
      const uint64_t streamed_before = w.streamed_bytes();
      const uint64_t split_before = w.split_bytes();
      const auto ahead_before = w.ahead_sends();
      double s = run_threads([&](lane_t& l) {
        size_t t = lane_index(l);
        double b = bandwidth(l, initiator, loopback, size, window, stride, sb[t], rb[t], reps);
        double cur = bytes.load();
        while (!bytes.compare_exchange_weak(cur, cur + b)) {
        }
      });
      // An explicit window gets its own name, and so does one buffer for every transfer, so
      // that their figures are never mixed with the default's.
      const std::string name = o.window       ? "bandwidth_w" + std::to_string(o.window)
                               : o.one_buffer ? "bandwidth_one"
                                              : "bandwidth";
      // The target's counts of streamed bytes and of bytes it read itself (the second halves
      // of split transfers), to rank 0 (who reports) on lane 0.
      uint64_t target[2] = {w.streamed_bytes() - streamed_before, w.split_bytes() - split_before};
      if (!loopback) {
        if (initiator)
          lanes[0]->recv(target, sizeof(target), bench::ack_tag + 1);
        else
          lanes[0]->send(target, sizeof(target), bench::ack_tag + 1);
        lanes[0]->wait_all();
      }
      const auto after = w.mechanism_bytes();
      const auto ahead = w.ahead_sends();
      const uint64_t cma = after.second - before.second;
      report(
          name.c_str(), size, bytes.load() / s / 1e9, "GB/s",
          mechanism_field(before, after) +
              share_field("stores", target[0], after.first - before.first, "streaming", "cached") +
              // A split transfer's target reads its second half (exactly half at these
              // power-of-two sizes): twice that is the share of cma bytes split.
              share_field("split", std::min(2 * target[1], cma), cma, "yes", "no") +
              share_field("ahead", ahead.first - ahead_before.first,
                          ahead.second - ahead_before.second, "yes", "no"));
    }
  } else {
    if (w.me == 0) fprintf(stderr, "unknown workload %s (lat, rate, bw)\n", o.workload.c_str());
  }
  for (auto* l : lanes) delete l;
  w.fina();
  return 0;
}
