// SPDX-License-Identifier: BSD-3-Clause
// Resource microbenchmarks (the LCI paper's Figure 5): completion-queue push/pop pairs,
// matching-engine insert pairs and packet-pool get/put pairs, each thread on one shared
// resource, over 1..N threads. Prints RESULT lines in operations per second.
//   bench_resources [max_threads] [ops_per_thread]
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "comp/comp.hpp"
#include "core/request.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"

using namespace weft;
using namespace weft::impl;

namespace {

template <typename Fn>
double timed(int nthreads, Fn&& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      fn(t);
    });
  while (ready.load() < nthreads) std::this_thread::yield();
  auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& th : ts) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* what, int threads, double ops, double s) {
  printf("RESULT resource=%s threads=%d value=%.6g unit=Mops/s\n", what, threads, ops / s / 1e6);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int maxt = argc > 1 ? atoi(argv[1]) : int(std::thread::hardware_concurrency());
  long ops = argc > 2 ? atol(argv[2]) : 1000000;
  for (int nt = 1; nt <= maxt; nt = nt < 4 ? nt + 1 : nt * 2) {
    {
      // The machine's own ceiling: independent arithmetic per thread, nothing shared.
      double s = timed(nt, [&](int) {
        volatile uint64_t x = 0;
        for (long i = 0; i < ops * 400; ++i) x = x + uint64_t(i) * uint64_t(i);
      });
      report("cpu_only", nt, double(ops) * 400 * nt, s);
    }
    {
      cq_impl cq(65536);
      double s = timed(nt, [&](int) {
        status_t st;
        for (long i = 0; i < ops; ++i) {
          while (!cq.signal(st)) {
          }
          while (!cq.pop(st)) {
          }
        }
      });
      report("cq_push_pop", nt, double(ops) * nt, s);
    }
    {
      matching_engine_impl me(0, 65536, nullptr);
      std::unique_ptr<request[]> reqs(new request[size_t(2 * nt)]);
      double s = timed(nt, [&](int t) {
        request& a = reqs[size_t(2 * t)];
        request& b = reqs[size_t(2 * t + 1)];
        for (long i = 0; i < ops; ++i) {
          const match_key key = me.make_key(t, tag_t(i), matching_policy_t::rank_tag);
          a.key = b.key = key;
          a.policy = b.policy = me.stored_policy(matching_policy_t::rank_tag);
          a.type = entry_type::send;
          b.type = entry_type::recv;
          me.insert(&a);
          me.insert(&b);
        }
      });
      report("match_insert_pair", nt, double(ops) * nt, s);
    }
    {
      packet_pool_impl pool(8192, 4096);
      double s = timed(nt, [&](int) {
        for (long i = 0; i < ops; ++i) {
          void* p = pool.get();
          if (p) pool.put(p);
        }
      });
      report("pool_get_put", nt, double(ops) * nt, s);
    }
  }
  return 0;
}
