// SPDX-License-Identifier: BSD-3-Clause
// Multi-process scenarios, each started by ctest through weftrun (or alone: loopback).
//   mp_test <scenario>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "core/device.hpp"
#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

const size_t kSizes[] = {0, 8, 32, 33, 1000, 8160, 8161, 100000, 1 << 20, 24 << 20};

// Every two-sided row x every completion kind x sizes, to the next rank (itself when alone).
int scenario_matrix() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  any_comp rq(comp_kind::cq);
  weft::rcomp_t rcomp = weft::register_rcomp(rq.comp);
  weft::barrier();  // every rank registered before anyone sends to it
  int ctx_marker = 0;
  for (comp_kind k : {comp_kind::sync, comp_kind::cq, comp_kind::handler}) {
    for (size_t size : kSizes) {
      for (bool am : {false, true}) {
        any_comp local(k), recv(k);
        std::vector<char> sbuf(size + 1), rbuf(size + 16, 0x5a);
        const weft::tag_t tag = weft::tag_t(size * 3 + (am ? 1 : 0));
        fill(sbuf.data(), size, size + me);
        weft::barrier();
        if (!am) {
          weft::status_t rs = post_until([&] {
            return weft::post_recv_x(from, rbuf.data(), size, tag, recv.comp)
                .user_context(&ctx_marker)();
          });
          CHECK(rs.error.is_posted() || rs.error.is_done());
        }
        weft::barrier();  // receives are posted before the sends in this half
        weft::status_t ss = post_until([&] {
          return am ? weft::post_am_x(to, sbuf.data(), size, local.comp, rcomp)
                          .tag(tag)
                          .user_context(&ctx_marker)()
                    : weft::post_send_x(to, sbuf.data(), size, tag, local.comp)
                          .user_context(&ctx_marker)();
        });
        if (ss.error.is_posted()) ss = local.wait();
        CHECK(ss.error.is_done());
        CHECK_EQ(ss.rank, to);
        CHECK_EQ(ss.tag, tag);
        CHECK(ss.buf == sbuf.data());
        CHECK_EQ(ss.size, size);
        CHECK(ss.user_context == &ctx_marker);
        weft::status_t r = am ? rq.wait() : recv.wait();
        CHECK(r.error.is_done());
        CHECK_EQ(r.rank, from);
        CHECK_EQ(r.tag, tag);
        CHECK_EQ(r.size, size);
        if (am) {
          CHECK(r.user_context == nullptr);
          CHECK_EQ(verify(r.buf, size, size + from), SIZE_MAX);
          std::free(r.buf);
        } else {
          CHECK(r.buf == rbuf.data());
          CHECK(r.user_context == &ctx_marker);
          CHECK_EQ(verify(rbuf.data(), size, size + from), SIZE_MAX);
          CHECK_EQ(rbuf[size], 0x5a);  // nothing written past the message
        }
        if (g_failures) {
          fprintf(stderr, "rank %d: failing case: %s, %s, %zu bytes\n", me, am ? "am" : "send/recv",
                  name(k), size);
          return finish("matrix");
        }
      }
    }
  }
  check_split_taken();
  weft::barrier();
  return finish("matrix");
}

// Sends that arrive before their receives, in a different order, mixing protocols.
int scenario_order() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  const int k = 48;
  auto size_of = [](int i) { return size_t(i % 3 == 0 ? 20000 + i : i % 3 == 1 ? 16 : 3000 + i); };
  std::vector<std::vector<char>> sbufs(k), rbufs(k);
  weft::comp_t ssync = weft::alloc_sync_x().threshold(k)();
  weft::comp_t rsync = weft::alloc_sync_x().threshold(k)();
  for (int i = 0; i < k; ++i) {
    sbufs[size_t(i)].resize(size_of(i));
    fill(sbufs[size_t(i)].data(), size_of(i), size_t(i) + 100 * size_t(me));
    rbufs[size_t(i)].assign(size_of(i), 0);
  }
  int done_now = 0;
  for (int i = 0; i < k; ++i) {
    weft::status_t s = post_until([&] {
      return weft::post_send(to, sbufs[size_t(i)].data(), size_of(i), weft::tag_t(i), ssync);
    });
    if (s.error.is_done()) ++done_now;
  }
  // Sends that completed at once do not signal: top the synchronizer up to its threshold.
  for (int i = 0; i < done_now; ++i) (void)weft::comp_signal(ssync, weft::status_t{});
  // The barrier's first message from `from` follows its sends in the same queue, so once
  // the barrier is through, the eager ones have arrived unexpected.
  weft::barrier();
  for (int i = 0; i < 100; ++i) weft::progress();  // alone, the barrier has no rounds
  int recv_done = 0;
  std::vector<weft::status_t> immediate;
  for (int i = k - 1; i >= 0; --i) {
    weft::status_t s = post_until([&] {
      return weft::post_recv(from, rbufs[size_t(i)].data(), size_of(i), weft::tag_t(i), rsync);
    });
    if (s.error.is_done()) {
      ++recv_done;
      immediate.push_back(s);
    }
  }
  for (int i = 0; i < recv_done; ++i) (void)weft::comp_signal(rsync, weft::status_t{});
  std::vector<weft::status_t> st(static_cast<size_t>(k));
  wait_sync(rsync, st.data());
  wait_sync(ssync, nullptr);
  for (auto& s : immediate) {
    CHECK_EQ(s.rank, from);
    CHECK_EQ(s.size, size_of(int(s.tag)));
  }
  for (int i = 0; i < k; ++i)
    CHECK_EQ(verify(rbufs[size_t(i)].data(), size_of(i), size_t(i) + 100 * size_t(from)), SIZE_MAX);
  CHECK(recv_done > 0);  // some eager sends were unexpected and matched at post time
  weft::barrier();
  weft::free_comp(&ssync);
  weft::free_comp(&rsync);
  return finish("order");
}

