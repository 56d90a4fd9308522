// SPDX-License-Identifier: BSD-3-Clause
// One-sided scenarios: every put/get row of Table 1 x completion kind x size class with
// content checks, the errors of bad handles, refusals by the backend itself, and threads
// putting into shared and private regions.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/device.hpp"
#include "mp_common.hpp"
#include "mp_scenarios.hpp"
#include "util/generation.hpp"

using namespace mp;

namespace {

constexpr size_t kGuard = 64;
// 1 and 8: a notified put over shm in its cell line (put_small_msg); 9: the longer form.
const size_t kRmaSizes[] = {0, 1, 8, 9, 1000, 8161, 100000, 1 << 20, 24 << 20};

// Each rank's window, registered (or, with `alloc`, from alloc_memory), and the handle of
// the next rank's window.
struct windows {
  int me, n, to, from;
  bool alloc;
  std::vector<unsigned char> mem;
  weft::mr_t mr;
  weft::rmr_t to_rmr;

  explicit windows(size_t size, bool alloc_ = false)
      : alloc(alloc_), mem(alloc_ ? 0 : size + 2 * kGuard, 0x5a) {
    me = weft::get_rank_me();
    n = weft::get_rank_n();
    to = (me + 1) % n;
    from = (me - 1 + n) % n;
    mr = alloc ? weft::alloc_memory(size) : weft::register_memory(mem.data() + kGuard, size);
    CHECK_EQ(mr.get_attr_size(), size);
    if (alloc)
      memset(mr.get_attr_base(), 0x5a, size);
    else
      CHECK(mr.get_attr_base() == mem.data() + kGuard);
    to_rmr = exchange(weft::get_rmr(mr));
  }
  ~windows() { alloc ? weft::free_memory(&mr) : weft::deregister_memory(&mr); }
  unsigned char* base() { return static_cast<unsigned char*>(mr.get_attr_base()); }

  // Sends `mine` to the previous rank and returns the next rank's handle.
  weft::rmr_t exchange(weft::rmr_t mine) { return swap_rmr(to, from, mine); }
};

bool guards_intact(const unsigned char* p, size_t size) {
  return p[-1] == 0x5a && p[size] == 0x5a;
}

// Rank 0's handle `mine`, sent by rank 0 to every other rank with `tag`: what each gets
// (rank 0 gets its own).
weft::rmr_t from_rank0(weft::rmr_t mine, weft::tag_t tag) {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  weft::rmr_t owners = mine;
  weft::comp_t sync = weft::alloc_sync();
  weft::status_t st;
  for (int r = 1; me == 0 && r < n; ++r)
    if (!post_until([&] {
           return weft::post_send(r, &mine, sizeof(mine), tag, sync);
         }).error.is_done())
      wait_sync(sync, &st);
  if (me != 0 && !post_until([&] {
                    return weft::post_recv(0, &owners, sizeof(owners), tag, sync);
                  }).error.is_done())
    wait_sync(sync, &st);
  weft::free_comp(&sync);
  return owners;
}

}  // namespace

// Every size, both directions, with and without a notification, each completion kind: the
// data, the guards around it and every completion's fields. With `alloc` the windows come
// from alloc_memory (over shared memory: copied through the initiator's mapping).
int run_rma(bool alloc) {
  windows w((24 << 20) + 4096, alloc);
  weft::comp_t rcq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();  // every rank registered before anyone sends to it
  std::vector<unsigned char> local((24 << 20) + 1);
  int case_no = 0;
  for (bool put : {true, false}) {
    for (bool notify : {false, true}) {
      for (comp_kind k : {comp_kind::sync, comp_kind::cq, comp_kind::handler}) {
        for (size_t size : kRmaSizes) {
          ++case_no;
          const size_t disp = 17 + size_t(case_no) * 3;  // unaligned on purpose
          const weft::tag_t tag = weft::tag_t(1000 + case_no);
          any_comp lc(k);
          int marker = 0;
          // Earlier cases wrote around here: reset the bytes on either side of this one.
          w.base()[disp - 1] = w.base()[disp + size] = 0x5a;
          if (put)
            fill(local.data(), size, size_t(case_no) * 10 + size_t(w.me));
          else
            fill(w.base() + disp, size, size_t(case_no) * 10 + size_t(w.me));
          weft::barrier();
          // The handler cases go through post_comm_x (Table 1's generic form), the others
          // through post_put_x / post_get_x.
          auto post = [&] {
            auto finish = [&](auto x) {
              x.tag(tag).user_context(&marker);
              if (notify) x.remote_comp(rc);
              return x();
            };
            if (k == comp_kind::handler)
              return finish(weft::post_comm_x(put ? weft::direction_t::OUT : weft::direction_t::IN,
                                              w.to, local.data(), size, lc.comp)
                                .remote_buffer(w.to_rmr)
                                .remote_disp(disp));
            if (put)
              return finish(weft::post_put_x(w.to, local.data(), size, lc.comp, disp, w.to_rmr));
            return finish(weft::post_get_x(w.to, local.data(), size, lc.comp, disp, w.to_rmr));
          };
          weft::status_t s = post_until(post);
          CHECK(s.error.is_posted());
          weft::status_t done = lc.wait();
          CHECK(done.error.is_done());
          CHECK_EQ(done.rank, w.to);
          CHECK_EQ(done.tag, tag);
          CHECK(done.buf == local.data());
          CHECK_EQ(done.size, size);
          CHECK(done.user_context == &marker);
          if (!put)
            CHECK_EQ(verify(local.data(), size, size_t(case_no) * 10 + size_t(w.to)), SIZE_MAX);
          if (notify) {
            // The previous rank's put into (or get from) this rank's window.
            weft::status_t t = wait_cq(rcq);
            CHECK(t.error.is_done());
            CHECK_EQ(t.rank, w.from);
            CHECK_EQ(t.tag, tag);
            CHECK(t.buf == w.base() + disp);
            CHECK_EQ(t.size, size);
          }
          weft::barrier();  // every put is visible once its source completed
          if (put) {
            size_t bad = verify(w.base() + disp, size, size_t(case_no) * 10 + size_t(w.from));
            if (bad != SIZE_MAX)
              fprintf(stderr, "rank %d: put case %d size %zu notify %d: byte %zu wrong\n", w.me,
                      case_no, size, int(notify), bad);
            CHECK_EQ(bad, SIZE_MAX);
          }
          CHECK(guards_intact(w.base() + disp, size));
          weft::barrier();
        }
      }
    }
  }
  CHECK_EQ(weft::cq_size(rcq), 0u);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish(alloc ? "rma_alloc" : "rma");
}

