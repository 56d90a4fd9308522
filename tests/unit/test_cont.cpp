// SPDX-License-Identifier: BSD-3-Clause
// Continuations in one process (rank 0 of 1, sending to itself): every semantic of
// weft/cont.hpp with the observable it promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

namespace {

struct record {
  std::atomic<int> runs{0};
  std::thread::id thread;
  size_t count = 0;
  weft::status_t first;
  int depth_seen = 0;
};

void note(weft::status_t* st, size_t n, void* data) {
  auto* r = static_cast<record*>(data);
  r->thread = std::this_thread::get_id();
  r->count = n;
  if (st && n) r->first = st[0];
  r->runs.fetch_add(1);
}

// An 8-byte receive from self, with its matching send: returns how many returned posted.
int recv_and_send(weft::comp_t c, uint64_t* in, uint64_t* out, weft::tag_t tag) {
  int n = 0;
  n += weft::post_recv(0, in, sizeof(*in), tag, c).error.is_posted();
  n += weft::post_send(0, out, sizeof(*out), tag, c).error.is_posted();
  return n;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const weft::fatal_error& e) {
    return e.what();
  }
  return "no error";
}

class Cont : public ::testing::Test {
 protected:
  void SetUp() override { weft::g_runtime_init(); }
  void TearDown() override { weft::g_runtime_fina(); }
};

TEST_F(Cont, RunsOnceWithStatusesAndData) {
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  weft::status_t st[2];
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r).statuses(st, 2)();
  uint64_t in = 0, out = 0x1234;
  weft::post_recv(0, &in, sizeof(in), 7, c);  // posted: nothing sent yet
  const int sent = weft::post_send(0, &out, sizeof(out), 7, c).error.is_posted();
  EXPECT_TRUE(weft::arm_cont(c, size_t(1 + sent)).is_posted() || r.runs == 0);
  weft::cont_request_wait(cr);
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(r.count, size_t(1 + sent));
  EXPECT_EQ(in, 0x1234u);
  bool saw_recv = false;
  for (size_t i = 0; i < r.count; ++i)
    if (st[i].buf == &in) saw_recv = st[i].tag == 7 && st[i].size == sizeof(in);
  EXPECT_TRUE(saw_recv);
  EXPECT_TRUE(weft::cont_request_test(cr));  // persistent: complete, and reusable
  weft::comp_t c2 = weft::alloc_cont_x(cr, note, &r)();
  EXPECT_EQ(recv_and_send(c2, &in, &out, 8), 1);
  weft::arm_cont(c2, 1);
  weft::cont_request_wait(cr);
  EXPECT_EQ(r.runs.load(), 2);
  EXPECT_EQ(r.count, 1u);
  weft::free_comp(&cr);
}

TEST_F(Cont, ImmediateCompletionReportsDoneAndDoesNotRun) {
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  EXPECT_FALSE(weft::cont_request_test(cr));  // registered, not yet armed: active
  EXPECT_TRUE(weft::arm_cont(c, 0).is_done());
  EXPECT_TRUE(weft::cont_request_test(cr));
  EXPECT_EQ(r.runs.load(), 0);
  // Operations that all signalled before the arm: done as well, statuses written.
  weft::status_t st[1];
  c = weft::alloc_cont_x(cr, note, &r).statuses(st, 1)();
  uint64_t in = 0, out = 5;
  EXPECT_EQ(recv_and_send(c, &in, &out, 9), 1);
  while (weft::cont_request_info(cr).active && st[0].buf != &in) weft::progress();
  for (int i = 0; i < 1000 && st[0].buf != &in; ++i) weft::progress();
  ASSERT_EQ(st[0].buf, &in);
  EXPECT_TRUE(weft::arm_cont(c, 1).is_done());
  EXPECT_EQ(r.runs.load(), 0);
  EXPECT_EQ(in, 5u);
  weft::free_comp(&cr);
}

TEST_F(Cont, EnqueueCompleteRunsInALaterTest) {
  weft::comp_t cr = weft::alloc_cont_request_x().enqueue_complete(true)();
  record r;
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  EXPECT_TRUE(weft::arm_cont(c, 0).is_posted());
  EXPECT_EQ(r.runs.load(), 0);
  EXPECT_EQ(weft::cont_request_info(cr).queued, 1u);
  EXPECT_TRUE(weft::cont_request_test(cr));
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(r.count, 0u);
  weft::free_comp(&cr);
}