uint64_t key_mod4(int, weft::tag_t tag, weft::matching_policy_t) {
  return tag % 4;
}

// Each matching policy and a user key function, for eager and rendezvous sizes.
int scenario_policies() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  weft::matching_engine_t user = weft::alloc_matching_engine_x().make_key(key_mod4).nbuckets(64)();
  using P = weft::matching_policy_t;
  for (size_t size : {size_t(24), size_t(50000)}) {
    for (P p : {P::rank_tag, P::rank_only, P::tag_only, P::none}) {
      std::vector<char> sbuf(size), rbuf(size);
      fill(sbuf.data(), size, size_t(p) + size);
      weft::comp_t rs = weft::alloc_sync(), ss = weft::alloc_sync();
      // The receive names a different tag (and, for policies without rank, a wrong rank):
      // only the policy lets it match.
      const weft::tag_t stag = 77, rtag = (p == P::rank_only || p == P::none) ? 12345 : 77;
      const int rrank = (p == P::tag_only || p == P::none) ? (from + 1) % n : from;
      weft::status_t r = weft::post_recv_x(rrank, rbuf.data(), size, rtag, rs).matching_policy(p)();
      weft::barrier();
      weft::status_t s = post_until(
          [&] { return weft::post_send_x(to, sbuf.data(), size, stag, ss).matching_policy(p)(); });
      if (!s.error.is_done()) wait_sync(ss, nullptr);
      weft::status_t got = r;
      if (!r.error.is_done()) wait_sync(rs, &got);
      CHECK(got.error.is_done());
      CHECK_EQ(got.rank, from);
      CHECK_EQ(got.tag, stag);
      CHECK_EQ(verify(rbuf.data(), size, size_t(p) + size), SIZE_MAX);
      weft::barrier();
      weft::free_comp(&rs);
      weft::free_comp(&ss);
    }
    // user key: tag 5 and tag 9 are the same key (mod 4)
    std::vector<char> sbuf(size), rbuf(size);
    fill(sbuf.data(), size, 999);
    weft::comp_t rs = weft::alloc_sync(), ss = weft::alloc_sync();
    weft::status_t r = weft::post_recv_x(from, rbuf.data(), size, 9, rs).matching_engine(user)();
    weft::barrier();
    weft::status_t s = post_until(
        [&] { return weft::post_send_x(to, sbuf.data(), size, 5, ss).matching_engine(user)(); });
    if (!s.error.is_done()) wait_sync(ss, nullptr);
    weft::status_t got = r;
    if (!r.error.is_done()) wait_sync(rs, &got);
    CHECK(got.error.is_done());
    CHECK_EQ(got.tag, 5u);
    CHECK_EQ(verify(rbuf.data(), size, 999), SIZE_MAX);
    weft::barrier();
    weft::free_comp(&rs);
    weft::free_comp(&ss);
  }
  weft::free_matching_engine(&user);
  return finish("policies");
}

