// SPDX-License-Identifier: BSD-3-Clause
// Barrier over all ranks of a device: a dissemination barrier (ceil(log2 n) rounds; in
// round k each rank sends to rank+2^k and receives from rank-2^k) built as a one-shot
// completion graph on Weft's own matching engine: every receive is posted at once, and
// the send of round k waits for the receive of round k-1. Nothing blocks and no thread is
// needed; the blocking form progresses until the graph finishes.
#include "comp/graph.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"

namespace weft::impl {

void start_barrier(device_impl& d, comp_impl* done) {
  const int n = d.rt.size(), me = d.rt.rank();
  const uint32_t epoch = d.barrier_epoch.fetch_add(1, std::memory_order_relaxed);
  auto* g = new graph_impl(done, nullptr, true);
  graph_node* previous_recv = nullptr;
  for (int round = 0; (1 << round) < n; ++round) {
    const int dist = 1 << round;
    graph_node_args send;
    send.is_op = true;
    send.op.rank = (me + dist) % n;
    send.op.tag = (tag_t(epoch) << 6) | tag_t(round);
    send.op.device.p = util::tagged(&d);  // the graph posts these as handles
    send.op.matching_engine.p = util::tagged(d.rt.engine(internal_engine_id));
    send.op.call_name = "barrier";
    graph_node_args recv = send;
    recv.op.direction = direction_t::IN;
    recv.op.rank = (me - dist % n + n) % n;
    graph_node* s = g->add_node(send, "barrier");
    graph_node* r = g->add_node(recv, "barrier");
    if (previous_recv) g->add_edge(previous_recv, s, nullptr);
    previous_recv = r;
  }
  g->start();
}

}  // namespace weft::impl