TEST_F(Cont, PollOnlyRunsOnlyInsideATest) {
  weft::comp_t cr = weft::alloc_cont_request_x().poll_only(true)();
  record r;
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  uint64_t in = 0, out = 1;
  weft::arm_cont(c, size_t(recv_and_send(c, &in, &out, 3)));
  for (int i = 0; i < 10000 && weft::cont_request_info(cr).queued == 0; ++i) weft::progress();
  EXPECT_EQ(weft::cont_request_info(cr).queued, 1u);
  for (int i = 0; i < 100; ++i) weft::progress();
  EXPECT_EQ(r.runs.load(), 0);  // ready, but progress never runs it
  EXPECT_TRUE(weft::cont_request_test(cr));
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(r.thread, std::this_thread::get_id());
  weft::free_comp(&cr);
}

TEST_F(Cont, WithoutPollOnlyProgressRunsIt) {
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  uint64_t in = 0, out = 1;
  weft::arm_cont(c, size_t(recv_and_send(c, &in, &out, 4)));
  for (int i = 0; i < 10000 && r.runs == 0; ++i) weft::progress();
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(weft::cont_request_info(cr).active, 0u);
  weft::free_comp(&cr);
}

// A continuation that runs inside a progress call hands itself back to its request when that
// call returns (one atomic update per call, not one per continuation); a reader on the same
// thread before then (a handler run later in the same call) must still see it gone, and a
// continuation that allocates the next one of a chain inside the call keeps the count exact.
struct chain {
  weft::comp_t cr;
  int runs = 0, links = 0;
  uint64_t in = 0, out = 7;
};
void chain_next(weft::status_t*, size_t, void* data) {
  auto* ch = static_cast<chain*>(data);
  if (++ch->runs >= ch->links) return;
  weft::comp_t c = weft::alloc_cont_x(ch->cr, chain_next, ch)();
  weft::arm_cont(c, size_t(recv_and_send(c, &ch->in, &ch->out, weft::tag_t(30 + ch->runs % 2))));
}

TEST_F(Cont, RetiredInsideProgressIsGoneForItsOwnThread) {
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  size_t active_seen = 99;
  bool idle_seen = false;
  weft::comp_t h = weft::alloc_handler([&](weft::status_t) {
    active_seen = weft::cont_request_info(cr).active;
    idle_seen = weft::cont_request_test(cr);
  });
  uint64_t in[2] = {0, 0}, out[2] = {1, 2};
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  const bool posted = weft::post_recv(0, &in[0], 8, 20, c).error.is_posted();
  ASSERT_TRUE(posted);
  ASSERT_TRUE(weft::post_recv(0, &in[1], 8, 21, h).error.is_posted());
  ASSERT_TRUE(weft::arm_cont(c, 1).is_posted());
  // Both sends before any progress: one progress call delivers both, the continuation first.
  for (int k = 0; k < 2; ++k)
    while (weft::post_send(0, &out[k], 8, weft::tag_t(20 + k), weft::comp_t{}).error.is_retry())
      weft::progress();
  for (int i = 0; i < 10000 && in[1] == 0; ++i) weft::progress();
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(in[0], 1u);
  EXPECT_EQ(active_seen, 0u);
  EXPECT_TRUE(idle_seen);
  EXPECT_EQ(weft::cont_request_info(cr).active, 0u);
  weft::free_comp(&h);
  weft::free_comp(&cr);
}

TEST_F(Cont, ChainAllocatedInsideProgressKeepsTheCountExact) {
  chain ch;
  ch.cr = weft::alloc_cont_request();
  ch.links = 200;
  weft::comp_t c = weft::alloc_cont_x(ch.cr, chain_next, &ch)();
  weft::arm_cont(c, size_t(recv_and_send(c, &ch.in, &ch.out, 30)));
  weft::cont_request_wait(ch.cr);
  EXPECT_EQ(ch.runs, 200);
  EXPECT_EQ(ch.in, 7u);
  EXPECT_EQ(weft::cont_request_info(ch.cr).active, 0u);
  // The request takes new continuations afterwards, and reports each.
  record r;
  weft::comp_t d = weft::alloc_cont_x(ch.cr, note, &r)();
  EXPECT_EQ(weft::cont_request_info(ch.cr).active, 1u);
  uint64_t in = 0, out = 3;
  weft::arm_cont(d, size_t(recv_and_send(d, &in, &out, 40)));
  weft::cont_request_wait(ch.cr);
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(weft::cont_request_info(ch.cr).active, 0u);
  weft::free_comp(&ch.cr);
}

