// SPDX-License-Identifier: BSD-3-Clause
// Lifetimes: resources of a second runtime freed with traffic around them, a queue freed
// while a large active message is on its way to it, and devices freed while another thread
// waits in deregister_memory. Run under AddressSanitizer too (label san).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

std::atomic<int> g_unknown_rcomp{0};
void count_unknown(const weft::wire_error_t& e) {
  if (contains(e.what, "unknown remote completion")) g_unknown_rcomp.fetch_add(1);
}

// Waits for one active message on `cq`, progressing `dev`.
weft::status_t wait_am(weft::comp_t cq, weft::device_t dev) {
  return wait_cq(cq, dev);
}

}  // namespace

// Rank 0 frees a queue registered on a second runtime, then rank 1 sends to it: the message
// is reported as one for an unknown remote completion, not delivered into freed memory. The
// second runtime's pool and engine are freed through their own runtime.
int scenario_runtimes_free() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("runtimes_free needs 2 ranks");
  weft::runtime_t rt2 = weft::alloc_runtime();
  weft::set_error_handler(count_unknown, rt2);
  weft::device_t dev2 = weft::get_default_device(rt2);
  weft::packet_pool_t pool2 = weft::alloc_packet_pool_x().runtime(rt2)();
  weft::matching_engine_t eng2 = weft::alloc_matching_engine_x().runtime(rt2)();
  weft::comp_t cq2 = weft::alloc_cq_x().runtime(rt2)();
  weft::rcomp_t rc2 = weft::register_rcomp_x(cq2).runtime(rt2)();
  weft::free_packet_pool(&pool2);
  CHECK(pool2.is_empty());
  weft::free_matching_engine(&eng2);
  CHECK(eng2.is_empty());
  // The global runtime's engines are untouched: a send and receive on its default engine.
  int v = 5, got = 0;
  weft::comp_t sync = weft::alloc_sync_x().threshold(2)();
  weft::status_t r = weft::post_recv(1 - me, &got, sizeof(got), 3, sync);
  weft::status_t s = post_until([&] { return weft::post_send(1 - me, &v, sizeof(v), 3, sync); });
  if (r.error.is_done()) (void)weft::comp_signal(sync, r);
  if (s.error.is_done()) (void)weft::comp_signal(sync, s);
  wait_sync(sync, nullptr);
  CHECK_EQ(got, 5);
  weft::free_comp(&sync);
  if (me == 0) weft::free_comp(&cq2);
  weft::barrier_x().runtime(rt2)();
  if (me == 1) {
    uint64_t x = 9;
    post_until(
        [&] { return weft::post_am_x(0, &x, sizeof(x), weft::comp_t{}, rc2).runtime(rt2)(); },
        dev2);
  } else {
    deadline d(30);
    while (g_unknown_rcomp.load() == 0) {
      weft::progress_x().device(dev2)();
      d.check("the message for the freed queue to be reported");
    }
  }
  weft::barrier_x().runtime(rt2)();
  if (me == 1) weft::free_comp(&cq2);
  weft::free_runtime(&rt2);
  return finish("runtimes_free");
}

// A 1 MiB active message (rendezvous) then a small marker: when the marker arrives the large
// message's data is still on its way, and freeing its queue is refused as pending.
int scenario_am_in_flight() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("am_in_flight needs 2 ranks");
  weft::comp_t big = weft::alloc_cq(), marker = weft::alloc_cq();
  weft::rcomp_t rbig = weft::register_rcomp(big), rmarker = weft::register_rcomp(marker);
  weft::barrier();
  constexpr size_t kSize = 1 << 20;
  if (me == 1) {
    std::vector<char> buf(kSize);
    fill(buf.data(), kSize, 11);
    weft::comp_t sent = weft::alloc_cq();
    weft::status_t s = post_until([&] { return weft::post_am(0, buf.data(), kSize, sent, rbig); });
    uint64_t m = 1;
    post_until([&] { return weft::post_am(0, &m, sizeof(m), weft::comp_t{}, rmarker); });
    if (s.error.is_posted()) CHECK(wait_cq(sent).error.is_done());
    weft::free_comp(&sent);
  } else {
    weft::status_t m = wait_am(marker, {});
    std::free(m.buf);
    std::string e = error_of([&] { weft::free_comp(&big); });
    CHECK(contains(e, "free_comp") && contains(e, "pending"));
    CHECK(!big.is_empty());
    weft::status_t s = wait_am(big, {});
    CHECK(s.error.is_done() && s.size == kSize && verify(s.buf, kSize, 11) == SIZE_MAX);
    std::free(s.buf);
  }
  weft::barrier();
  weft::free_comp(&big);
  weft::free_comp(&marker);
  return finish("am_in_flight");
}

// Rank 1 puts 64 MiB into rank 0's region through the pipelined copy (the owner's progress
// moves it); rank 0 deregisters the region meanwhile, which waits for the put and progresses
// every device, while another thread of rank 0 frees eight devices.
int scenario_dereg_free() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("dereg_free needs 2 ranks");
  constexpr size_t kSize = 64 << 20;
  std::vector<weft::device_t> extra(8);
  for (auto& d : extra) d = weft::alloc_device();
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();
  if (me == 0) {
    std::vector<char> region(kSize);
    weft::mr_t mr = weft::register_memory(region.data(), kSize);
    weft::rmr_t h = weft::get_rmr(mr);
    post_until([&] { return weft::post_am(1, &h, sizeof(h), weft::comp_t{}, rc); });
    weft::status_t started = wait_cq(cq);  // the put's start is ahead of it in the inbox
    std::free(started.buf);
    std::thread freer([&] {
      for (auto& d : extra) {
        weft::free_device(&d);
        usleep(200);
      }
    });
    weft::deregister_memory(&mr);
    freer.join();
    for (auto& d : extra) CHECK(d.is_empty());
  } else {
    weft::status_t hs = wait_cq(cq);
    weft::rmr_t h;
    memcpy(&h, hs.buf, sizeof(h));
    std::free(hs.buf);
    std::vector<char> src(kSize, 7);
    weft::comp_t done = weft::alloc_cq();
    weft::status_t s = post_until([&] { return weft::post_put(0, src.data(), kSize, done, 0, h); });
    uint64_t go = 1;
    post_until([&] { return weft::post_am(0, &go, sizeof(go), weft::comp_t{}, rc); });
    if (s.error.is_posted()) s = wait_cq(done);
    // Either the put finished before the deregistration reached it, or it was refused.
    CHECK(s.error.is_done() || s.error.errorcode == weft::errorcode_t::error_region);
    weft::free_comp(&done);
    for (auto& d : extra) weft::free_device(&d);
  }
  weft::barrier();
  weft::free_comp(&cq);
  return finish("dereg_free");
}
