// SPDX-License-Identifier: BSD-3-Clause
// Completion graphs (LCI paper 3.2.5): a completion object whose nodes are communication
// operations or user functions and whose edges give a partial order. A node starts once
// every node before it finished; a finished node signals the nodes after it. The graph
// finishes when every node finished or was skipped; then it can be started again.
//
//   weft::comp_t g = weft::alloc_graph();
//   auto r = weft::graph_add_node_op(g, weft::post_recv_x(peer, buf, n, tag, g));
//   auto f = weft::graph_add_node(g, [](void*) -> weft::status_t { ...; return {}; });
//   weft::graph_add_edge(g, r, f);
//   weft::graph_start(g);
//   weft::status_t s = weft::graph_wait(g);  // or graph_test(g, &s) between other work
//
// A node whose operation or function fails (an error or cancelled status) marks the graph
// failed; the nodes after it are skipped, the others still run (their buffers are in
// use), and the graph's status is the failing node's status, with the node itself given by
// graph_get_failed_node(). See docs/api.md.
#pragma once

#include <functional>
#include <string>

#include "weft/off.hpp"
#include "weft/types.hpp"

namespace weft {

struct graph_node_t {
  impl::graph_node* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  // The name given with graph_add_node_x(...).name() (or "node <i>"), and the value.
  WEFT_API const char* get_attr_name() const;
  WEFT_API void* get_attr_value() const;
  // The status the node finished with in the last run (retry while it has not).
  WEFT_API status_t get_attr_status() const;
};

// A function node: returns done (finished), an error (failed), retry (called again at the
// next graph_test or graph_wait), or posted (finished later by graph_node_mark_complete).
using graph_node_fn_t = std::function<status_t(void* value)>;
// Runs when the edge's source finished successfully, before the target may start.
using graph_edge_fn_t =
    std::function<void(status_t source_status, void* source_value, void* target_value)>;

namespace detail {
struct graph_args {
  runtime_t runtime;
  comp_t comp;  // signalled with the graph's status each time it finishes
  void* user_context = nullptr;
};
WEFT_API comp_t alloc_graph_impl(const graph_args& a);
struct graph_node_args {
  comp_t graph;
  graph_node_fn_t fn;
  bool is_op = false;
  comm_args op;
  void* value = nullptr;
  const char* name = nullptr;
};
WEFT_API graph_node_t graph_add_node_impl(const graph_node_args& a);
struct graph_edge_args {
  comp_t graph;
  graph_node_t source;
  graph_node_t target;
  graph_edge_fn_t fn;
};
WEFT_API void graph_add_edge_impl(const graph_edge_args& a);
WEFT_API status_t graph_wait_impl(comp_t graph, const progress_args& a);
}  // namespace detail

#define WEFT_GRAPH_ARG(type, name)      \
  auto& name(type v) {                  \
    a_.name = v;                        \
    return static_cast<self_t&>(*this); \
  }

class alloc_graph_x {
  using self_t = alloc_graph_x;
  detail::graph_args a_;

 public:
  WEFT_GRAPH_ARG(runtime_t, runtime)
  WEFT_GRAPH_ARG(comp_t, comp)
  // Given back as the user_context of the graph's status.
  WEFT_GRAPH_ARG(void*, user_context)
  comp_t operator()() const { return detail::alloc_graph_impl(a_); }
  comp_t call() const { return (*this)(); }
};

class graph_add_node_x {
  using self_t = graph_add_node_x;
  detail::graph_node_args a_;

 public:
  graph_add_node_x(comp_t graph, graph_node_fn_t fn) {
    a_.graph = graph;
    a_.fn = std::move(fn);
  }
  WEFT_GRAPH_ARG(void*, value)
  WEFT_GRAPH_ARG(const char*, name)  // copied
  graph_node_t operator()() const { return detail::graph_add_node_impl(a_); }
  graph_node_t call() const { return (*this)(); }
};

// An operation node: `op` is any post_*_x object built with the graph (or an empty comp)
// as its completion object. The graph posts it when the node starts (a full peer queue
// sends it through the backlog, so it never returns retry to the graph).
class graph_add_node_op_x {
  using self_t = graph_add_node_op_x;
  detail::graph_node_args a_;

 public:
  template <typename Op>
  graph_add_node_op_x(comp_t graph, const comm_x_base<Op>& op) {
    a_.graph = graph;
    a_.is_op = true;
    a_.op = op.get_args();
  }
  WEFT_GRAPH_ARG(void*, value)
  WEFT_GRAPH_ARG(const char*, name)
  graph_node_t operator()() const { return detail::graph_add_node_impl(a_); }
  graph_node_t call() const { return (*this)(); }
};

class graph_add_edge_x {
  using self_t = graph_add_edge_x;
  detail::graph_edge_args a_;

 public:
  graph_add_edge_x(comp_t graph, graph_node_t source, graph_node_t target) {
    a_.graph = graph;
    a_.source = source;
    a_.target = target;
  }
  WEFT_GRAPH_ARG(graph_edge_fn_t, fn)
  void operator()() const { detail::graph_add_edge_impl(a_); }
  void call() const { (*this)(); }
};

// Progresses a device (the default one unless given) until the graph finished.
class graph_wait_x {
  using self_t = graph_wait_x;
  comp_t graph_;
  detail::progress_args a_;

 public:
  explicit graph_wait_x(comp_t graph) : graph_(graph) {}
  WEFT_GRAPH_ARG(runtime_t, runtime)
  WEFT_GRAPH_ARG(device_t, device)
  status_t operator()() const { return detail::graph_wait_impl(graph_, a_); }
  status_t call() const { return (*this)(); }
};

#undef WEFT_GRAPH_ARG

inline comp_t alloc_graph() {
  return alloc_graph_x()();
}
inline graph_node_t graph_add_node(comp_t graph, graph_node_fn_t fn, void* value = nullptr) {
  return graph_add_node_x(graph, std::move(fn)).value(value)();
}
template <typename Op>
graph_node_t graph_add_node_op(comp_t graph, const comm_x_base<Op>& op) {
  return graph_add_node_op_x(graph, op)();
}
inline void graph_add_edge(comp_t graph, graph_node_t source, graph_node_t target) {
  graph_add_edge_x(graph, source, target)();
}
// Starts every node without a predecessor. Refused while the graph runs; a finished graph
// starts again from the beginning (restart).
WEFT_API void graph_start(comp_t graph);
// True once the graph finished (until it is started again); fills *status (may be nullptr)
// with done, or the failing node's status. Calls function nodes that asked for a retry.
WEFT_API bool graph_test(comp_t graph, status_t* status);
inline status_t graph_wait(comp_t graph) {
  return graph_wait_x(graph)();
}
// Finishes a function node that returned posted.
WEFT_API void graph_node_mark_complete(graph_node_t node, status_t status);
// The first node that failed in the last run; empty when none did.
WEFT_API graph_node_t graph_get_failed_node(comp_t graph);

}  // namespace weft