TEST_F(Cont, MaxPollBoundsEachTest) {
  weft::comp_t cr = weft::alloc_cont_request_x().poll_only(true).max_poll(2)();
  record r;
  for (int i = 0; i < 5; ++i) weft::arm_cont(weft::alloc_cont_x(cr, note, &r)(), 0);
  weft::free_comp(&cr);  // nothing active: released at once
  cr = weft::alloc_cont_request_x().poll_only(true).max_poll(2).enqueue_complete(true)();
  for (int i = 0; i < 5; ++i) weft::arm_cont(weft::alloc_cont_x(cr, note, &r)(), 0);
  std::vector<int> per_test;
  for (int t = 0; t < 4; ++t) {
    const int before = r.runs;
    weft::cont_request_test(cr);
    per_test.push_back(r.runs - before);
  }
  EXPECT_EQ(per_test, (std::vector<int>{2, 2, 1, 0}));
  weft::free_comp(&cr);
}

TEST_F(Cont, ThreadApplicationKeepsCallbacksOffWeftThreads) {
  for (auto policy : {weft::cont_thread_t::application, weft::cont_thread_t::any}) {
    weft::comp_t cr = weft::alloc_cont_request_x().thread(policy)();
    record r;
    weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
    uint64_t in = 0, out = 1;
    weft::arm_cont(c, size_t(recv_and_send(c, &in, &out, 5)));
    std::thread weft_thread([&] {
      weft::mark_weft_thread();  // as the engine's progress thread does
      for (int i = 0; i < 10000 && in != 1; ++i) weft::progress();
    });
    weft_thread.join();
    ASSERT_EQ(in, 1u);
    if (policy == weft::cont_thread_t::any) {
      EXPECT_EQ(r.runs.load(), 1);
      EXPECT_NE(r.thread, std::this_thread::get_id());
    } else {
      EXPECT_EQ(r.runs.load(), 0);
      EXPECT_EQ(weft::cont_request_info(cr).queued, 1u);
      weft::cont_request_wait(cr);
      EXPECT_EQ(r.runs.load(), 1);
      EXPECT_EQ(r.thread, std::this_thread::get_id());
    }
    weft::free_comp(&cr);
  }
}

// A continuation that posts and attaches another one: the second becomes ready inside the
// first (its progress call delivers it) and must wait until the first has returned.
struct nest {
  weft::comp_t cr;
  std::atomic<int> depth{0}, max_depth{0}, runs{0};
  uint64_t in = 0, out = 2;
};
void inner(weft::status_t*, size_t, void* data) {
  auto* n = static_cast<nest*>(data);
  const int d = ++n->depth;
  n->max_depth = std::max(n->max_depth.load(), d);
  ++n->runs;
  --n->depth;
}
void outer(weft::status_t*, size_t, void* data) {
  auto* n = static_cast<nest*>(data);
  const int d = ++n->depth;
  n->max_depth = std::max(n->max_depth.load(), d);
  weft::comp_t c = weft::alloc_cont_x(n->cr, inner, n)();
  weft::arm_cont(c, size_t(recv_and_send(c, &n->in, &n->out, 11)));
  for (int i = 0; i < 1000 && n->in != 2; ++i) weft::progress();
  ++n->runs;
  --n->depth;
}

TEST_F(Cont, NeverRunsInsideAnotherContinuation) {
  nest n;
  n.cr = weft::alloc_cont_request();
  uint64_t in = 0, out = 1;
  weft::comp_t c = weft::alloc_cont_x(n.cr, outer, &n)();
  weft::arm_cont(c, size_t(recv_and_send(c, &in, &out, 10)));
  weft::cont_request_wait(n.cr);
  EXPECT_EQ(n.runs.load(), 2);
  EXPECT_EQ(n.max_depth.load(), 1);
  EXPECT_EQ(n.in, 2u);
  weft::free_comp(&n.cr);
}

