// SPDX-License-Identifier: BSD-3-Clause
// The task benchmarks of seed 000 (sections 6.2, 6.3) on the dataflow executor
// (engine/exec), over the Weft engine or the MPI engine (built with an MPI: --engine mpi).
//   pingpong: PINGPONG(t, f, c) tasks move fragment f of stream c between ranks round-robin
//     (task on rank (t + c) mod P), SYNC(t) between iterations unless --no-sync; the window
//     (fragments per stream) is raised so each iteration moves --total bytes per stream.
//   overlap: the same without SYNC, each task doing sqrt(M/8) multiply-adds per 8 bytes of
//     its M-byte fragment (GEMM-like intensity), iterations raised so the FLOPs stay
//     constant across fragment sizes; prints the roofline and no-overlap model lines too.
// Every remote flow's latency (ACTIVATE sent -> data arrived) is recorded. Rank 0 prints
// RESULT lines; --check fills and verifies every fragment's bytes.
//   taskbench [--engine weft|mpi] [--mode pingpong|overlap] [--sizes a,b,..|--sweep]
//             [--streams C] [--iters T] [--total BYTES] [--no-sync] [--workers W]
//             [--max-gets G] [--check] [--flops F] [--reps R] [--settle S]
//             [--drive auto|workers|driver]
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/exec/executor.hpp"
#include "engine/exec/open.hpp"

namespace {

using weft::exec::flow_ref;
using weft::exec::task_key;

struct config {
  std::string engine = "weft", mode = "pingpong";
  std::vector<size_t> sizes;
  int streams = 1, iters = 4, workers = 1, reps = 3;
  int settle = 5;  // untimed runs of the first size (one for each later size)
  size_t total = size_t(64) << 20, max_gets = 8;
  weft::exec::options::drive_by drive = weft::exec::options::drive_by::automatic;
  bool sync = true, check = false;
  double flops = 0;  // overlap: total multiply-adds per stream per run (0: chosen)
};

// PINGPONG(t, f, c) and SYNC(t) in one 64-bit key.
task_key pp(uint64_t t, uint64_t f, uint64_t c) {
  return t << 36 | c << 28 | f;
}
task_key sync_key(uint64_t t) {
  return uint64_t(1) << 63 | t;
}
bool is_sync(task_key k) {
  return k >> 63;
}
uint64_t t_of(task_key k) {
  return is_sync(k) ? k & ((uint64_t(1) << 36) - 1) : (k >> 36) & ((uint64_t(1) << 27) - 1);
}
uint64_t c_of(task_key k) {
  return (k >> 28) & 0xff;
}
uint64_t f_of(task_key k) {
  return k & ((uint64_t(1) << 28) - 1);
}

uint64_t stamp(task_key k) {
  return k * 0x9e3779b97f4a7c15ull + 1;
}

class pingpong : public weft::exec::graph {
 public:
  pingpong(int ranks, int iters, size_t frags, int streams, size_t size, bool sync, bool check,
           long fma_per_word)
      : p_(ranks),
        t_(iters),
        f_(frags),
        c_(streams),
        n_(size),
        sync_(sync),
        check_(check),
        fma_(fma_per_word) {}
  std::atomic<long> bad{0};

  void local_tasks(int rank, std::vector<task_key>& out) const override {
    out.clear();
    for (int t = 0; t < t_; ++t)
      for (int c = 0; c < c_; ++c)
        if ((t + c) % p_ == rank)
          for (size_t f = 0; f < f_; ++f) out.push_back(pp(t, f, c));
    if (sync_ && rank == 0)
      for (int t = 0; t + 1 < t_; ++t) out.push_back(sync_key(t));
  }
  int rank_of(task_key k) const override {
    return is_sync(k) ? 0 : int((t_of(k) + c_of(k)) % uint64_t(p_));
  }
  int priority(task_key k) const override { return -int(t_of(k)); }
  void inputs(task_key k, std::vector<flow_ref>& out) const override {
    out.clear();
    const uint64_t t = t_of(k);
    if (is_sync(k)) {
      for (int c = 0; c < c_; ++c)
        for (size_t f = 0; f < f_; ++f) out.push_back({pp(t, f, c), 1});
      return;
    }
    if (t == 0) return;
    out.push_back({pp(t - 1, f_of(k), c_of(k)), 0});
    if (sync_) out.push_back({sync_key(t - 1), 0});
  }
  uint32_t noutputs(task_key k) const override { return is_sync(k) ? 1 : 2; }
  size_t output_size(task_key k, uint32_t o) const override {
    return is_sync(k) || o == 1 ? 0 : n_;
  }
  void successors(task_key k, uint32_t o, std::vector<task_key>& out) const override {
    out.clear();
    const uint64_t t = t_of(k);
    if (is_sync(k)) {
      for (int c = 0; c < c_; ++c)
        for (size_t f = 0; f < f_; ++f) out.push_back(pp(t + 1, f, c));
      return;
    }
    if (o == 0 && t + 1 < uint64_t(t_)) out.push_back(pp(t + 1, f_of(k), c_of(k)));
    if (o == 1 && sync_ && t + 1 < uint64_t(t_)) out.push_back(sync_key(t));
  }
  void run(task_key k, const std::vector<const void*>& in, const std::vector<void*>& out) override {
    if (is_sync(k)) return;
    const uint64_t t = t_of(k);
    auto* dst = static_cast<uint64_t*>(out[0]);
    const size_t words = n_ / 8;
    if (t > 0) verify(static_cast<const uint64_t*>(in[0]), pp(t - 1, f_of(k), c_of(k)));
    if (check_) {
      for (size_t i = 0; i < words; ++i) dst[i] = stamp(k) + i;
    } else {  // the ends only: the transfer still moves every byte
      dst[0] = stamp(k);
      dst[words - 1] = stamp(k) + words - 1;
    }
    if (fma_) compute(in.empty() ? nullptr : static_cast<const double*>(in[0]));
  }