int scenario_rma() {
  return run_rma(false);
}

// Over shared memory, a notified put of 1 or 8 bytes goes with its notification in one cell
// line (put_small_msg, counted in puts_small); a 9-byte one, and an 8-byte one without a
// notification, do not. Each arrives whole, with its notification.
int scenario_rma_small() {
  windows w(4096);
  weft::comp_t rcq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();
  weft::device_t dev = weft::get_default_device();
  const uint64_t small0 = dev.get_counter(weft::counter_t::puts_small);
  struct one {
    size_t size;
    bool notify, small;
  };
  const one cases[] = {{1, true, true}, {8, true, true}, {9, true, false}, {8, false, false}};
  unsigned char local[16];
  size_t disp = 16;
  for (const one& c : cases) {
    fill(local, c.size, c.size * 7 + size_t(w.me) + disp);
    weft::comp_t sync = weft::alloc_sync();
    const uint64_t before = dev.get_counter(weft::counter_t::puts_small);
    weft::status_t s = post_until([&] {
      auto x = weft::post_put_x(w.to, local, c.size, sync, disp, w.to_rmr).tag(weft::tag_t(disp));
      if (c.notify) x.remote_comp(rc);
      return x();
    });
    CHECK(s.error.is_posted() || s.error.is_done());
    if (s.error.is_posted()) weft::sync_wait(sync, nullptr);
    CHECK_EQ(dev.get_counter(weft::counter_t::puts_small) - before, c.small ? 1u : 0u);
    if (c.notify) {
      weft::status_t t = wait_cq(rcq);
      CHECK(t.error.is_done());
      CHECK_EQ(t.rank, w.from);
      CHECK(t.buf == w.base() + disp);
      CHECK_EQ(t.size, c.size);
    }
    weft::barrier();  // the previous rank's put into this window is complete and visible
    CHECK_EQ(verify(w.base() + disp, c.size, c.size * 7 + size_t(w.from) + disp), SIZE_MAX);
    CHECK(guards_intact(w.base() + disp, c.size));
    weft::free_comp(&sync);
    disp += 32;
  }
  CHECK_EQ(dev.get_counter(weft::counter_t::puts_small) - small0, 2u);
  CHECK_EQ(weft::cq_size(rcq), 0u);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish("rma_small");
}

// The target of small notified puts acknowledges them at its next poll or send, not from
// the poll that applied them (docs/shm.md). Rank 0 takes the notifications of a put from
// every other rank and finalizes at once, with no barrier and no further progress: the
// devices it frees still send what they owe, and each initiator's put completes done.
int scenario_rma_ack_at_fina() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  std::vector<unsigned char> region(size_t(n) * 8, 0);
  weft::mr_t mr = weft::register_memory(region.data(), region.size());
  const weft::rmr_t theirs = from_rank0(weft::get_rmr(mr), 902);
  weft::comp_t rcq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  if (me == 0) {
    for (int got = 1; got < n; ++got) {
      weft::status_t t = wait_cq(rcq);
      CHECK(t.error.is_done());
      CHECK(t.buf == region.data() + size_t(t.rank) * 8);
      CHECK_EQ(t.size, 8u);
      CHECK_EQ(verify(region.data() + size_t(t.rank) * 8, 8, size_t(t.rank) + 40), SIZE_MAX);
    }
    weft::g_runtime_fina();  // the acknowledgments owed leave with the devices
    std::this_thread::sleep_for(std::chrono::seconds(2));  // alive, not progressing
    return finish("rma_ack_at_fina");
  }
  weft::comp_t sync = weft::alloc_sync();
  weft::status_t st;
  unsigned char buf[8];
  fill(buf, 8, size_t(me) + 40);
  st = post_until(
      [&] { return weft::post_put_x(0, buf, 8, sync, size_t(me) * 8, theirs).remote_comp(rc)(); });
  if (!st.error.is_done()) wait_sync(sync, &st);  // fails the test after its deadline
  CHECK(st.error.is_done());
  weft::free_comp(&sync);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  weft::deregister_memory(&mr);
  weft::g_runtime_fina();
  return finish("rma_ack_at_fina");
}

int scenario_rma_alloc() {
  return run_rma(true);
}

// A test sink for calling the backend directly: records completions.
struct recording_sink final : weft::net::sink {
  int put_done = 0, get_done = 0;
  bool put_ok = true, get_ok = true;
  bool on_message(int, const void*, size_t) override { return true; }
  void on_put_local_done(void*, bool ok) override {
    ++put_done;
    put_ok = ok;
  }
  void on_get_done(void*, bool ok) override {
    ++get_done;
    get_ok = ok;
  }
  bool on_remote_notify(int, const void*, size_t) override { return true; }
  bool expects_data(int, uint64_t, size_t, const void*, size_t) override { return false; }
  bool on_ahead(int, uint32_t, const void*, size_t) override { return true; }
};

