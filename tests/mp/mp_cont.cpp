// SPDX-License-Identifier: BSD-3-Clause
// Continuations across processes: one continuation over every kind of post that takes a
// local completion (send, receive, active message, put and get with and without
// notification, buffer lists, barrier, graph), each checking the bytes that arrived from
// inside its callback; a poll-only request tested by the main thread while another thread
// attaches; a chained request waiting for the whole phase.
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

constexpr size_t kBig = 100000;  // past the eager limit: every transfer returns posted

struct phase {
  int me, n, to, from;
  std::vector<unsigned char> out, in, window, local;
  std::vector<unsigned char> list_in;
  weft::mr_t mr;
  weft::rmr_t to_rmr;
  std::atomic<int> runs{0}, bad{0};
};

// Every continuation: its statuses must all be done (or posted for a graph's run); then
// the bytes named by the user data's check.
struct check_ctx {
  phase* p;
  size_t expect;
  std::function<bool()> bytes_ok;
};

void on_group(weft::status_t* st, size_t n, void* data) {
  auto* c = static_cast<check_ctx*>(data);
  if (n != c->expect) c->p->bad.fetch_add(1);
  for (size_t i = 0; st && i < n; ++i)
    if (st[i].error.is_error()) c->p->bad.fetch_add(1);
  if (!c->bytes_ok()) c->p->bad.fetch_add(1);
  c->p->runs.fetch_add(1);
}

// Posts (until not retry) and counts those that returned posted.
template <typename Post>
size_t posted(Post&& post) {
  return post_until(std::forward<Post>(post)).error.is_posted() ? 1 : 0;
}

weft::rmr_t exchange(phase& p, weft::rmr_t mine) {
  weft::rmr_t theirs{};
  weft::comp_t cr = weft::alloc_cont_request();
  check_ctx ctx{&p, 0, [] { return true; }};
  weft::comp_t c = weft::alloc_cont_x(cr, on_group, &ctx)();
  size_t n = posted([&] { return weft::post_recv(p.to, &theirs, sizeof(theirs), 900, c); });
  n += posted([&] { return weft::post_send(p.from, &mine, sizeof(mine), 900, c); });
  ctx.expect = n;
  if (weft::arm_cont(c, n).is_done()) p.runs.fetch_add(1);
  deadline d;
  while (!weft::cont_request_test(cr)) d.check("the exchange's continuation");
  weft::free_comp(&cr);
  return theirs;
}

}  // namespace

