// SPDX-License-Identifier: BSD-3-Clause
// Completion graphs: order, edge functions, restart, failure reaching the graph with the
// failing node named, retry and posted function nodes, communication nodes around a ring,
// and the errors of misuse.
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

weft::status_t done_status() {
  weft::status_t s;
  s.error = weft::errorcode_t::done;
  return s;
}

weft::status_t wait_graph(weft::comp_t g) {
  deadline d;
  weft::status_t s;
  while (!weft::graph_test(g, &s)) {
    weft::progress();
    d.check("a completion graph");
  }
  return s;
}

// A diamond of function nodes, run several times: order, values, edge functions.
void local_graphs() {
  std::vector<int> order;
  std::atomic<int> edge_calls{0};
  weft::comp_t g = weft::alloc_graph();
  auto record = [&](void* v) -> weft::status_t {
    order.push_back(int(reinterpret_cast<intptr_t>(v)));
    return done_status();
  };
  auto a = weft::graph_add_node_x(g, record).value((void*)1).name("A")();
  auto b = weft::graph_add_node_x(g, record).value((void*)2).name("B")();
  auto c = weft::graph_add_node_x(g, record).value((void*)3).name("C")();
  auto d = weft::graph_add_node_x(g, record).value((void*)4).name("D")();
  weft::graph_add_edge(g, a, b);
  weft::graph_add_edge(g, a, c);
  weft::graph_add_edge_x(g, b, d).fn([&](weft::status_t s, void* from, void* to) {
    CHECK(s.error.is_done());
    CHECK(from == (void*)2 && to == (void*)4);
    edge_calls.fetch_add(1);
  })();
  weft::graph_add_edge(g, c, d);
  for (int run = 0; run < 3; ++run) {
    order.clear();
    weft::graph_start(g);
    weft::status_t s;
    CHECK(weft::graph_test(g, &s));  // function nodes finish inside graph_start
    CHECK(s.error.is_done());
    CHECK_EQ(order.size(), size_t(4));
    if (order.size() == 4) {
      CHECK_EQ(order[0], 1);
      CHECK_EQ(order[3], 4);
      CHECK((order[1] == 2 && order[2] == 3) || (order[1] == 3 && order[2] == 2));
    }
    CHECK(weft::graph_get_failed_node(g).is_empty());
  }
  CHECK_EQ(edge_calls.load(), 3);
  CHECK(std::string(d.get_attr_name()) == std::string("D"));
  CHECK(d.get_attr_value() == (void*)4);

  // A cycle is refused before anything runs.
  weft::graph_add_edge(g, d, a);
  std::string e = error_of([&] { weft::graph_start(g); });
  CHECK(contains(e, "graph_start") && contains(e, "cycle"));
  weft::free_comp(&g);

  // A failing node: what follows it is skipped, the rest runs, the graph reports it.
  bool fail_b = true;
  int ran_c = 0, ran_d = 0;
  g = weft::alloc_graph();
  a = weft::graph_add_node(g, [](void*) { return done_status(); });
  b = weft::graph_add_node_x(g, [&](void*) {
        weft::status_t s = done_status();
        if (fail_b) {
          s.error = weft::errorcode_t::error_nomem;
          s.rank = 77;
        }
        return s;
      }).name("the failing one")();
  c = weft::graph_add_node_x(g, [&](void*) {
        ++ran_c;
        return done_status();
      }).name("after the failing one")();
  d = weft::graph_add_node(g, [&](void*) {
    ++ran_d;
    return done_status();
  });
  weft::graph_add_edge(g, a, b);
  weft::graph_add_edge(g, b, c);
  weft::graph_add_edge(g, a, d);
  weft::graph_start(g);
  weft::status_t s = wait_graph(g);
  CHECK(s.error == weft::errorcode_t::error_nomem);
  CHECK_EQ(s.rank, 77);
  CHECK_EQ(ran_c, 0);
  CHECK_EQ(ran_d, 1);
  weft::graph_node_t f = weft::graph_get_failed_node(g);
  CHECK(!f.is_empty() && std::string(f.get_attr_name()) == "the failing one");
  CHECK(c.get_attr_status().error.is_cancelled());  // skipped
  // Restart once the cause is gone: everything runs.
  fail_b = false;
  weft::graph_start(g);
  s = wait_graph(g);
  CHECK(s.error.is_done());
  CHECK_EQ(ran_c, 1);
  CHECK_EQ(ran_d, 2);
  CHECK(weft::graph_get_failed_node(g).is_empty());
  weft::free_comp(&g);

  // A function that asks for a retry is called again; one that returns posted is finished
  // from another thread with graph_node_mark_complete.
  int tries = 0;
  weft::graph_node_t later;
  std::thread finisher;
  g = weft::alloc_graph();
  auto r = weft::graph_add_node(g, [&](void*) {
    weft::status_t s = done_status();
    if (++tries < 3) s.error = weft::errorcode_t::retry;
    return s;
  });
  later = weft::graph_add_node(g, [&](void*) {
    finisher = std::thread([&] {
      usleep(20000);
      weft::status_t s = done_status();
      s.tag = 4242;
      weft::graph_node_mark_complete(later, s);
    });
    weft::status_t s;
    s.error = weft::errorcode_t::posted;
    return s;
  });
  weft::graph_add_edge(g, r, later);
  weft::graph_start(g);
  // Running: a second start, freeing, and adding nodes are refused.
  CHECK(contains(error_of([&] { weft::graph_start(g); }), "already running"));
  CHECK(contains(error_of([&] { weft::free_comp(&g); }), "running"));
  CHECK(contains(error_of([&] { weft::graph_add_node(g, [](void*) { return done_status(); }); }),
                 "running"));
  s = wait_graph(g);
  finisher.join();
  CHECK(s.error.is_done());
  CHECK_EQ(tries, 3);
  CHECK_EQ(later.get_attr_status().tag, weft::tag_t(4242));
  e = error_of([&] { weft::graph_node_mark_complete(later, done_status()); });
  CHECK(contains(e, "graph_node_mark_complete") && contains(e, "not waiting"));
  weft::free_comp(&g);

  // Misuse of a graph as an ordinary completion object.
  g = weft::alloc_graph();
  int x = 0;
  e = error_of([&] { weft::post_send(0, &x, sizeof(x), 1, g); });
  CHECK(contains(e, "post_send") && contains(e, "local_comp") && contains(e, "graph_add_node_op"));
  CHECK(contains(error_of([&] { (void)weft::comp_signal(g, done_status()); }),
                 "graph_node_mark_complete"));
  CHECK(contains(error_of([&] { weft::graph_test(g, nullptr); }), "never started"));
  weft::comp_t other = weft::alloc_graph();
  auto foreign = weft::graph_add_node(other, [](void*) { return done_status(); });
  auto mine = weft::graph_add_node(g, [](void*) { return done_status(); });
  CHECK(contains(error_of([&] { weft::graph_add_edge(g, mine, foreign); }), "another graph"));
  weft::comp_t cq = weft::alloc_cq();
  e = error_of([&] { weft::graph_add_node_op(g, weft::post_send_x(0, &x, sizeof(x), 1, cq)); });
  CHECK(contains(e, "graph_add_node_op") && contains(e, "op.local_comp"));
  CHECK(contains(error_of([&] { weft::graph_test(cq, nullptr); }), "not a graph"));
  weft::free_comp(&cq);
  weft::free_comp(&other);
  weft::free_comp(&g);
}