// Polls the backend until the put and the get posted through it both ended, across a
// barrier (so the peer progresses meanwhile), and checks both were refused with nothing read.
static void expect_both_refused(weft::net::device* net, recording_sink& rec,
                                const std::vector<char>& got, const char* what) {
  weft::comp_t bsync = weft::alloc_sync();
  weft::barrier_x().comp(bsync)();
  deadline d;
  weft::status_t bs;
  while (rec.put_done == 0 || rec.get_done == 0 || !weft::sync_test(bsync, &bs)) {
    net->poll(rec, 32);
    weft::progress();
    d.check(what);
  }
  CHECK_EQ(rec.put_done, 1);
  CHECK(!rec.put_ok);
  CHECK_EQ(rec.get_done, 1);
  CHECK(!rec.get_ok);
  CHECK_EQ(got[0], 0x22);
  weft::free_comp(&bsync);
}

// Bad handles: refused at the caller with a message, and refused by the backend itself
// when a handle goes stale after the check at posting (called directly here, as a race
// would): nothing is written or read. A backend that asks the owner about a handle first
// (ofi, ucx) answers retry until it knows, so handles the owner must judge are posted until
// the answer is not retry.
int scenario_rma_errors() {
  windows w(4096);
  const int to = w.to;
  char buf[64] = {};
  weft::comp_t sync = weft::alloc_sync();
  std::string e;
  e = error_of([&] { weft::post_put(to, buf, 64, sync, 4096 - 63, w.to_rmr); });
  CHECK(contains(e, "post_put") && contains(e, "remote_disp = 4033") && contains(e, "overruns"));
  e = error_of([&] { weft::post_get(to, buf, 8, sync, 0, weft::rmr_t{}); });
  CHECK(contains(e, "post_get") && contains(e, "remote_buffer = empty"));
  e = error_of([&] { weft::post_put_x(to, buf, 8, sync, 0, w.to_rmr).remote_comp(77)(); });
  CHECK(contains(e, "remote_comp = 77") && contains(e, "unknown remote completion"));
  e = error_of([&] { weft::post_get(to, nullptr, 8, sync, 0, w.to_rmr); });
  CHECK(contains(e, "local_buffer = nullptr"));
  e = error_of([&] { weft::register_memory(nullptr, 8); });
  CHECK(contains(e, "register_memory") && contains(e, "base = nullptr"));
  e = error_of([&] { weft::register_memory(buf, 0); });
  CHECK(contains(e, "size = 0"));
  // Posted until it is not retry; the error (a fatal_error) ends the loop.
  auto refusal_of = [&](bool put, const weft::rmr_t& h) {
    return error_of([&] {
      post_until([&] {
        return put ? weft::post_put(to, buf, 8, sync, 0, h)
                   : weft::post_get(to, buf, 8, sync, 0, h);
      });
    });
  };
  weft::rmr_t forged = w.to_rmr;
  forged.generation += 5;
  e = refusal_of(true, forged);
  CHECK(contains(e, "post_put") &&
        (contains(e, "has been deregistered") || contains(e, "is not its region's")));

  // A second region, deregistered by its owner after its handle went out.
  std::vector<char> second(8192, 0x33);
  weft::mr_t mr2 = weft::register_memory(second.data(), second.size());
  weft::rmr_t stale = w.exchange(weft::get_rmr(mr2));
  weft::deregister_memory(&mr2);
  CHECK(mr2.is_empty());
  e = error_of([&] { weft::deregister_memory(&mr2); });
  CHECK(contains(e, "deregister_memory") && contains(e, "mr = empty"));
  weft::barrier();
  e = refusal_of(true, stale);
  CHECK(contains(e, "post_put") && contains(e, "remote_buffer = region") &&
        contains(e, "has been deregistered"));
  e = refusal_of(false, stale);
  CHECK(contains(e, "post_get") && contains(e, "has been deregistered"));

  // The same memory registered again: a new generation; the old handle stays refused.
  mr2 = weft::register_memory(second.data(), second.size());
  weft::rmr_t fresh = w.exchange(weft::get_rmr(mr2));
  CHECK(fresh.key != stale.key || fresh.generation != stale.generation);
  e = refusal_of(true, stale);
  CHECK(contains(e, "has been deregistered"));
  fill(buf, 64, 9);
  weft::status_t st = post_until([&] { return weft::post_put(to, buf, 64, sync, 100, fresh); });
  CHECK(st.error.is_posted());
  wait_sync(sync, &st);
  CHECK(st.error.is_done());
  weft::barrier();
  CHECK_EQ(verify(second.data() + 100, 64, 9), SIZE_MAX);

  // The backend's own refusal: the owner retires the region now, then the peer calls the
  // backend with the stale key, bypassing the check at posting. Each rank polls the raw
  // device while its call answers retry, since that device may have to ask the owner's
  // (the same index) first; the owner keeps progressing (in the barrier) while the
  // refusal travels.
  weft::barrier();
  weft::deregister_memory(&mr2);
  weft::barrier();
  std::vector<char> big(300000, 0x11);
  // A device of its own (collective: every rank allocates it), polled only with the
  // recording sink, while the default device runs the barrier.
  weft::device_t raw = weft::alloc_device();
  auto* net = weft::util::live(raw.p, "test", "device")->net.get();
  recording_sink rec;
  const weft::net::rkey_t key{fresh.key, fresh.generation};
  deadline asked;
  while (!net->try_put(to, big.data(), big.size() > fresh.size ? fresh.size : big.size(),
                       fresh.base, key, nullptr, 0, reinterpret_cast<void*>(1))) {
    net->poll(rec, 32);
    asked.check("the backend to take a put with a stale handle");
  }
  std::vector<char> got(4096, 0x22);
  while (!net->try_get(to, got.data(), got.size(), fresh.base, key, nullptr, 0,
                       reinterpret_cast<void*>(2))) {
    net->poll(rec, 32);
    asked.check("the backend to take a get with a stale handle");
  }
  expect_both_refused(net, rec, got, "the backend's refusal of a stale handle");
  CHECK_EQ(second[100], char(pattern(0, 9)));  // untouched since the last good put
  CHECK_EQ(second[0], 0x33);
  weft::barrier();
  weft::free_device(&raw);
  weft::free_comp(&sync);
  return finish("rma_errors");
}