int scenario_cont() {
  phase p;
  p.me = weft::get_rank_me();
  p.n = weft::get_rank_n();
  p.to = (p.me + 1) % p.n;
  p.from = (p.me - 1 + p.n) % p.n;
  p.out.resize(kBig);
  p.in.assign(kBig, 0);
  p.window.assign(2 * kBig, 0);
  p.local.assign(2 * kBig, 0);
  p.list_in.assign(kBig, 0);
  fill(p.out.data(), kBig, size_t(p.me));
  fill(p.window.data(), kBig, size_t(100 + p.me));  // what the previous rank gets
  p.mr = weft::register_memory(p.window.data(), p.window.size());
  p.to_rmr = exchange(p, weft::get_rmr(p.mr));
  weft::comp_t am_cq = weft::alloc_cq();
  weft::rcomp_t am_rc = weft::register_rcomp(am_cq);
  weft::comp_t notes = weft::alloc_cq();
  weft::rcomp_t note_rc = weft::register_rcomp(notes);
  weft::barrier();

  weft::comp_t phase_cr = weft::alloc_cont_request_x().poll_only(true)();
  weft::comp_t top = weft::alloc_cont_request();
  std::vector<std::unique_ptr<check_ctx>> ctxs;
  auto group = [&](size_t expect_hint, std::function<bool()> ok) {
    ctxs.push_back(std::make_unique<check_ctx>(check_ctx{&p, expect_hint, std::move(ok)}));
    return ctxs.back().get();
  };
  int immediate = 0;
  auto arm = [&](weft::comp_t c, check_ctx* ctx, size_t n) {
    ctx->expect = n;
    if (weft::arm_cont(c, n).is_done()) {
      ++immediate;
      on_group(nullptr, n, ctx);
    }
  };
  // The whole phase, watched from another request (chaining).
  std::atomic<int> phase_done{0};
  check_ctx* w_ctx = group(1, [&] { return phase_done.fetch_add(1) == 0; });
  weft::comp_t watcher = weft::alloc_cont_x(top, on_group, w_ctx)();

  // 1. Send and receive (rendezvous), one continuation (continueall).
  weft::status_t st1[2];
  check_ctx* c1 = group(2, [&] { return verify(p.in.data(), kBig, size_t(p.from)) == SIZE_MAX; });
  weft::comp_t k1 = weft::alloc_cont_x(phase_cr, on_group, c1).statuses(st1, 2)();
  size_t n1 = posted([&] { return weft::post_recv(p.from, p.in.data(), kBig, 1, k1); });
  n1 += posted([&] { return weft::post_send(p.to, p.out.data(), kBig, 1, k1); });
  arm(k1, c1, n1);
  CHECK(weft::watch_cont_request(phase_cr, watcher).is_posted());
  arm(watcher, w_ctx, 1);

  // 2. An active message's local side.
  check_ctx* c2 = group(1, [] { return true; });
  weft::comp_t k2 = weft::alloc_cont_x(phase_cr, on_group, c2)();
  arm(k2, c2, posted([&] { return weft::post_am(p.to, p.out.data(), kBig, k2, am_rc); }));

  // 3. Put with and without notification, then get: the window's second half at the next
  // rank receives our bytes; the get reads the next rank's first half.
  check_ctx* c3 =
      group(3, [&] { return verify(p.local.data() + kBig, kBig, size_t(100 + p.to)) == SIZE_MAX; });
  weft::comp_t k3 = weft::alloc_cont_x(phase_cr, on_group, c3)();
  size_t n3 =
      posted([&] { return weft::post_put(p.to, p.out.data(), kBig / 2, k3, kBig, p.to_rmr); });
  n3 += posted([&] {
    return weft::post_put_x(p.to, p.out.data() + kBig / 2, kBig / 2, k3, kBig + kBig / 2, p.to_rmr)
        .remote_comp(note_rc)();
  });
  n3 += posted([&] { return weft::post_get(p.to, p.local.data() + kBig, kBig, k3, 0, p.to_rmr); });
  arm(k3, c3, n3);

  // 4. Buffer lists: a send gathered from two halves, scattered into two at the receiver.
  check_ctx* c4 =
      group(2, [&] { return verify(p.list_in.data(), kBig, size_t(p.from)) == SIZE_MAX; });
  weft::comp_t k4 = weft::alloc_cont_x(phase_cr, on_group, c4)();
  weft::buffer_t recv_l[2] = {{p.list_in.data(), kBig / 2},
                              {p.list_in.data() + kBig / 2, kBig / 2}};
  weft::buffer_t send_l[2] = {{p.out.data(), kBig / 3}, {p.out.data() + kBig / 3, kBig - kBig / 3}};
  size_t n4 =
      posted([&] { return weft::post_recv_x(p.from, nullptr, 0, 2, k4).buffers(recv_l, 2)(); });
  n4 += posted([&] { return weft::post_send_x(p.to, nullptr, 0, 2, k4).buffers(send_l, 2)(); });
  arm(k4, c4, n4);

  // 5. A barrier and 6. a graph of one receive and one send.
  check_ctx* c5 = group(1, [] { return true; });
  weft::comp_t k5 = weft::alloc_cont_x(phase_cr, on_group, c5)();
  arm(k5, c5, weft::barrier_x().comp(k5)().error.is_posted() ? 1 : 0);
  std::vector<uint64_t> g_in(1, 0), g_out(1, uint64_t(p.me) + 500);
  check_ctx* c6 = group(1, [&] { return g_in[0] == uint64_t(p.from) + 500; });
  weft::comp_t k6 = weft::alloc_cont_x(phase_cr, on_group, c6)();
  weft::comp_t g = weft::alloc_graph_x().comp(k6)();
  weft::graph_add_node_op(g, weft::post_recv_x(p.from, g_in.data(), 8, 3, g));
  weft::graph_add_node_op(g, weft::post_send_x(p.to, g_out.data(), 8, 3, g));
  weft::graph_start(g);
  arm(k6, c6, 1);

  // 7. Another thread attaches to the same request meanwhile (one tester: this thread).
  std::vector<uint64_t> t_in(64, 0), t_out(64);
  check_ctx* c7 = group(0, [&] {
    for (size_t i = 0; i < 64; ++i)
      if (t_in[i] != uint64_t(p.from) * 1000 + i) return false;
    return true;
  });
  std::thread attacher([&] {
    weft::comp_t k7 = weft::alloc_cont_x(phase_cr, on_group, c7)();
    size_t n7 = 0;
    for (size_t i = 0; i < 64; ++i) {
      t_out[i] = uint64_t(p.me) * 1000 + i;
      n7 += posted([&] { return weft::post_recv(p.from, &t_in[i], 8, weft::tag_t(100 + i), k7); });
      n7 += posted([&] { return weft::post_send(p.to, &t_out[i], 8, weft::tag_t(100 + i), k7); });
    }
    c7->expect = n7;
    if (weft::arm_cont(k7, n7).is_done()) on_group(nullptr, n7, c7);
  });
  deadline d;
  while (!weft::cont_request_test(top)) {
    weft::cont_request_test(phase_cr);
    d.check("the phase's continuations");
  }
  attacher.join();
  while (!weft::cont_request_test(phase_cr)) d.check("the attaching thread's continuation");
  CHECK_EQ(p.runs.load(), 9);  // the exchange's, 7 groups and the watcher
  CHECK_EQ(p.bad.load(), 0);
  CHECK_EQ(phase_done.load(), 1);
  for (size_t i = 0; i < n1; ++i) CHECK(st1[i].error.is_done());
  weft::status_t am = wait_cq(am_cq);  // the remote sides arrived too
  CHECK(am.size == kBig && verify(am.buf, kBig, size_t(p.from)) == SIZE_MAX);
  std::free(am.buf);
  wait_cq(notes);
  CHECK(verify(p.window.data() + kBig, kBig, size_t(p.from)) == SIZE_MAX);
  weft::barrier();
  weft::free_comp(&g);
  weft::free_comp(&phase_cr);
  weft::free_comp(&top);
  weft::deregister_rcomp(am_rc);
  weft::deregister_rcomp(note_rc);
  weft::free_comp(&am_cq);
  weft::free_comp(&notes);
  weft::deregister_memory(&p.mr);
  (void)immediate;
  return finish("cont");
}
