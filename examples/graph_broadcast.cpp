// SPDX-License-Identifier: BSD-3-Clause
// A non-blocking broadcast built from a completion graph: a binomial tree in which each rank
// receives from its parent, then forwards to its children and checks the data; the graph
// runs while the rank does other work, and one graph per root is built once and restarted
// every round. Ends with the non-blocking barrier, itself a graph inside Weft.
//   weftrun -n 4 ./graph_broadcast [bytes] [rounds]
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <weft/weft.hpp>

namespace {

unsigned char byte_of(size_t i, int root, int round) {
  return (unsigned char)(i * 7 + size_t(root) * 31 + size_t(round) * 13);
}

struct broadcast {
  weft::comp_t graph;
  int root;
  std::vector<unsigned char>* data;
  int round = 0;
  bool ok = true;
};

// Builds the graph of one root: receive (unless root) -> sends to children, and -> check.
void build(broadcast& b, int me, int n, size_t bytes) {
  const int v = (me - b.root + n) % n;  // rank relative to the root
  const weft::tag_t tag = weft::tag_t(100 + b.root);
  void* buf = b.data->data();
  b.graph = weft::alloc_graph();
  weft::graph_node_t recv;
  int top = 1;  // children are v + 2^k for every 2^k above v
  while (top <= v) top <<= 1;
  if (v != 0) {
    const int parent = (v - top / 2 + b.root) % n;
    recv = weft::graph_add_node_op(b.graph, weft::post_recv_x(parent, buf, bytes, tag, b.graph));
    auto check = weft::graph_add_node(b.graph, [&b, bytes](void*) {
      for (size_t i = 0; i < bytes; ++i)
        if ((*b.data)[i] != byte_of(i, b.root, b.round)) b.ok = false;
      weft::status_t s;
      s.error = weft::errorcode_t::done;
      return s;
    });
    weft::graph_add_edge(b.graph, recv, check);
  }
  for (int step = top; v + step < n; step <<= 1) {
    const int child = (v + step + b.root) % n;
    auto send =
        weft::graph_add_node_op(b.graph, weft::post_send_x(child, buf, bytes, tag, b.graph));
    if (!recv.is_empty()) weft::graph_add_edge(b.graph, recv, send);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? strtoull(argv[1], nullptr, 0) : 65536;
  const int rounds = argc > 2 ? atoi(argv[2]) : 20;
  weft::g_runtime_init();
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  std::vector<std::vector<unsigned char>> data(static_cast<size_t>(n),
                                               std::vector<unsigned char>(bytes));
  std::vector<broadcast> bc(static_cast<size_t>(n));
  for (int root = 0; root < n; ++root) {
    bc[size_t(root)].root = root;
    bc[size_t(root)].data = &data[size_t(root)];
    build(bc[size_t(root)], me, n, bytes);
  }
  long overlapped_work = 0;
  bool all_ok = true;
  for (int round = 0; round < rounds; ++round) {
    broadcast& b = bc[size_t(round % n)];
    b.round = round;
    if (me == b.root)
      for (size_t i = 0; i < bytes; ++i) (*b.data)[i] = byte_of(i, b.root, round);
    weft::graph_start(b.graph);
    weft::status_t s;
    while (!weft::graph_test(b.graph, &s)) {
      ++overlapped_work;  // the task runtime's other work would go here
      weft::progress();
    }
    if (s.error.is_error()) {
      fprintf(stderr, "rank %d: broadcast from %d failed: %s at node '%s'\n", me, b.root,
              s.error.get_str(), weft::graph_get_failed_node(b.graph).get_attr_name());
      return 1;
    }
    all_ok = all_ok && b.ok;
  }
  // Finish with the non-blocking barrier, progressing while it completes.
  weft::comp_t done = weft::alloc_sync();
  weft::barrier_x().comp(done)();
  weft::status_t s;
  while (!weft::sync_test(done, &s)) weft::progress();
  printf(
      "rank %d: %d broadcasts of %zu bytes from rotating roots: %s (%ld progress calls "
      "overlapped)\n",
      me, rounds, bytes, all_ok ? "all data correct" : "WRONG DATA", overlapped_work);
  weft::free_comp(&done);
  for (auto& b : bc) weft::free_comp(&b.graph);
  weft::g_runtime_fina();
  return all_ok ? 0 : 1;
}