// A handle used after its owner deregistered the region, on any backend: the put or get is
// refused (at posting, naming the deregistration, or by the backend through the completion
// with error_region), and the owner's memory stays as it was. The handle was used once
// before, so a backend that keeps fetched keys (ucx) must have dropped its copy.
int scenario_rma_stale() {
  windows w(64);  // only for its exchange
  const int to = w.to, from = w.from;
  std::vector<char> region(4096, 0x33);
  weft::mr_t mr = weft::register_memory(region.data(), region.size());
  const weft::rmr_t theirs = w.exchange(weft::get_rmr(mr));
  weft::barrier();
  char buf[64];
  fill(buf, sizeof(buf), size_t(w.me));
  weft::comp_t sync = weft::alloc_sync();
  weft::status_t st = post_until([&] { return weft::post_put(to, buf, 64, sync, 0, theirs); });
  if (!st.error.is_done()) wait_sync(sync, &st);
  CHECK(st.error.is_done());
  weft::barrier();
  CHECK_EQ(verify(region.data(), 64, size_t(from)), SIZE_MAX);  // the handle worked

  weft::deregister_memory(&mr);
  weft::barrier();
  auto refused = [&](bool put, char* local) {
    weft::status_t s;
    std::string e = error_of([&] {
      s = post_until([&] {
        return put ? weft::post_put(to, local, 64, sync, 100, theirs)
                   : weft::post_get(to, local, 64, sync, 100, theirs);
      });
    });
    if (!e.empty())
      return contains(e, put ? "post_put" : "post_get") && contains(e, "deregistered");
    if (s.error.is_done()) return false;  // done at once: the access went through
    wait_sync(sync, &s);
    return s.error.errorcode == weft::errorcode_t::error_region;
  };
  CHECK(refused(true, buf));
  char got[64];
  memset(got, 0x77, sizeof(got));
  CHECK(refused(false, got));
  CHECK(std::all_of(got, got + 64, [](char c) { return c == 0x77; }));  // nothing read
  weft::barrier();
  CHECK(std::all_of(region.begin() + 64, region.end(), [](char c) { return c == 0x33; }));
  weft::free_comp(&sync);
  return finish("rma_stale");
}

// A peer that accessed a region and then finalized (alive, no longer progressing) does not
// hold up the owner's deregistration: its devices said goodbye when they were freed. Rank 0
// owns the region; every other rank puts into it, finalizes, and stays alive a while.
// Finalizes the runtime itself (main must not).
int scenario_rma_farewell() {
  using clk = std::chrono::steady_clock;
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  std::vector<char> region(4096, 0);
  weft::mr_t mr = weft::register_memory(region.data(), region.size());
  const weft::rmr_t owners = from_rank0(weft::get_rmr(mr), 901);
  weft::comp_t sync = weft::alloc_sync();
  weft::status_t st;
  if (me != 0) {
    char buf[64];
    fill(buf, sizeof(buf), size_t(me));
    st = post_until([&] { return weft::post_put(0, buf, 64, sync, size_t(me) * 64, owners); });
    if (!st.error.is_done()) wait_sync(sync, &st);
    CHECK(st.error.is_done());
  }
  weft::barrier();
  weft::free_comp(&sync);
  if (me != 0) {
    weft::deregister_memory(&mr);  // its own, which nobody accessed
    weft::g_runtime_fina();
    std::this_thread::sleep_for(std::chrono::seconds(3));  // alive, not progressing
    return finish("rma_farewell");
  }
  for (int r = 1; r < n; ++r) CHECK_EQ(verify(region.data() + r * 64, 64, size_t(r)), SIZE_MAX);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the others finalize
  const auto t0 = clk::now();
  weft::deregister_memory(&mr);
  const double took = std::chrono::duration<double>(clk::now() - t0).count();
  CHECK(took < 2.0);
  weft::g_runtime_fina();
  return finish("rma_farewell");
}