// Many threads posting and progressing at once; dedicated devices or one shared device.
int scenario_threads(bool dedicated) {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  const int nthreads = 4, msgs = 2000;
  std::vector<weft::device_t> devs(nthreads);
  std::vector<weft::comp_t> cqs(nthreads);
  std::vector<weft::rcomp_t> rcomps(nthreads);
  for (int t = 0; t < nthreads; ++t) {
    devs[size_t(t)] = dedicated ? weft::alloc_device() : weft::get_default_device();
    cqs[size_t(t)] = weft::alloc_cq();
    rcomps[size_t(t)] = weft::register_rcomp(cqs[size_t(t)]);
  }
  weft::barrier();
  std::atomic<int> errors{0};
  // A thread that has all it waits for keeps progressing its device until every thread of
  // every rank has: an active message it posted is done once handed to the backend, and
  // may still need this device's progress to leave (UCX queues what its transport cannot
  // take at once), while the peer's thread waits for it.
  std::atomic<int> finished{0};
  std::atomic<bool> all_done{false};
  auto worker = [&](int t) {
    weft::device_t dev = devs[size_t(t)];
    weft::comp_t scq = weft::alloc_cq();
    weft::comp_t rsync = weft::alloc_sync_x().threshold(msgs / 4)();
    std::vector<std::vector<char>> rbufs(size_t(msgs / 4));
    // A quarter of the messages are send/recv, the rest active messages; sizes vary.
    for (int i = 0; i < msgs / 4; ++i) {
      size_t sz = size_t(i % 5 == 0 ? 12000 : 8 + i % 200);
      rbufs[size_t(i)].resize(sz);
      weft::status_t s =
          weft::post_recv_x(from, rbufs[size_t(i)].data(), sz, weft::tag_t(t * 100000 + i), rsync)
              .device(dev)();
      if (s.error.is_done()) (void)weft::comp_signal(rsync, s);  // matched a send that came first
    }
    int am_got = 0;
    auto drain_am = [&] {  // check and free every active message that has arrived
      for (weft::status_t a = weft::cq_pop(cqs[size_t(t)]); a.error.is_done();
           a = weft::cq_pop(cqs[size_t(t)])) {
        if (verify(a.buf, a.size, size_t(t * 7) + a.tag) != SIZE_MAX || a.rank != from)
          errors.fetch_add(1);
        std::free(a.buf);
        ++am_got;
      }
    };
    std::vector<std::vector<char>> sbufs(static_cast<size_t>(msgs));
    int sends_pending = 0;
    for (int i = 0; i < msgs; ++i) {
      size_t sz = size_t(i % 5 == 0 ? 12000 : 8 + i % 200);
      if (i >= msgs / 4) sz = size_t(8 + i % 64);
      sbufs[size_t(i)].resize(sz);
      fill(sbufs[size_t(i)].data(), sz, size_t(t * 7 + i));
      weft::status_t s = post_until(
          [&] {
            return i < msgs / 4
                       ? weft::post_send_x(to, sbufs[size_t(i)].data(), sz,
                                           weft::tag_t(t * 100000 + i), scq)
                             .device(dev)()
                       : weft::post_am_x(to, sbufs[size_t(i)].data(), sz, scq, rcomps[size_t(t)])
                             .device(dev)
                             .tag(weft::tag_t(i))();
          },
          dev);
      if (s.error.is_posted()) ++sends_pending;
      drain_am();  // take incoming active messages as we go
    }
    deadline d(40);
    while (am_got < msgs - msgs / 4 || sends_pending > 0 || !weft::sync_test(rsync, nullptr)) {
      weft::progress_x().device(dev)();
      drain_am();
      for (weft::status_t a = weft::cq_pop(scq); a.error.is_done(); a = weft::cq_pop(scq))
        --sends_pending;
      if (std::chrono::steady_clock::now() > d.end) {
        fprintf(stderr, "thread %d: am %d/%d, sends pending %d\n", t, am_got, msgs - msgs / 4,
                sends_pending);
        errors.fetch_add(1000);
        break;
      }
    }
    finished.fetch_add(1);
    while (!all_done.load()) weft::progress_x().device(dev)();
    for (int i = 0; i < msgs / 4; ++i)
      if (verify(rbufs[size_t(i)].data(), rbufs[size_t(i)].size(), size_t(t * 7 + i)) != SIZE_MAX)
        errors.fetch_add(1);
    weft::free_comp(&scq);
    weft::free_comp(&rsync);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t) threads.emplace_back(worker, t);
  // The main thread keeps the default device moving too, so a shared device sees
  // progress from five threads at once; then a barrier, begun once this rank's threads
  // are done, says that every rank's are.
  while (finished.load() < nthreads) weft::progress();
  weft::comp_t everyone = weft::alloc_sync();
  const weft::status_t b = weft::barrier_x().comp(everyone)();
  CHECK(b.error.is_posted() || b.error.is_done());
  while (b.error.is_posted() && !weft::sync_test(everyone, nullptr)) weft::progress();
  weft::free_comp(&everyone);
  all_done.store(true);
  for (auto& th : threads) th.join();
  CHECK_EQ(errors.load(), 0);
  check_split_taken();
  weft::barrier();
  for (int t = 0; t < nthreads; ++t) {
    if (dedicated) weft::free_device(&devs[size_t(t)]);
    weft::free_comp(&cqs[size_t(t)]);
  }
  return finish(dedicated ? "threads_dedicated" : "threads_shared");
}

// The last messages before a finalize arrive. Every rank but 0 sends a burst to rank 0 and
// finalizes as soon as its sends have completed locally, with no barrier, while rank 0 keeps
// sending to it (so its connections close with data unread). Rank 0 must receive every byte
// of every burst. Finalizes itself.
int scenario_last_words() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  constexpr int kBurst = 300;
  constexpr size_t kSize = 2000;
  constexpr int kChatter = 4000;
  weft::comp_t cq = weft::alloc_cq_x().depth(8192)();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();
  if (me != 0) {
    std::vector<std::vector<char>> bufs(kBurst, std::vector<char>(kSize));
    weft::comp_t sent = weft::alloc_cq_x().depth(kBurst)();
    int pending = 0;
    for (int i = 0; i < kBurst; ++i) {
      fill(bufs[size_t(i)].data(), kSize, size_t(me * 1000 + i));
      weft::status_t s = post_until([&] {
        return weft::post_am_x(0, bufs[size_t(i)].data(), kSize, sent, rc).tag(weft::tag_t(i))();
      });
      CHECK(s.error.is_posted() || s.error.is_done());
      if (s.error.is_posted()) ++pending;
    }
    deadline d(30);
    while (pending > 0) {
      weft::progress();
      for (weft::status_t s = weft::cq_pop(sent); !s.error.is_retry(); s = weft::cq_pop(sent)) {
        CHECK(s.error.is_done());
        --pending;
      }
      for (weft::status_t s = weft::cq_pop(cq); s.error.is_done(); s = weft::cq_pop(cq))
        std::free(s.buf);  // rank 0's chatter
      d.check("the burst's local completions");
    }
    weft::free_comp(&sent);
    weft::g_runtime_fina();  // rank 0's messages still arriving: nobody takes them
    return finish("last_words");
  }
  std::vector<int> got(size_t(n), 0);
  int total = 0;
  std::vector<char> chatter(64, 7);
  std::vector<bool> gone(size_t(n), false);
  std::vector<int> chattered(size_t(n), 0);  // fewer than the peer's queue holds
  deadline d(30);
  while (total < kBurst * (n - 1)) {
    for (int r = 1; r < n; ++r) {
      if (gone[size_t(r)] || chattered[size_t(r)]++ >= kChatter) continue;
      try {  // lost once the peer has gone, and refused once it is known to be gone
        weft::post_am(r, chatter.data(), chatter.size(), weft::comp_t{}, rc);
      } catch (const weft::fatal_error&) {
        gone[size_t(r)] = true;
      }
    }
    weft::progress();
    for (weft::status_t s = weft::cq_pop(cq); s.error.is_done(); s = weft::cq_pop(cq)) {
      CHECK(s.rank > 0 && s.rank < n);
      CHECK_EQ(s.size, kSize);
      if (s.rank > 0 && s.rank < n && s.size == kSize) {
        CHECK_EQ(verify(s.buf, kSize, size_t(s.rank * 1000) + s.tag), SIZE_MAX);
        ++got[size_t(s.rank)];
      }
      std::free(s.buf);
      ++total;
    }
    if (std::chrono::steady_clock::now() > d.end) break;
  }
  for (int r = 1; r < n; ++r) CHECK_EQ(got[size_t(r)], kBurst);
  weft::g_runtime_fina();
  return finish("last_words");
}