// Around the ring: receive from the previous rank, check, send to the next rank; the
// graph's completion also goes to a queue. Restarted with new data each round.
void ring_graphs() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  constexpr size_t kSize = 20000;  // above the eager limit: rendezvous
  std::vector<unsigned char> out(kSize), in(kSize);
  size_t round = 0;
  int checked = 0;
  weft::comp_t cq = weft::alloc_cq();
  int token = 0;
  weft::comp_t g = weft::alloc_graph_x().comp(cq).user_context(&token)();
  auto recv = weft::graph_add_node_op_x(g, weft::post_recv_x(from, in.data(), kSize, 31, g))
                  .name("recv from previous")();
  auto send = weft::graph_add_node_op(g, weft::post_send_x(to, out.data(), kSize, 31, {}));
  auto check = weft::graph_add_node(g, [&](void*) {
    CHECK_EQ(verify(in.data(), kSize, round * 100 + size_t(from)), SIZE_MAX);
    ++checked;
    return done_status();
  });
  weft::graph_add_edge_x(g, recv, check).fn([&](weft::status_t s, void*, void*) {
    CHECK_EQ(s.rank, from);
    CHECK_EQ(s.size, kSize);
    CHECK_EQ(s.tag, weft::tag_t(31));
  })();
  for (round = 0; round < 20; ++round) {
    fill(out.data(), kSize, round * 100 + size_t(me));
    weft::graph_start(g);
    weft::status_t s = wait_graph(g);
    CHECK(s.error.is_done());
    weft::status_t q = wait_cq(cq);
    CHECK(q.error.is_done());
    CHECK(q.user_context == &token);
    CHECK(send.get_attr_status().error.is_done() ||
          send.get_attr_status().error == weft::errorcode_t::done_backlog);
    weft::barrier();  // nobody sends round k+1 into a buffer still being checked
  }
  CHECK_EQ(checked, 20);
  weft::free_comp(&g);

  // A receive too small for the message fails the graph (truncated) and skips what follows;
  // an operation that cannot even be posted (a bad rank) fails with its node named.
  char small[10];
  g = weft::alloc_graph();
  auto r2 = weft::graph_add_node_op_x(g, weft::post_recv_x(from, small, sizeof(small), 32, g))
                .name("small recv")();
  int after = 0;
  auto next = weft::graph_add_node(g, [&](void*) {
    ++after;
    return done_status();
  });
  weft::graph_add_edge(g, r2, next);
  fill(out.data(), 100, 5);
  weft::status_t ss = post_until(
      [&] { return weft::post_send_x(to, out.data(), 100, 32, {}).allow_retry(true)(); });
  CHECK(!ss.error.is_error());
  weft::graph_start(g);
  weft::status_t s = wait_graph(g);
  CHECK(s.error == weft::errorcode_t::error_truncated);
  CHECK_EQ(s.rank, from);
  CHECK_EQ(after, 0);
  CHECK(std::string(weft::graph_get_failed_node(g).get_attr_name()) == std::string("small recv"));
  CHECK_EQ(verify(small, sizeof(small), 5), SIZE_MAX);
  weft::free_comp(&g);
  g = weft::alloc_graph();
  weft::graph_add_node_op_x(g, weft::post_send_x(n + 5, out.data(), 8, 1, g)).name("bad rank")();
  weft::graph_start(g);
  s = wait_graph(g);
  CHECK(s.error == weft::errorcode_t::error);
  CHECK(std::string(weft::graph_get_failed_node(g).get_attr_name()) == std::string("bad rank"));
  weft::free_comp(&g);
  weft::free_comp(&cq);
}

}  // namespace

int scenario_graph() {
  local_graphs();
  ring_graphs();
  // The non-blocking barrier is itself a graph: interleave several with other work.
  weft::comp_t cq = weft::alloc_cq();
  for (int i = 0; i < 10; ++i) {
    weft::status_t st = weft::barrier_x().comp(cq)();
    CHECK(st.error.is_posted());
  }
  for (int i = 0; i < 10; ++i) CHECK(wait_cq(cq).error.is_done());
  weft::free_comp(&cq);
  return finish("graph");
}