// Notified puts that repeat across rounds: many distinct notifications (more than a
// backend's notification slots) with many in flight, each round the same set with new data.
// Every notification must arrive once per round with its tag, address and size, after its
// data. Over ofi this drives the CQ-data slots through reuse, eviction and the fallback.
int scenario_rma_notes() {
  constexpr int kRounds = 6, kNotes = 400, kWindow = 64;
  constexpr size_t kStride = 256;
  windows w(kNotes * kStride);
  weft::comp_t rcq = weft::alloc_cq_x().depth(2 * kNotes)();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::comp_t cq = weft::alloc_cq_x().depth(2 * kNotes)();
  weft::barrier();
  auto size_of = [](int i) { return size_t(1 + (i * 37) % int(kStride)); };
  std::vector<unsigned char> src(size_t(kNotes) * kStride);
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kNotes; ++i)
      fill(&src[size_t(i) * kStride], size_of(i), size_t(round * 100000 + w.me * 1000 + i));
    std::vector<int> seen(kNotes, 0);
    int posted = 0, done = 0, notified = 0;
    deadline d(120);
    while (done < kNotes || notified < kNotes) {
      while (posted < kNotes && posted - done < kWindow) {
        const int i = posted;
        weft::status_t s = weft::post_put_x(w.to, &src[size_t(i) * kStride], size_of(i), cq,
                                            size_t(i) * kStride, w.to_rmr)
                               .tag(weft::tag_t(i))
                               .remote_comp(rc)();
        if (s.error.is_retry()) break;
        CHECK(s.error.is_posted() || s.error.is_done());
        if (s.error.is_done()) ++done;
        ++posted;
      }
      weft::status_t s = weft::cq_pop(cq);
      if (!s.error.is_retry()) {
        CHECK(s.error.is_done());
        ++done;
      }
      weft::status_t n = weft::cq_pop(rcq);
      if (!n.error.is_retry()) {
        ++notified;
        const int i = int(n.tag);
        CHECK(i >= 0 && i < kNotes);
        if (i < 0 || i >= kNotes) continue;
        ++seen[size_t(i)];
        CHECK_EQ(n.rank, w.from);
        CHECK(n.buf == w.base() + size_t(i) * kStride);
        CHECK_EQ(n.size, size_of(i));
        CHECK_EQ(verify(n.buf, n.size, size_t(round * 100000 + w.from * 1000 + i)), SIZE_MAX);
      }
      weft::progress();
      d.check("notified puts");
    }
    for (int i = 0; i < kNotes; ++i) CHECK_EQ(seen[size_t(i)], 1);
    weft::barrier();  // nobody overwrites a round's data before its target checked it
  }
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  weft::free_comp(&cq);
  return finish("rma_notes");
}

// Threads putting with notification into one shared region and into private regions of
// the next rank, many small and medium puts each; the target checks every byte.
int scenario_rma_threads() {
  constexpr int kThreads = 4, kPuts = 150;
  constexpr size_t kSlot = 16384;
  windows shared(size_t(kThreads) * kPuts * kSlot);
  std::vector<std::unique_ptr<windows>> own;
  for (int t = 0; t < kThreads; ++t) own.push_back(std::make_unique<windows>(kPuts * kSlot));
  weft::comp_t rcq = weft::alloc_cq_x().depth(4 * kThreads * kPuts)();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();  // every rank registered before anyone sends to it
  const int to = shared.to, from = shared.from;
  auto size_of = [](int t, int k) { return size_t((k * 7919 + t * 104729) % int(kSlot)) + 1; };
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<unsigned char> src(kSlot);
      weft::comp_t cq = weft::alloc_cq();
      for (int k = 0; k < kPuts; ++k) {
        const size_t size = size_of(t, k);
        const bool into_shared = k % 2 == 0;
        fill(src.data(), size, size_t(t * 1000 + k));
        const weft::rmr_t& dst = into_shared ? shared.to_rmr : own[size_t(t)]->to_rmr;
        const size_t disp =
            into_shared ? (size_t(t) * kPuts + size_t(k)) * kSlot : size_t(k) * kSlot;
        weft::tag_t tag = weft::tag_t(t << 16 | k);
        post_until([&] {
          return weft::post_put_x(to, src.data(), size, cq, disp, dst).tag(tag).remote_comp(rc)();
        });
        weft::status_t s = wait_cq(cq);
        if (!s.error.is_done() || s.size != size) errors.fetch_add(1);
      }
      weft::free_comp(&cq);
    });
  }
  // The main thread takes the notifications and checks each region written.
  int seen = 0;
  std::vector<int> hits(size_t(kThreads) * kPuts, 0);
  deadline d(120);
  while (seen < kThreads * kPuts) {
    weft::status_t s = weft::cq_pop(rcq);
    if (s.error.is_retry()) {
      weft::progress();
      d.check("thread put notifications");
      continue;
    }
    ++seen;
    const int t = int(s.tag >> 16), k = int(s.tag & 0xffff);
    CHECK(t >= 0 && t < kThreads && k >= 0 && k < kPuts);
    if (t < 0 || t >= kThreads || k < 0 || k >= kPuts) continue;
    ++hits[size_t(t * kPuts + k)];
    CHECK_EQ(s.rank, from);
    CHECK_EQ(s.size, size_of(t, k));
    const bool into_shared = k % 2 == 0;
    unsigned char* expect = into_shared ? shared.base() + (size_t(t) * kPuts + size_t(k)) * kSlot
                                        : own[size_t(t)]->base() + size_t(k) * kSlot;
    CHECK(s.buf == expect);
    CHECK_EQ(verify(s.buf, s.size, size_t(t * 1000 + k)), SIZE_MAX);
  }
  for (auto& th : threads) th.join();
  for (int h : hits) CHECK_EQ(h, 1);
  CHECK_EQ(errors.load(), 0);
  weft::barrier();
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish("rma_threads");
}