int scenario_barrier() {
  const int me = weft::get_rank_me();
  for (int i = 0; i < 50; ++i) weft::barrier();
  weft::comp_t s = weft::alloc_sync();
  for (int i = 0; i < 20; ++i) {
    weft::status_t st = weft::barrier_x().comp(s)();
    CHECK(st.error.is_posted());
    weft::status_t out;
    wait_sync(s, &out);
    CHECK(out.error.is_done());
  }
  // A rank that arrives late holds everyone: no rank may leave before rank 0 entered.
  // CLOCK_MONOTONIC is one clock for every process on the host.
  auto mono = [] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  };
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();  // every rank registered before anyone sends to it
  int64_t entered = 0;
  if (me == 0) {
    usleep(300000);
    entered = mono();
  }
  weft::barrier();
  const int64_t left = mono();
  if (me == 0)
    for (int r = 0; r < weft::get_rank_n(); ++r)
      post_until([&] { return weft::post_am(r, &entered, sizeof(entered), weft::comp_t{}, rc); });
  weft::status_t t = wait_cq(cq);
  CHECK(left >= *static_cast<int64_t*>(t.buf));
  std::free(t.buf);
  weft::barrier();
  weft::free_comp(&cq);
  weft::free_comp(&s);
  return finish("barrier");
}

// Active messages delivered in packets, and sends from a user-filled packet.
int scenario_packets() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp_x(cq).packet_delivery(true)();
  weft::packet_pool_t pool = weft::get_default_packet_pool();
  const size_t before = pool.get_attr_npackets();
  CHECK_EQ(before, weft::get_g_runtime().get_attr_npackets());
  weft::barrier();
  for (int i = 0; i < 100; ++i) {
    void* p = weft::get_upacket();
    CHECK(p != nullptr);
    size_t sz = size_t(1 + i * 37 % 4000);
    fill(p, sz, size_t(i));
    weft::status_t s = post_until([&] {
      return weft::post_am_x(to, p, sz, weft::comp_t{}, rc)
          .buffer_is_packet(true)
          .tag(weft::tag_t(i))();
    });
    CHECK(s.error.is_done());
    weft::status_t r = wait_cq(cq);
    CHECK_EQ(r.rank, from);
    CHECK_EQ(verify(r.buf, r.size, r.tag), SIZE_MAX);
    weft::put_upacket(r.buf);
  }
  weft::barrier();
  weft::free_comp(&cq);
  return finish("packets");
}

// Two threads sending and progressing one shared device: the handler runs on whichever
// thread's progress delivered a message, and each arrives whole, once.
void in_place_threads(int from, int to) {
  constexpr int nthreads = 2, msgs = 500;  // and one rendezvous message each
  std::atomic<int> arrived{0}, wrong{0};
  weft::comp_t h = weft::alloc_handler([&](weft::status_t st) {
    if (!st.error.is_done() || st.rank != from || verify(st.buf, st.size, st.tag) != SIZE_MAX)
      wrong.fetch_add(1);
    arrived.fetch_add(1);
  });
  weft::rcomp_t rc = weft::register_rcomp_x(h).in_place(true)();
  weft::barrier();
  auto worker = [&](int t) {
    weft::comp_t sent = weft::alloc_cq();
    std::vector<char> buf(20000);
    for (int i = 0; i <= msgs; ++i) {
      const size_t sz = i == msgs ? buf.size() : size_t(8 + i % 200);
      const weft::tag_t tag = weft::tag_t(t * 10000 + i);
      fill(buf.data(), sz, tag);
      weft::status_t s =
          post_until([&] { return weft::post_am_x(to, buf.data(), sz, sent, rc).tag(tag)(); });
      if (s.error.is_posted()) s = wait_cq(sent);  // the buffer is refilled next
      if (!s.error.is_done()) wrong.fetch_add(1);
    }
    deadline d;
    while (arrived.load() < nthreads * (msgs + 1)) {
      weft::progress();
      d.check("the threads' lent active messages");
    }
    weft::free_comp(&sent);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& th : threads) th.join();
  CHECK_EQ(arrived.load(), nthreads * (msgs + 1));
  CHECK_EQ(wrong.load(), 0);
  weft::barrier();
  weft::free_comp(&h);
}

