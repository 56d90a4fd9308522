// SPDX-License-Identifier: BSD-3-Clause
// The public completion-graph calls: handle checks, then the graph.
#include "comp/graph.hpp"
#include "util/fail.hpp"

namespace weft {

using namespace impl;  // and through it detail, the headers' plumbing defined here

namespace {

graph_impl* as_graph(comp_t graph, const char* call) {
  comp_impl* g = util::live(graph.p, call, "graph");
  if (!g || g->kind != comp_kind::graph)
    util::fail(call, "graph", g ? "not a graph" : "empty", "pass a comp from alloc_graph");
  return static_cast<graph_impl*>(g);
}

graph_node* as_node(graph_node_t node, const char* call, const char* argument) {
  if (!node.p) util::fail(call, argument, "empty", "pass a node from graph_add_node");
  return util::live(node.p, call, argument);
}

}  // namespace

namespace detail {

comp_t alloc_graph_impl(const graph_args& a) {
  comp_impl* done = util::live(a.comp.p, "alloc_graph", "comp");
  return comp_t{util::tagged(static_cast<comp_impl*>(new graph_impl(done, a.user_context, false)))};
}

graph_node_t graph_add_node_impl(const graph_node_args& a) {
  const char* call = a.is_op ? "graph_add_node_op" : "graph_add_node";
  return graph_node_t{util::tagged(as_graph(a.graph, call)->add_node(a, call))};
}

void graph_add_edge_impl(const graph_edge_args& a) {
  graph_impl* g = as_graph(a.graph, "graph_add_edge");
  graph_node* s = as_node(a.source, "graph_add_edge", "source");
  graph_node* t = as_node(a.target, "graph_add_edge", "target");
  if (!g->owns(s)) util::fail("graph_add_edge", "source", s->name, "a node of another graph");
  if (!g->owns(t)) util::fail("graph_add_edge", "target", t->name, "a node of another graph");
  g->add_edge(s, t, a.fn);
}

}  // namespace detail

void graph_start(comp_t graph) {
  as_graph(graph, "graph_start")->start();
}

bool graph_test(comp_t graph, status_t* status) {
  return as_graph(graph, "graph_test")->test(status);
}

void graph_node_mark_complete(graph_node_t node, status_t status) {
  graph_node* n = as_node(node, "graph_node_mark_complete", "node");
  if (n->is_op)
    util::fail("graph_node_mark_complete", "node", n->name,
               "an operation node finishes when its operation does");
  if (!n->graph.finish_node(n, status))
    util::fail("graph_node_mark_complete", "node", n->name,
               "the node is not waiting to finish (it did not return posted, or finished)");
}

graph_node_t graph_get_failed_node(comp_t graph) {
  return graph_node_t{util::tagged(as_graph(graph, "graph_get_failed_node")->failed_node())};
}

const char* graph_node_t::get_attr_name() const {
  return as_node(*this, "get_attr_name", "node")->name.c_str();
}
void* graph_node_t::get_attr_value() const {
  return as_node(*this, "get_attr_value", "node")->value;
}
status_t graph_node_t::get_attr_status() const {
  return as_node(*this, "get_attr_status", "node")->status;
}

}  // namespace weft