// Put and get above 4 GiB between ranks 0 and 1 (8.6 GB in all).
int scenario_rma_big() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  if (n != 2) die("rma_big needs 2 ranks");
  const size_t size = (size_t(4) << 30) + 4096 + 17;
  char* buf = static_cast<char*>(malloc(size));
  if (!buf) die("cannot allocate 4 GiB");
  weft::mr_t mr = weft::register_memory(buf, size);
  weft::comp_t rcq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();  // every rank registered before anyone sends to it
  const weft::rmr_t peer = swap_rmr(1 - me, 1 - me, weft::get_rmr(mr));
  weft::comp_t sync = weft::alloc_sync();
  weft::status_t st;
  if (me == 0) {
    fill(buf, size, 5);
    post_until(
        [&] { return weft::post_put_x(1, buf, size, sync, 0, peer).remote_comp(rc).tag(3)(); });
    wait_sync(sync, &st);
    CHECK(st.error.is_done());
    CHECK_EQ(st.size, size);
  } else {
    memset(buf, 0, size);
    weft::barrier();  // rank 0 fills first
    st = wait_cq(rcq);
    CHECK(st.error.is_done());
    CHECK_EQ(st.size, size);
    CHECK(st.buf == buf);
    CHECK_EQ(verify(buf, size, 5), SIZE_MAX);
  }
  if (me == 0) weft::barrier();
  weft::barrier();
  // Rank 0 reads it back over its own (cleared) buffer.
  if (me == 0) {
    memset(buf, 0, size);
    post_until([&] { return weft::post_get(1, buf, size, sync, 0, peer); });
    wait_sync(sync, &st);
    CHECK(st.error.is_done());
    CHECK_EQ(st.size, size);
    CHECK_EQ(verify(buf, size, 5), SIZE_MAX);
  }
  weft::barrier();
  weft::deregister_memory(&mr);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  weft::free_comp(&sync);
  free(buf);
  return finish("rma_big");
}

// Handles made by hand: key 0 with a real address and size, and a random key. Each rank
// offers its neighbour the address of memory it never registered; the neighbour's put and
// get through the public calls are refused naming the handle, and through the backend
// directly (as a buggy peer would) are refused by the target with an error to the
// initiator, on every mechanism. The memory stays untouched. Keys are not guessable: this
// rank's first registration is named by neither 1 nor its neighbour's key.
int scenario_rma_forged() {
  windows w(4096);
  const int to = w.to;
  std::vector<unsigned char> secret(8192, 0x77);
  const uint64_t addr =
      w.exchange(weft::rmr_t{reinterpret_cast<uint64_t>(secret.data()), 8192, 0, 0}).base;
  const weft::rmr_t theirs = w.to_rmr;
  // Not guessable: a name that is not a small count (ofi keeps the provider's key a counter,
  // its registration id is the name's secret half).
  CHECK(theirs.key > 0xffffffffull || theirs.generation > 0xffffffffull);
  const weft::rmr_t mine = weft::get_rmr(w.mr);
  CHECK(mine.key != theirs.key || mine.generation != theirs.generation || weft::get_rank_n() == 1);
  char buf[64];
  fill(buf, sizeof(buf), 3);
  weft::comp_t sync = weft::alloc_sync();
  for (const weft::rmr_t& forged :
       {weft::rmr_t{addr, 8192, 0, 0},
        weft::rmr_t{addr, 8192, 0x5eed5eed5eedull, theirs.generation}}) {
    std::string e =
        error_of([&] { post_until([&] { return weft::post_put(to, buf, 64, sync, 0, forged); }); });
    CHECK(contains(e, "post_put") && contains(e, "remote_buffer"));
    e = error_of([&] { post_until([&] { return weft::post_get(to, buf, 64, sync, 0, forged); }); });
    CHECK(contains(e, "post_get") && contains(e, "remote_buffer"));
  }
  // The backend itself, called with key 0, as a peer that bypasses the checks would. A
  // barrier first: a rank whose owner is asked about the random key answers while it waits
  // there, not while it allocates the device (collective, no progress).
  weft::barrier();
  weft::device_t raw = weft::alloc_device();
  auto* net = weft::util::live(raw.p, "test", "device")->net.get();
  recording_sink rec;
  std::vector<char> big(6000, 0x11);
  std::vector<char> got(4096, 0x22);
  deadline asked;
  while (!net->try_put(to, big.data(), big.size(), addr, weft::net::rkey_t{0, 0}, nullptr, 0,
                       reinterpret_cast<void*>(1))) {
    net->poll(rec, 32);
    asked.check("the backend to take a put with key 0");
  }
  while (!net->try_get(to, got.data(), got.size(), addr, weft::net::rkey_t{0, 0}, nullptr, 0,
                       reinterpret_cast<void*>(2))) {
    net->poll(rec, 32);
    asked.check("the backend to take a get with key 0");
  }
  expect_both_refused(net, rec, got, "the target's refusal of key 0");
  weft::barrier();  // every neighbour has tried
  size_t touched = 0;
  for (unsigned char c : secret) touched += c != 0x77;
  CHECK_EQ(touched, size_t(0));
  weft::free_device(&raw);
  weft::free_comp(&sync);
  return finish("rma_forged");
}