// Active messages lent to a handler where they arrived (register_rcomp_x().in_place):
// every size, eager and rendezvous, arrives whole with its tag and source; the rendezvous
// ones land in the allocator's buffers, which Weft releases once the handler returns, and
// the eager ones take none.
int scenario_in_place() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  struct counting {
    std::vector<void*> live;
    int allocated = 0, released = 0;
  } bufs;
  weft::allocator_t alloc{[](size_t size, void* ctx) {
                            auto* c = static_cast<counting*>(ctx);
                            ++c->allocated;
                            c->live.push_back(std::malloc(size ? size : 1));
                            return c->live.back();
                          },
                          [](void* p, void* ctx) {
                            auto* c = static_cast<counting*>(ctx);
                            auto it = std::find(c->live.begin(), c->live.end(), p);
                            if (it != c->live.end()) c->live.erase(it);
                            ++c->released;
                            std::free(p);
                          },
                          &bufs};
  const size_t sizes[] = {0, 8, 100, 1000, 4000, 70000, 300000};
  const int rounds = 5, total = rounds * int(std::size(sizes));
  int got = 0, wrong = 0, lent_from_allocator = 0;
  weft::comp_t h = weft::alloc_handler([&](weft::status_t st) {
    ++got;
    const bool big = st.size >= 70000;  // over every backend's eager limit
    if (!st.error.is_done() || st.rank != from || (st.size && !st.buf) ||
        (st.size && verify(st.buf, st.size, st.tag) != SIZE_MAX) ||
        st.size != sizes[st.tag % std::size(sizes)])
      ++wrong;
    const bool ours = std::find(bufs.live.begin(), bufs.live.end(), st.buf) != bufs.live.end();
    if (ours) ++lent_from_allocator;
    if (ours != big) ++wrong;
  });
  weft::rcomp_t rc = weft::register_rcomp_x(h).in_place(true).allocator(alloc)();
  weft::comp_t sent = weft::alloc_cq();
  weft::barrier();
  std::vector<char> buf(300000);
  for (int i = 0; i < total; ++i) {
    const size_t sz = sizes[size_t(i) % std::size(sizes)];
    fill(buf.data(), sz, size_t(i));
    weft::status_t s = post_until(
        [&] { return weft::post_am_x(to, buf.data(), sz, sent, rc).tag(weft::tag_t(i))(); });
    CHECK(!s.error.is_error());
    if (s.error.is_posted()) {  // the buffer is refilled next: wait for this one to leave
      CHECK(wait_cq(sent).error.is_done());
    }
  }
  deadline d;
  while (got < total) {
    weft::progress();
    d.check("the lent active messages");
  }
  CHECK_EQ(got, total);
  CHECK_EQ(wrong, 0);
  CHECK_EQ(lent_from_allocator, rounds * 2);
  CHECK_EQ(bufs.allocated, rounds * 2);
  CHECK_EQ(bufs.released, bufs.allocated);  // back once each handler returned
  CHECK(bufs.live.empty());
  weft::barrier();
  weft::free_comp(&sent);
  weft::free_comp(&h);
  in_place_threads(from, to);
  return finish("in_place");
}

// Two runtimes alive at once, each with its own resources and traffic.
int scenario_runtimes() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n;
  weft::runtime_t rt2 = weft::alloc_runtime_x().packet_size(4096)();
  CHECK_EQ(rt2.get_attr_packet_size(), 4096u);
  CHECK_EQ(weft::get_g_runtime().get_attr_packet_size(), 8192u);
  weft::comp_t cq1 = weft::alloc_cq(), cq2 = weft::alloc_cq_x().runtime(rt2)();
  weft::rcomp_t r1 = weft::register_rcomp(cq1);
  weft::rcomp_t r2 = weft::register_rcomp_x(cq2).runtime(rt2)();
  weft::barrier();
  weft::barrier_x().runtime(rt2)();
  int a = 1000 + me, b = 2000 + me;
  post_until([&] { return weft::post_am_x(to, &a, sizeof(a), weft::comp_t{}, r1)(); });
  post_until([&] { return weft::post_am_x(to, &b, sizeof(b), weft::comp_t{}, r2).runtime(rt2)(); });
  weft::device_t d2 = weft::get_default_device(rt2);
  weft::status_t s1 = wait_cq(cq1);
  weft::status_t s2 = wait_cq(cq2, d2);
  CHECK_EQ(*static_cast<int*>(s1.buf), 1000 + (me - 1 + n) % n);
  CHECK_EQ(*static_cast<int*>(s2.buf), 2000 + (me - 1 + n) % n);
  std::free(s1.buf);
  std::free(s2.buf);
  weft::barrier_x().runtime(rt2)();
  weft::free_comp(&cq2);
  weft::free_runtime(&rt2);
  CHECK(rt2.is_empty());
  weft::barrier();
  weft::free_comp(&cq1);
  return finish("runtimes");
}