TEST_F(Cont, ChainedRequestsRunAfterAPhase) {
  weft::comp_t phase = weft::alloc_cont_request(), top = weft::alloc_cont_request();
  record first, second, after;
  uint64_t in[2] = {0, 0}, out[2] = {1, 2};
  weft::comp_t a = weft::alloc_cont_x(phase, note, &first)();
  weft::comp_t b = weft::alloc_cont_x(phase, note, &second)();
  weft::comp_t w = weft::alloc_cont_x(top, note, &after)();
  EXPECT_TRUE(weft::watch_cont_request(phase, w).is_posted());
  weft::arm_cont(w, 1);
  weft::arm_cont(a, size_t(recv_and_send(a, &in[0], &out[0], 20)));
  EXPECT_EQ(after.runs.load(), 0);
  weft::arm_cont(b, size_t(recv_and_send(b, &in[1], &out[1], 21)));
  weft::cont_request_wait(top);
  EXPECT_EQ(first.runs.load(), 1);
  EXPECT_EQ(second.runs.load(), 1);
  EXPECT_EQ(after.runs.load(), 1);
  EXPECT_EQ(after.count, 1u);
  // An idle request: done, nothing will be signalled.
  weft::comp_t w2 = weft::alloc_cont_x(top, note, &after)();
  EXPECT_TRUE(weft::watch_cont_request(phase, w2).is_done());
  EXPECT_TRUE(weft::arm_cont(w2, 0).is_done());
  weft::free_comp(&phase);
  weft::free_comp(&top);
}

TEST_F(Cont, CancelledReceiveReachesItsContinuation) {
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  weft::status_t st[1];
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r).statuses(st, 1)();
  uint64_t in = 0;
  ASSERT_TRUE(weft::post_recv(0, &in, sizeof(in), 30, c).error.is_posted());
  weft::arm_cont(c, 1);
  EXPECT_TRUE(weft::cancel_recv(0, &in, 30, c));
  weft::cont_request_wait(cr);
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_TRUE(st[0].error.is_cancelled());
  EXPECT_EQ(st[0].buf, &in);
  weft::free_comp(&cr);
}

TEST_F(Cont, FreedActiveRequestIsReleasedAfterItsContinuationsRun) {
  weft::comp_t cr = weft::alloc_cont_request_x().poll_only(true)();
  const weft::comp_t stale = cr;
  record r;
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  uint64_t in = 0, out = 3;
  ASSERT_TRUE(weft::post_recv(0, &in, sizeof(in), 40, c).error.is_posted());
  weft::arm_cont(c, 1);
  weft::free_comp(&cr);
  EXPECT_TRUE(cr.is_empty());
  EXPECT_EQ(r.runs.load(), 0);
  weft::post_send(0, &out, sizeof(out), 40, weft::comp_t{});
  for (int i = 0; i < 10000 && r.runs == 0; ++i) weft::progress();
  EXPECT_EQ(r.runs.load(), 1);  // from progress, although poll_only: nobody can test it now
  EXPECT_NE(error_of([&] { weft::cont_request_test(stale); }).find("stale"), std::string::npos);
}

// A recycled continuation (its handle carries a generation tag) completing an active
// message that waits in the backlog: the core reads it through the tag when the post is
// made and again when the backlog retries it, and it runs once with the backlog's status.
TEST_F(Cont, BackloggedPostWithARecycledContinuation) {
  weft::device_t d = weft::alloc_device_x().inbox_depth(2)();
  weft::comp_t cq = weft::alloc_cq();
  const weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  weft::comp_t first = weft::alloc_cont_x(cr, note, &r)();
  ASSERT_TRUE(weft::arm_cont(first, 0).is_done());  // handed back to this thread's cache
  weft::status_t st[1];
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r).statuses(st, 1)();
  ASSERT_NE(reinterpret_cast<uintptr_t>(c.p) >> 48, 0u) << "not the recycled memory";
  int v[3] = {1, 2, 3};
  ASSERT_TRUE(weft::post_am_x(0, &v[0], 4, weft::comp_t{}, rc).device(d)().error.is_done());
  ASSERT_TRUE(weft::post_am_x(0, &v[1], 4, weft::comp_t{}, rc).device(d)().error.is_done());
  const weft::status_t bl = weft::post_am_x(0, &v[2], 4, c, rc).device(d).allow_retry(false)();
  ASSERT_EQ(int(bl.error.errorcode), int(weft::errorcode_t::posted_backlog));
  EXPECT_TRUE(weft::arm_cont(c, 1).is_posted());
  int got = 0, sum = 0;
  for (int i = 0; i < 100000 && (got < 3 || !weft::cont_request_test(cr)); ++i) {
    weft::progress_x().device(d)();
    const weft::status_t m = weft::cq_pop(cq);
    if (!m.error.is_done()) continue;
    sum += *static_cast<int*>(m.buf);
    std::free(m.buf);
    ++got;
  }
  EXPECT_EQ(got, 3);
  EXPECT_EQ(sum, 6);
  EXPECT_EQ(r.runs.load(), 1);
  EXPECT_EQ(r.count, 1u);
  EXPECT_EQ(int(st[0].error.errorcode), int(weft::errorcode_t::done_backlog));
  EXPECT_EQ(st[0].buf, &v[2]);
  weft::free_comp(&cr);
  weft::free_comp(&cq);
  weft::free_device(&d);
}