// Back-pressure for notified puts: rank 0 puts 20000 eight-byte values, each with a
// notification, into rank 1's region while rank 1 leaves its completion queue of 64 entries
// alone for a second. Rank 0 must see retry or wait, nothing may be lost: rank 1 then gets
// every notification once (by tag) and finds every value in place; rank 0 every local
// completion.
int scenario_rma_burst() {
  constexpr int kPuts = 20000;
  windows w(kPuts * sizeof(uint64_t));
  if (w.n != 2) die("rma_burst needs 2 ranks");
  weft::comp_t rcq = weft::alloc_cq_x().depth(64)();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();
  deadline d(120);
  if (w.me == 0) {
    weft::comp_t cq = weft::alloc_cq_x().depth(kPuts)();
    std::vector<uint64_t> src(kPuts);
    int done = 0;
    for (int i = 0; i < kPuts; ++i) {
      src[size_t(i)] = uint64_t(i) * 2654435761u + 1;
      weft::status_t s = post_until([&] {
        return weft::post_put_x(1, &src[size_t(i)], 8, cq, size_t(i) * 8, w.to_rmr)
            .tag(weft::tag_t(i))
            .remote_comp(rc)();
      });
      CHECK(s.error.is_done() || s.error.is_posted());
      done += s.error.is_done();
    }
    for (; done < kPuts; d.check("the puts' local completions")) {
      weft::status_t s = weft::cq_pop(cq);
      if (s.error.is_retry()) {
        weft::progress();
        continue;
      }
      CHECK(s.error.is_done());
      ++done;
    }
    weft::free_comp(&cq);
  } else {
    const double start = now_s();
    while (now_s() - start < 1.0) weft::progress();
    std::vector<unsigned char> seen(kPuts, 0);
    for (int got = 0; got < kPuts; d.check("the puts' notifications")) {
      weft::status_t s = weft::cq_pop(rcq);
      if (s.error.is_retry()) {
        weft::progress();
        continue;
      }
      CHECK(s.error.is_done());
      CHECK(s.tag < weft::tag_t(kPuts));
      CHECK_EQ(seen[s.tag]++, 0);
      ++got;
    }
    const auto* v = reinterpret_cast<const uint64_t*>(w.base());
    for (int i = 0; i < kPuts; ++i) CHECK_EQ(v[i], uint64_t(i) * 2654435761u + 1);
    printf("rank 1: all %d notified puts arrived once, every value in place\n", kPuts);
  }
  weft::barrier();
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish("rma_burst");
}

// An inline put's acknowledgment passes the cells its sender has held at the target. Rank 1
// sends 8 notified puts to rank 0, whose notification queue holds 4: the rest are held in
// rank 0's inbox. Rank 0 then puts into rank 1 and waits for that put alone, popping
// nothing: it completes only if rank 1's acknowledgment is not queued behind rank 1's held
// cells (it was, and this waited for ever). Then rank 0 pops all 8 notifications.
int scenario_ack_past_held() {
  constexpr int kPuts = 8;
  windows w(kPuts * sizeof(uint64_t));
  if (w.n != 2) die("ack_past_held needs 2 ranks");
  weft::comp_t rcq = weft::alloc_cq_x().depth(4)();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::barrier();
  deadline d(30);
  std::vector<uint64_t> src(kPuts, 7);
  weft::comp_t lcq = weft::alloc_cq_x().depth(64)();
  if (w.me == 1) {
    for (int i = 0; i < kPuts; ++i) {
      weft::status_t s = post_until([&] {
        return weft::post_put_x(0, &src[size_t(i)], 8, lcq, size_t(i) * 8, w.to_rmr)
            .remote_comp(rc)
            .tag(weft::tag_t(i))();
      });
      CHECK(s.error.is_posted());
    }
    // Rank 0's put into this rank, seen by its notification; meanwhile progress only.
    weft::status_t t = wait_cq(rcq);
    CHECK(t.error.is_done());
    CHECK_EQ(t.rank, 0);
    for (int done = 0; done < kPuts; ++done) CHECK(wait_cq(lcq).error.is_done());
  } else {
    // Let rank 1's puts arrive and fill the queue (progress, pop nothing).
    const double start = now_s();
    while (now_s() - start < 0.5) weft::progress();
    CHECK_EQ(weft::cq_size(rcq), 4u);
    weft::status_t s = post_until([&] {
      return weft::post_put_x(1, src.data(), 8, lcq, 0, w.to_rmr).remote_comp(rc).tag(99)();
    });
    CHECK(s.error.is_posted());
    weft::status_t got;
    while ((got = weft::cq_pop(lcq)).error.is_retry()) {
      weft::progress();
      d.check("rank 0's own put, whose acknowledgment follows rank 1's held cells");
    }
    CHECK(got.error.is_done());
    for (int i = 0; i < kPuts; ++i) CHECK(wait_cq(rcq).error.is_done());
  }
  weft::barrier();
  weft::free_comp(&lcq);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish("ack_past_held");
}