std::atomic<int> g_wire_errors{0};
std::string g_last_wire_error;
void count_wire_error(const weft::wire_error_t& e) {
  g_last_wire_error =
      "rank " + std::to_string(e.rank_me) + " from " + std::to_string(e.peer) + ": " + e.what;
  g_wire_errors.fetch_add(1);
}

// Bad input at the caller, and bad messages from the wire.
int scenario_errors() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  char buf[64] = {};
  weft::comp_t sync = weft::alloc_sync();
  std::string e;

  e = error_of([&] { weft::post_send(n, buf, 8, 0, sync); });
  CHECK(contains(e, "post_send"));
  CHECK(contains(e, ("rank = " + std::to_string(n)).c_str()));
  e = error_of([&] { weft::post_am(-1, buf, 8, sync, 0); });
  CHECK(contains(e, "post_am") && contains(e, "rank = -1"));
  e = error_of([&] { weft::post_send(to, nullptr, 8, 0, sync); });
  CHECK(contains(e, "local_buffer = nullptr"));
  e = error_of([&] { weft::post_recv(to, buf, size_t(1) << 50, 0, sync); });
  CHECK(contains(e, "post_recv") && contains(e, "size = 1125899906842624"));
  e = error_of([&] { weft::post_am(to, buf, 8, sync, 4242); });
  CHECK(contains(e, "remote_comp = 4242") && contains(e, "unknown remote completion"));
  e = error_of(
      [&] { weft::post_comm_x(weft::direction_t::IN, to, buf, 8, sync).remote_comp(0)(); });
  CHECK(contains(e, "Table 1"));
  e = error_of([&] {
    weft::post_send_x(to, buf, 8, 0, sync).matching_policy(weft::matching_policy_t(9))();
  });
  CHECK(contains(e, "matching_policy = 9"));
  e = error_of([&] { weft::post_send_x(to, buf, 60000, 0, sync).buffer_is_packet(true)(); });
  CHECK(contains(e, "packet"));
  e = error_of([&] { weft::alloc_sync_x().threshold(0)(); });
  CHECK(contains(e, "threshold = 0"));

  // A pending receive keeps its completion object alive; cancel releases it.
  weft::comp_t pend = weft::alloc_sync();
  weft::status_t r = weft::post_recv(from, buf, 8, 31337, pend);
  CHECK(r.error.is_posted());
  e = error_of([&] { weft::free_comp(&pend); });
  CHECK(contains(e, "free_comp") && contains(e, "1 operations"));
  CHECK(!pend.is_empty());
  e = error_of([&] {
    weft::barrier();
    weft::g_runtime_fina();
  });
  CHECK(contains(e, "g_runtime_fina") && contains(e, "pending"));
  CHECK(weft::cancel_recv(from, buf, 31337, pend));
  weft::status_t c;
  wait_sync(pend, &c);
  CHECK(c.error.is_cancelled());
  CHECK(!weft::cancel_recv(from, buf, 31337, pend));
  weft::free_comp(&pend);
  CHECK(pend.is_empty());

  // Truncation: eager and rendezvous, reported to the receive with the peer named.
  for (size_t size : {size_t(40), size_t(30000)}) {
    std::vector<char> big(size), small(size / 2 + 8, 0);
    fill(big.data(), size, 5);
    weft::comp_t rs = weft::alloc_sync(), ss = weft::alloc_sync();
    weft::status_t rr = weft::post_recv(from, small.data(), size / 2, 7, rs);
    weft::barrier();
    weft::status_t s = post_until([&] { return weft::post_send(to, big.data(), size, 7, ss); });
    if (!s.error.is_done()) wait_sync(ss, &s);
    CHECK(s.error.is_done());  // the sender does not see the receiver's truncation
    weft::status_t got = rr;
    if (!rr.error.is_done()) wait_sync(rs, &got);
    CHECK_EQ(int(got.error.errorcode), int(weft::errorcode_t::error_truncated));
    CHECK_EQ(got.rank, from);
    CHECK_EQ(got.size, size / 2);
    CHECK_EQ(verify(small.data(), size / 2, 5), SIZE_MAX);
    CHECK_EQ(small[size / 2], 0);
    weft::barrier();
    weft::free_comp(&rs);
    weft::free_comp(&ss);
  }

  // Malformed messages from a peer: each goes to the error handler with both ranks named,
  // is dropped, and traffic after it is undisturbed.
  weft::set_error_handler(count_wire_error);
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();
  auto* dev = weft::get_default_device().p;
  {
    using namespace weft::impl;
    wire_header h{};
    h.version = wire_version;
    h.type = uint8_t(msg_type::eager_am);
    h.target = 999;  // unknown remote completion
    post_until([&] {
      return weft::status_t{dev->net->try_send(to, &h, sizeof(h), buf, 8)
                                ? weft::errorcode_t::done
                                : weft::errorcode_t::retry};
    });
    wire_header v = h;
    v.version = 77;  // another wire version
    post_until([&] {
      return weft::status_t{dev->net->try_send(to, &v, sizeof(v), nullptr, 0)
                                ? weft::errorcode_t::done
                                : weft::errorcode_t::retry};
    });
    char shortmsg[5] = {1, 2, 3, 4, 5};  // shorter than a header
    post_until([&] {
      return weft::status_t{dev->net->try_send(to, shortmsg, 5, nullptr, 0)
                                ? weft::errorcode_t::done
                                : weft::errorcode_t::retry};
    });
    wire_header t = h;
    t.type = uint8_t(msg_type::cts);  // a clear-to-send with a truncated body
    post_until([&] {
      return weft::status_t{dev->net->try_send(to, &t, sizeof(t), buf, 3)
                                ? weft::errorcode_t::done
                                : weft::errorcode_t::retry};
    });
    wire_header u = h;
    u.type = 200;
    post_until([&] {
      return weft::status_t{dev->net->try_send(to, &u, sizeof(u), nullptr, 0)
                                ? weft::errorcode_t::done
                                : weft::errorcode_t::retry};
    });
    cts_body forged{0xdeadbeef00000003ull, 1, 0, 8};  // a forged request handle
    wire_header f = h;
    f.type = uint8_t(msg_type::cts);
    post_until([&] {
      return weft::status_t{dev->net->try_send(to, &f, sizeof(f), &forged, sizeof(forged))
                                ? weft::errorcode_t::done
                                : weft::errorcode_t::retry};
    });
  }
  int good = 4242;
  post_until([&] { return weft::post_am(to, &good, sizeof(good), weft::comp_t{}, rc); });
  weft::status_t ok = wait_cq(cq);
  CHECK_EQ(*static_cast<int*>(ok.buf), 4242);
  std::free(ok.buf);
  deadline d(10);
  while (g_wire_errors.load() < 6) {
    weft::progress();
    d.check("six wire errors");
  }
  CHECK_EQ(g_wire_errors.load(), 6);
  CHECK(contains(g_last_wire_error, ("from " + std::to_string(from)).c_str()));
  weft::barrier();
  weft::free_comp(&cq);
  weft::free_comp(&sync);
  weft::barrier();
  weft::g_runtime_fina();
  // After finalize every call fails with a clear message.
  e = error_of([&] { weft::post_send(0, buf, 8, 0, weft::comp_t{}); });
  CHECK(contains(e, "post_send") && contains(e, "no runtime is active"));
  e = error_of([&] { weft::progress(); });
  CHECK(contains(e, "progress"));
  e = error_of([&] { weft::g_runtime_fina(); });
  CHECK(contains(e, "g_runtime_fina"));
  printf("rank %d: errors: all %d checks passed\n", me, g_checks);
  return g_failures ? 1 : 0;
}