TEST_F(Cont, BadInputIsRefusedClearly) {
  EXPECT_NE(error_of([] {
              weft::alloc_cont_request_x().poll_only(true).max_poll(0)();
            }).find("alloc_cont_request: max_poll = 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { weft::alloc_cont_request_x().max_poll(-2)(); }).find("max_poll = -2"),
            std::string::npos);
  weft::comp_t cr = weft::alloc_cont_request();
  record r;
  EXPECT_NE(error_of([&] { weft::alloc_cont_x(cr, nullptr, &r)(); }).find("alloc_cont: fn"),
            std::string::npos);
  weft::comp_t cq = weft::alloc_cq();
  EXPECT_NE(error_of([&] { weft::alloc_cont_x(cq, note, &r)(); }).find("not a continuation"),
            std::string::npos);
  uint64_t in = 0;
  EXPECT_NE(error_of([&] { weft::post_recv(0, &in, 8, 1, cr); }).find("a continuation request"),
            std::string::npos);
  weft::comp_t c = weft::alloc_cont_x(cr, note, &r)();
  EXPECT_NE(error_of([&] { weft::arm_cont(c, 1); }).find("arm_cont: nposted = 1: more than"),
            std::string::npos);
  weft::free_comp(&c);  // a refused arm leaves it unarmed: it can be withdrawn
  weft::comp_t c2 = weft::alloc_cont_x(cr, note, &r)();
  EXPECT_TRUE(weft::arm_cont(c2, 0).is_done());
  EXPECT_NE(error_of([&] { weft::arm_cont(c2, 0); }).find("stale"), std::string::npos);
  weft::status_t st[1];
  weft::comp_t c3 = weft::alloc_cont_x(cr, note, &r).statuses(st, 1)();
  EXPECT_NE(error_of([&] { weft::arm_cont(c3, 2); }).find("capacity of its statuses array, 1"),
            std::string::npos);
  ASSERT_TRUE(weft::post_recv(0, &in, 8, 2, c3).error.is_posted());
  EXPECT_TRUE(weft::arm_cont(c3, 1).is_posted());  // the right count after a refusal
  EXPECT_NE(error_of([&] { weft::arm_cont(c3, 1); }).find("armed twice"), std::string::npos);
  EXPECT_NE(error_of([&] { weft::free_comp(&c3); }).find("operations that signal it"),
            std::string::npos);
  EXPECT_TRUE(weft::cancel_recv(0, &in, 2, c3));
  weft::comp_t c4 = weft::alloc_cont_x(cr, note, &r)();
  ASSERT_EQ(weft::comp_signal(c4, weft::status_t{}).errorcode, weft::errorcode_t::done);
  ASSERT_EQ(weft::comp_signal(c4, weft::status_t{}).errorcode, weft::errorcode_t::done);
  EXPECT_NE(error_of([&] { weft::arm_cont(c4, 1); }).find("already signalled it: 2"),
            std::string::npos);
  EXPECT_TRUE(weft::arm_cont(c4, 2).is_done());
  weft::comp_t c5 = weft::alloc_cont_x(cr, note, &r)();
  weft::free_comp(&c5);  // never armed, nothing posted: withdrawn
  weft::cont_request_wait(cr);
  EXPECT_EQ(r.runs.load(), 1);  // c3's, cancelled
  weft::free_comp(&cq);
  weft::free_comp(&cr);
}

struct self_test {
  weft::comp_t cr;
  std::string error;
};
void tests_itself(weft::status_t*, size_t, void* data) {
  auto* t = static_cast<self_test*>(data);
  t->error = error_of([&] { weft::cont_request_test(t->cr); });
}

TEST_F(Cont, OneTesterAtATime) {
  self_test t;
  t.cr = weft::alloc_cont_request_x().enqueue_complete(true)();
  weft::arm_cont(weft::alloc_cont_x(t.cr, tests_itself, &t)(), 0);
  weft::cont_request_wait(t.cr);
  EXPECT_NE(t.error.find("cont_request_test: request = "), std::string::npos) << t.error;
  EXPECT_NE(t.error.find("one tester at a time"), std::string::npos) << t.error;
  weft::free_comp(&t.cr);
}

// Many threads attach continuations to one request tested by one thread; two requests each
// tested by its own thread. Every callback runs exactly once.
void count_run(weft::status_t*, size_t, void* data) {
  static_cast<std::atomic<int>*>(data)->fetch_add(1);
}

// The buffers of one attaching thread: they outlive its operations, and what arrived is
// checked only once the request is idle (every continuation ran).
struct attach_buffers {
  std::vector<uint64_t> in, out;
  explicit attach_buffers(int n) : in(size_t(n), 0), out(size_t(n), 7) {}
  void expect_arrived() const {
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(in[i], 7u) << i;
  }
};

void attach_many(weft::comp_t cr, int thread, int per_thread, std::vector<std::atomic<int>>& runs,
                 std::atomic<int>& immediate, attach_buffers& b) {
  std::vector<uint64_t>&in = b.in, &out = b.out;
  const int group = 4;
  for (int i = 0; i < per_thread; i += group) {
    weft::comp_t c = weft::alloc_cont_x(cr, count_run, &runs[size_t(i)])();
    int posted = 0;
    for (int k = i; k < i + group && k < per_thread; ++k) {
      const weft::tag_t tag = weft::tag_t(thread * 1000000 + k);
      while (true) {
        weft::status_t s = weft::post_recv(0, &in[size_t(k)], 8, tag, c);
        if (!s.error.is_retry()) {
          posted += s.error.is_posted();
          break;
        }
        weft::progress();
      }
      while (true) {
        weft::status_t s = weft::post_send(0, &out[size_t(k)], 8, tag, c);
        if (!s.error.is_retry()) {
          posted += s.error.is_posted();
          break;
        }
        weft::progress();
      }
    }
    if (weft::arm_cont(c, size_t(posted)).is_done()) {
      runs[size_t(i)].fetch_add(1);
      immediate.fetch_add(1);
    }
    weft::progress();
  }
}

TEST_F(Cont, ManyThreadsAttachEveryCallbackOnce) {
  const int threads = 4, per_thread = 6250;  // 4 x 6250 x 2 = 50 000 operations
  weft::comp_t cr = weft::alloc_cont_request_x().poll_only(true)();
  std::vector<std::vector<std::atomic<int>>> runs(threads);
  for (auto& v : runs) v = std::vector<std::atomic<int>>(per_thread);
  std::atomic<int> immediate{0}, attached{0};
  std::vector<attach_buffers> bufs(threads, attach_buffers(per_thread));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      attach_many(cr, t, per_thread, runs[size_t(t)], immediate, bufs[size_t(t)]);
      attached.fetch_add(1);
    });
  while (attached < threads || !weft::cont_request_test(cr)) {
  }
  for (auto& t : ts) t.join();
  for (auto& b : bufs) b.expect_arrived();
  int total = 0;
  for (auto& v : runs)
    for (int i = 0; i < per_thread; i += 4) {
      EXPECT_EQ(v[size_t(i)].load(), 1) << i;
      total += v[size_t(i)];
    }
  EXPECT_EQ(total, threads * ((per_thread + 3) / 4));
  weft::free_comp(&cr);
}

TEST_F(Cont, TwoRequestsTwoTesters) {
  const int per_thread = 12500;  // 2 x 12500 x 2 = 50 000 operations
  weft::comp_t crs[2] = {weft::alloc_cont_request(), weft::alloc_cont_request_x().max_poll(8)()};
  std::vector<std::vector<std::atomic<int>>> runs(2);
  for (auto& v : runs) v = std::vector<std::atomic<int>>(per_thread);
  std::atomic<int> immediate{0};
  std::vector<attach_buffers> bufs(2, attach_buffers(per_thread));
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      attach_many(crs[t], t, per_thread, runs[size_t(t)], immediate, bufs[size_t(t)]);
      weft::cont_request_wait(crs[t]);
      bufs[size_t(t)].expect_arrived();
    });
  for (auto& t : ts) t.join();
  for (auto& v : runs)
    for (int i = 0; i < per_thread; i += 4) EXPECT_EQ(v[size_t(i)].load(), 1) << i;
  weft::free_comp(&crs[0]);
  weft::free_comp(&crs[1]);
}

}  // namespace