// An answer enters even a lane that held cells fill. Rank 1 sends more notified puts to
// rank 0 than a lane has cells, and rank 0's notification queue holds 4: the rest are held
// until the lane is full and rank 1's posts see retry. Rank 0 then puts into rank 1 and
// waits for that put alone, popping nothing: the acknowledgment cannot enter the full lane
// and completes only through the answer lane (without it, this waited for ever). Then
// rank 0 pops every notification while rank 1 finishes posting.
int scenario_ack_full_lane() {
  const int puts = int(weft::get_default_device().get_attr_inbox_depth()) + 64;
  windows w(size_t(puts) * sizeof(uint64_t));
  if (w.n != 2) die("ack_full_lane needs 2 ranks");
  weft::comp_t rcq = weft::alloc_cq_x().depth(4)();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::comp_t lcq = weft::alloc_cq_x().depth(size_t(puts) + 1)();
  weft::barrier();
  deadline d(60);
  std::vector<uint64_t> src(static_cast<size_t>(puts));
  for (int i = 0; i < puts; ++i) src[size_t(i)] = uint64_t(i) * 2654435761u + 1;
  if (w.me == 1) {
    long retries = 0;
    for (int i = 0; i < puts; ++i) {
      for (;;) {
        weft::status_t s = weft::post_put_x(0, &src[size_t(i)], 8, lcq, size_t(i) * 8, w.to_rmr)
                               .remote_comp(rc)
                               .tag(weft::tag_t(i))();
        if (!s.error.is_retry()) {
          CHECK(s.error.is_posted());
          break;
        }
        ++retries;
        weft::progress();
        d.check("rank 0 to take rank 1's notified puts");
      }
    }
    CHECK(retries > 0);  // the lane was full
    weft::status_t t = wait_cq(rcq);
    CHECK(t.error.is_done());
    CHECK_EQ(t.rank, 0);
    for (int done = 0; done < puts; ++done) CHECK(wait_cq(lcq).error.is_done());
    printf("rank 1: %d notified puts, %ld retries while rank 0's lane was full\n", puts, retries);
  } else {
    const double start = now_s();
    while (now_s() - start < 0.5) weft::progress();  // the lane fills; nothing popped
    CHECK_EQ(weft::cq_size(rcq), 4u);
    uint64_t mine = 99;
    weft::status_t s = post_until(
        [&] { return weft::post_put_x(1, &mine, 8, lcq, 0, w.to_rmr).remote_comp(rc).tag(99)(); });
    CHECK(s.error.is_posted());
    weft::status_t got;
    while ((got = weft::cq_pop(lcq)).error.is_retry()) {
      weft::progress();
      d.check("rank 0's own put, acknowledged into a lane that held cells fill");
    }
    CHECK(got.error.is_done());
    std::vector<int> seen(size_t(puts), 0);
    for (int i = 0; i < puts; ++i) {
      weft::status_t t = wait_cq(rcq);
      CHECK(t.error.is_done());
      CHECK(t.tag < weft::tag_t(puts));
      CHECK_EQ(seen[t.tag]++, 0);
    }
    const auto* v = reinterpret_cast<const uint64_t*>(w.base());
    for (int i = 0; i < puts; ++i) CHECK_EQ(v[i], src[size_t(i)]);
    printf("rank 0: its put completed past a full lane; all %d puts arrived once\n", puts);
  }
  weft::barrier();
  weft::free_comp(&lcq);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish("ack_full_lane");
}

// A notified put done at once completes only once its notification is sent: a rank putting
// into itself while its own notification queue (depth 4) is full and unpopped sees its
// puts stop completing once its inbox lane is full of held notifications, instead of
// piling the notifications up in a list without bound. Popping releases every one.
int scenario_note_holds_back() {
  const int puts = int(weft::get_default_device().get_attr_inbox_depth()) + 68;
  windows w(size_t(puts) * sizeof(uint64_t));
  weft::comp_t rcq = weft::alloc_cq_x().depth(4)();
  weft::rcomp_t rc = weft::register_rcomp(rcq);
  weft::comp_t lcq = weft::alloc_cq_x().depth(size_t(puts) + 1)();
  weft::barrier();
  const int me = w.me;
  const weft::rmr_t mine = weft::get_rmr(w.mr);
  std::vector<uint64_t> src(static_cast<size_t>(puts));
  for (int i = 0; i < puts; ++i) src[size_t(i)] = uint64_t(i) * 40503u + 3;
  int posted = 0;
  for (; posted < puts; ++posted) {
    weft::status_t s = weft::post_put_x(me, &src[size_t(posted)], 8, lcq, size_t(posted) * 8, mine)
                           .remote_comp(rc)
                           .tag(weft::tag_t(posted))();
    if (s.error.is_retry()) break;
    CHECK(s.error.is_posted() || s.error.is_done());
    if (s.error.is_done()) CHECK(weft::comp_signal(lcq, s).is_done());
  }
  const double start = now_s();
  while (now_s() - start < 0.3) weft::progress();
  const size_t held_back = size_t(posted) - weft::cq_size(lcq);
  CHECK(held_back > 0);  // some wait for room for their notification
  CHECK_EQ(weft::cq_size(rcq), 4u);
  deadline d(60);
  int done = 0, notes = 0;
  std::vector<int> seen(size_t(puts), 0);
  while (posted < puts || done < posted || notes < puts) {
    if (posted < puts) {
      weft::status_t s =
          weft::post_put_x(me, &src[size_t(posted)], 8, lcq, size_t(posted) * 8, mine)
              .remote_comp(rc)
              .tag(weft::tag_t(posted))();
      if (s.error.is_done()) CHECK(weft::comp_signal(lcq, s).is_done());
      if (!s.error.is_retry()) ++posted;
    }
    weft::status_t t = weft::cq_pop(rcq);
    if (!t.error.is_retry()) {  // a notification: done, naming one put and where it wrote
      CHECK(t.error.is_done());
      CHECK(t.tag < weft::tag_t(puts));
      CHECK_EQ(seen[t.tag]++, 0);
      CHECK(t.buf == w.base() + t.tag * 8);
      CHECK_EQ(t.size, 8u);
      ++notes;
    }
    weft::status_t l = weft::cq_pop(lcq);
    if (!l.error.is_retry()) {
      CHECK(l.error.is_done());
      ++done;
    }
    weft::progress();
    d.check("every put into this rank to complete once its notifications are popped");
  }
  const auto* v = reinterpret_cast<const uint64_t*>(w.base());
  for (int i = 0; i < puts; ++i) CHECK_EQ(v[i], src[size_t(i)]);
  printf("rank %d: %zu of its puts waited for room for their notification; all %d done\n", me,
         held_back, puts);
  weft::barrier();
  weft::free_comp(&lcq);
  weft::deregister_rcomp(rc);
  weft::free_comp(&rcq);
  return finish("note_holds_back");
}