// One transfer above 4 GiB (every system call on the way must loop).
int scenario_big() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const size_t size = (size_t(4) << 30) + 4096 + 17;
  char* buf = static_cast<char*>(malloc(size));
  if (!buf) die("cannot allocate 4 GiB");
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  weft::comp_t sync = weft::alloc_sync_x().threshold(n == 1 ? 2 : 1)();
  if (n == 1) {
    char* rbuf = static_cast<char*>(malloc(size));
    fill(buf, size, 3);
    weft::post_recv(me, rbuf, size, 1, sync);
    weft::post_send(me, buf, size, 1, sync);
    weft::status_t st[2];
    wait_sync(sync, st);
    CHECK_EQ(verify(rbuf, size, 3), SIZE_MAX);
    free(rbuf);
  } else if (me == 0 || me == 1) {
    if (me == 0)
      fill(buf, size, 3);
    else
      memset(buf, 0, size);
    weft::status_t s = post_until([&] {  // a network backend may answer retry at first
      return me == 0 ? weft::post_send(to, buf, size, 1, sync)
                     : weft::post_recv(from, buf, size, 1, sync);
    });
    CHECK(s.error.is_posted());
    weft::status_t st[1];
    wait_sync(sync, st, {});
    CHECK(st[0].error.is_done());
    CHECK_EQ(st[0].size, size);
    if (me == 1) CHECK_EQ(verify(buf, size, 3), SIZE_MAX);
  }
  free(buf);
  weft::barrier();
  weft::free_comp(&sync);
  return finish("big");
}

// Rank 1 dies with traffic in flight; the others see errors naming it and carry on.
int scenario_peer_death() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  if (n < 3) die("peer_death needs 3 ranks");
  weft::barrier();
  std::vector<char> big(1 << 20, 1);
  if (me == 1) {
    usleep(100000);
    raise(SIGKILL);
  }
  weft::comp_t sync = weft::alloc_sync_x().threshold(2)();
  char small[16];
  auto t0 = std::chrono::steady_clock::now();
  weft::post_recv(1, small, sizeof(small), 5, sync);  // never sent
  weft::status_t s =
      weft::post_send(1, big.data(), big.size(), 6, sync);  // rendezvous, never taken
  CHECK(s.error.is_posted());
  weft::status_t st[2];
  wait_sync(sync, st);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& x : st) {
    CHECK_EQ(int(x.error.errorcode), int(weft::errorcode_t::error_peer_dead));
    CHECK_EQ(x.rank, 1);
  }
  // Shared memory and UCX notice at once; libfabric's providers report nothing here, so
  // the ofi backend waits for WEFT_PEER_TIMEOUT of silence.
  const char* timeout = getenv("WEFT_PEER_TIMEOUT");
  CHECK(waited < (timeout ? atof(timeout) : 0.0) + 5.0);
  std::string e = error_of([&] { weft::post_send(1, small, 8, 0, sync); });
  CHECK(contains(e, "rank = 1") && (contains(e, "died") || contains(e, "taken for dead")));
  // Survivors still talk to each other.
  const int other = me == 0 ? 2 : 0;
  std::vector<char> out(50000), in(50000);
  fill(out.data(), out.size(), size_t(me));
  weft::comp_t s2 = weft::alloc_sync_x().threshold(2)();
  weft::status_t a = weft::post_recv(other, in.data(), in.size(), 9, s2);
  weft::status_t b =
      post_until([&] { return weft::post_send(other, out.data(), out.size(), 9, s2); });
  if (a.error.is_done()) (void)weft::comp_signal(s2, a);
  if (b.error.is_done()) (void)weft::comp_signal(s2, b);
  wait_sync(s2, nullptr);
  CHECK_EQ(verify(in.data(), in.size(), size_t(other)), SIZE_MAX);
  weft::free_comp(&s2);
  weft::free_comp(&sync);
  finish_and_exit("peer_death");  // the dead rank cannot join a barrier or finalize
}