 private:
  void verify(const uint64_t* src, task_key from) {
    const size_t words = n_ / 8;
    if (check_) {
      for (size_t i = 0; i < words; ++i)
        if (src[i] != stamp(from) + i) {
          ++bad;
          return;
        }
    } else if (src[0] != stamp(from) || src[words - 1] != stamp(from) + words - 1) {
      ++bad;
    }
  }
  // fma_ multiply-adds per 8 bytes, on registers fed from the fragment (the work of a tile
  // kernel of the same intensity, not a memory stream).
  void compute(const double* src) {
    const size_t words = n_ / 8;
    double acc[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < words; ++i) {
      const double x = src ? double(i & 7) * 1e-9 : 1e-9;
      for (long j = 0; j < fma_; j += 4) {
        acc[0] = acc[0] * 0.999999 + x;
        acc[1] = acc[1] * 0.999998 + x;
        acc[2] = acc[2] * 0.999997 + x;
        acc[3] = acc[3] * 0.999996 + x;
      }
    }
    sink_ += acc[0] + acc[1] + acc[2] + acc[3];
  }

  int p_, t_;
  size_t f_;
  int c_;
  size_t n_;
  bool sync_, check_;
  long fma_;
  double sink_ = 0;
};

std::vector<size_t> sweep() {  // 8 MiB down to 8 KiB in steps of sqrt(2), whole bytes
  std::vector<size_t> s;
  for (int k = 0; k <= 20; ++k)
    s.push_back(size_t(std::llround(8388608.0 / std::pow(2.0, k / 2.0))) & ~size_t(7));
  return s;
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "taskbench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--engine")
      c.engine = next();
    else if (a == "--mode")
      c.mode = next();
    else if (a == "--sizes") {
      std::string v = next();
      for (char* t = std::strtok(v.data(), ","); t; t = std::strtok(nullptr, ","))
        c.sizes.push_back(size_t(std::atoll(t)));
    } else if (a == "--sweep")
      c.sizes = sweep();
    else if (a == "--streams")
      c.streams = std::atoi(next().c_str());
    else if (a == "--iters")
      c.iters = std::atoi(next().c_str());
    else if (a == "--total")
      c.total = size_t(std::atoll(next().c_str()));
    else if (a == "--workers")
      c.workers = std::atoi(next().c_str());
    else if (a == "--reps")
      c.reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--settle")
      c.settle = std::max(1, std::atoi(next().c_str()));
    else if (a == "--max-gets")
      c.max_gets = size_t(std::atoll(next().c_str()));
    else if (a == "--drive") {
      const std::string v = next();
      if (!weft::exec::drive_from_name(v, c.drive)) {
        std::fprintf(stderr, "taskbench: --drive %s: auto, workers or driver\n", v.c_str());
        std::exit(2);
      }
    } else if (a == "--flops")
      c.flops = std::atof(next().c_str());
    else if (a == "--no-sync")
      c.sync = false;
    else if (a == "--check")
      c.check = true;
    else {
      std::fprintf(stderr, "taskbench: unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (c.sizes.empty()) c.sizes = sweep();
  if (c.mode == "overlap") c.sync = false;
  if (c.mode != "pingpong" && c.mode != "overlap") {
    std::fprintf(stderr, "taskbench: --mode %s: pingpong or overlap\n", c.mode.c_str());
    std::exit(2);
  }
  for (size_t s : c.sizes)
    if (s < 16 || s % 8) {
      std::fprintf(stderr, "taskbench: --sizes %zu: a multiple of 8, at least 16\n", s);
      std::exit(2);
    }
  return c;
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const config c = parse(argc, argv);
  weft_engine_t e = weft::exec::open_engine(c.engine, "taskbench", argc, argv);
  if (!e) return 1;
  const int me = weft_engine_rank_me(e), n = weft_engine_rank_n(e);
  weft::exec::options o;
  o.workers = c.workers;
  o.max_gets = c.max_gets;
  o.drive = c.drive;
  int status = 0;
  const std::string system = c.engine == "weft" ? "weft-engine" : std::string("mpi-engine");
  auto x = std::make_unique<weft::exec::executor>(e, o);
  for (size_t k = 0; k < c.sizes.size(); ++k) {
    const size_t size = c.sizes[k];
    // Each size from an empty pool, as a process of its own would start: the buffers the
    // sizes before it kept for reuse are given back. With --check, every size after the
    // first must find some to give back (the previous size's, all idle after its run).
    const size_t freed = x->trim();
    if (c.check && k > 0 && freed == 0) {
      std::fprintf(stderr, "rank %d: size %zu: the executor gave back no buffers of size %zu\n", me,
                   size, c.sizes[k - 1]);
      status = 1;
    }
    const size_t frags = std::max<size_t>(1, c.total / size);
    long fma = 0;
    int iters = c.iters;
    if (c.mode == "overlap") {  // sqrt(M/8) per word; iterations keep the FLOPs constant
      fma = std::max(4L, long(std::sqrt(double(size) / 8)) & ~3L);
      const double per_iter = double(frags) * double(size / 8) * double(fma) * c.streams;
      const double want = c.flops > 0 ? c.flops : 1e9;
      iters = std::max(2, int(std::lround(want / per_iter)));
    }
    pingpong g(n, iters, frags, c.streams, size, c.sync, c.check, fma);
    // One untimed run fills the executor's buffer pool (first touch and registration);
    // then --reps timed runs, the median time reported, every run's flow latencies kept.
    // The first size gets --settle untimed runs: in a process's first tenth of a second,
    // with engine threads, some runs moved a third of the bandwidth of the runs after them
    // (docs/engine.md).
    weft::exec::run_stats s;
    std::vector<double> times;
    try {
      for (int u = 0; u < (k == 0 ? c.settle : 1); ++u) x->run(g);
      for (int r = 0; r < c.reps; ++r) {
        weft::exec::run_stats one = x->run(g);
        times.push_back(one.seconds);
        s.flow_latency_us.insert(s.flow_latency_us.end(), one.flow_latency_us.begin(),
                                 one.flow_latency_us.end());
      }
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "rank %d: taskbench: %s\n", me, ex.what());
      return 1;
    }
    std::sort(times.begin(), times.end());
    s.seconds = times[times.size() / 2];
    if (g.bad.load()) {
      std::fprintf(stderr, "rank %d: %ld fragments arrived wrong at size %zu\n", me, g.bad.load(),
                   size);
      status = 1;
    }
    // Every PINGPONG after the first iteration's takes its input from the other rank of its
    // stream's pair (the rank changes with t when P > 1): that many fragments crossed.
    const double bytes = double(iters - 1) * double(frags) * c.streams * double(size);
    const double gbs = n > 1 ? bytes / s.seconds / 1e9 : 0;
    const double p50 = percentile(s.flow_latency_us, 0.5),
                 p99 = percentile(s.flow_latency_us, 0.99);
    if (me == 0) {
      std::printf(
          "RESULT system=%s api=task mode=%s threads=%d resources=streams%d workload=%s "
          "size=%zu value=%.4f unit=GB/s\n",
          system.c_str(), c.sync ? "sync" : "nosync", c.workers, c.streams, c.mode.c_str(), size,
          gbs);
      std::printf(
          "RESULT system=%s api=task mode=%s threads=%d resources=streams%d "
          "workload=%s_latency_p50 size=%zu value=%.2f unit=us\n",
          system.c_str(), c.sync ? "sync" : "nosync", c.workers, c.streams, c.mode.c_str(), size,
          p50);
      std::printf(
          "RESULT system=%s api=task mode=%s threads=%d resources=streams%d "
          "workload=%s_latency_p99 size=%zu value=%.2f unit=us\n",
          system.c_str(), c.sync ? "sync" : "nosync", c.workers, c.streams, c.mode.c_str(), size,
          p99);
      if (c.mode == "overlap") {
        const double gflop =
            double(frags) * double(size / 8) * double(fma) * 2 * c.streams * iters / 1e9;
        std::printf(
            "RESULT system=%s api=task mode=nosync threads=%d resources=streams%d "
            "workload=overlap_gflops size=%zu value=%.4f unit=GFLOP/s\n",
            system.c_str(), c.workers, c.streams, size, gflop / s.seconds);
      }
      std::fflush(stdout);
    }
  }
  x.reset();
  if (!weft::exec::close_engine(e, c.engine, "taskbench", me)) status = 1;
  if (status == 0) std::printf("rank %d: taskbench: all %zu sizes checked\n", me, c.sizes.size());
  return status;
}