// Init, one barrier, finalize: many ranks leave together, and none may take a peer that
// finished for one that died before its last message was delivered.
int scenario_leave() {
  weft::barrier();
  return finish("leave");
}

// Rank 1 hangs until weftrun's timeout or is killed by the test driver.
int scenario_crash() {
  const int me = weft::get_rank_me();
  weft::barrier();
  if (me == 1) {
    usleep(200000);
    raise(SIGSEGV);
  }
  // The others keep progressing until weftrun tears the job down.
  for (;;) weft::progress();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mp_test <scenario>\n");
    return 2;
  }
  std::string s = argv[1];
  std::map<std::string, int (*)()> table = {
      {"matrix", scenario_matrix},
      {"order", scenario_order},
      {"policies", scenario_policies},
      {"threads_dedicated", [] { return scenario_threads(true); }},
      {"threads_shared", [] { return scenario_threads(false); }},
      {"barrier", scenario_barrier},
      {"last_words", scenario_last_words},
      {"packets", scenario_packets},
      {"in_place", scenario_in_place},
      {"runtimes", scenario_runtimes},
      {"errors", scenario_errors},
      {"big", scenario_big},
      {"peer_death", scenario_peer_death},
      {"crash", scenario_crash},
      {"rma", scenario_rma},
      {"rma_alloc", scenario_rma_alloc},
      {"ack_past_held", scenario_ack_past_held},
      {"ack_full_lane", scenario_ack_full_lane},
      {"note_holds_back", scenario_note_holds_back},
      {"cts_full_lane", scenario_cts_full_lane},
      {"rdv_full_lane", scenario_rdv_full_lane},
      {"alloc", scenario_alloc},
      {"alloc_mapped", scenario_alloc_mapped},
      {"rma_errors", scenario_rma_errors},
      {"rma_forged", scenario_rma_forged},
      {"rma_stale", scenario_rma_stale},
      {"rma_farewell", scenario_rma_farewell},
      {"rma_threads", scenario_rma_threads},
      {"rma_notes", scenario_rma_notes},
      {"rma_small", scenario_rma_small},
      {"rma_ack_at_fina", scenario_rma_ack_at_fina},
      {"rma_big", scenario_rma_big},
      {"graph", scenario_graph},
      {"lists", scenario_lists},
      {"cont", scenario_cont},
      {"leave", scenario_leave},
      {"hole", scenario_hole},
      {"foreign", scenario_foreign},
      {"foreign_rmr", scenario_foreign_rmr},
      {"late_device", scenario_late_device},
      {"quiet_peer", scenario_quiet_peer},
      {"expel", scenario_expel},
      {"exit_on_death", scenario_exit_on_death},
      {"idle", scenario_idle},
      {"runtimes_free", scenario_runtimes_free},
      {"am_in_flight", scenario_am_in_flight},
      {"dereg_free", scenario_dereg_free},
      {"rma_to_dead", scenario_rma_to_dead},
      {"drop_flood", scenario_drop_flood},
      {"rts_from_dead", scenario_rts_from_dead},
      {"rts_race_death", scenario_rts_race_death},
      {"send_race_death", scenario_send_race_death},
      {"recv_race_death", scenario_recv_race_death},
      {"first_transfer", scenario_first_transfer},
      {"no_defaults", scenario_no_defaults},
      {"loaded", scenario_loaded},
      {"mechanism", scenario_mechanism},
      {"busy_target", scenario_busy_target},
      {"ahead", scenario_ahead},
      {"ahead_to_dead", scenario_ahead_to_dead},
      {"pieces", scenario_pieces},
      {"peers_progress", scenario_peers_progress},
      {"rma_burst", scenario_rma_burst},
      {"blocking", scenario_blocking},
      {"burst_send", [] { return scenario_burst(false); }},
      {"burst_am", [] { return scenario_burst(true); }}};
  auto it = table.find(s);
  if (it == table.end()) {
    fprintf(stderr, "mp_test: unknown scenario %s\n", s.c_str());
    return 2;
  }
  try {
    weft::g_runtime_init();
    g_rank = weft::get_rank_me();
    int rc = it->second();
    if (s != "errors" && s != "rma_farewell" && s != "last_words" &&
        s != "rma_ack_at_fina") {  // these finalize themselves
      weft::barrier();
      weft::g_runtime_fina();
    }
    report(s.c_str(), rc);
    return rc;
  } catch (const weft::fatal_error& e) {
    fprintf(stderr, "rank %d: unexpected weft::fatal_error: %s\n", rank(), e.what());
    return 4;
  }
}
