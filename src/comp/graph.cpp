// SPDX-License-Identifier: BSD-3-Clause
#include "comp/graph.hpp"

#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::impl {

bool graph_node::signal(const status_t& s) {
  if (!graph.finish_node(this, s))
    WEFT_LOG(error, "graph node '%s' was signalled while it was not running", name.c_str());
  return true;
}

graph_impl::graph_impl(comp_impl* done, void* user_context, bool self_delete)
    : comp_impl(comp_kind::graph),
      done_(done),
      user_context_(user_context),
      self_delete_(self_delete) {}

bool graph_impl::signal(const status_t& s) {
  WEFT_LOG(error,
           "a completion graph was signalled directly (rank %d, %s); operations join a graph "
           "through graph_add_node_op, function nodes finish through graph_node_mark_complete",
           s.rank, s.error.get_str());
  return true;
}

void graph_impl::check_idle(const char* call) const {
  if (state_.load(std::memory_order_acquire) == running)
    util::fail(call, "graph", util::to_hex(this), "the graph is running; wait for it to finish");
}

graph_node* graph_impl::add_node(const graph_node_args& a, const char* call) {
  check_idle(call);
  if (!a.is_op && !a.fn) util::fail(call, "fn", "empty", "a function node needs a function");
  if (a.is_op && a.op.local_comp.p && util::live(a.op.local_comp.p, call, "op.local_comp") != this)
    util::fail(call, "op.local_comp", util::to_hex(a.op.local_comp.p),
               "an operation node's completion object must be the graph (or empty)");
  std::string name = a.name ? a.name : "node " + std::to_string(nodes_.size());
  auto n = std::make_unique<graph_node>(*this, std::move(name));
  n->value = a.value;
  n->fn = a.fn;
  n->is_op = a.is_op;
  if (a.is_op) {
    n->op = a.op;
    n->op.local_comp.p = util::tagged(static_cast<comp_impl*>(n.get()));  // posted as a handle
    n->op.allow_retry = false;  // a full peer queue goes through the backlog
    n->op.internal = true;
    n->op.allow_posted = true;
    n->op.allow_done = true;
    if (a.op.nbuffers) {
      n->op_buffers.assign(a.op.buffers, a.op.buffers + a.op.nbuffers);
      n->op.buffers = n->op_buffers.data();
    }
    if (a.op.nremote_buffers) {
      n->op_remote_buffers.assign(a.op.remote_buffers, a.op.remote_buffers + a.op.nremote_buffers);
      n->op.remote_buffers = n->op_remote_buffers.data();
    }
  }
  nodes_.push_back(std::move(n));
  acyclic_ = false;
  return nodes_.back().get();
}

void graph_impl::add_edge(graph_node* source, graph_node* target, graph_edge_fn_t fn) {
  check_idle("graph_add_edge");
  if (source == target)
    util::fail("graph_add_edge", "target", target->name, "an edge from a node to itself");
  source->successors.push_back(target);
  source->edge_fns.push_back(std::move(fn));
  ++target->npredecessors;
  acyclic_ = false;
}

// Kahn's algorithm: every node must become ready once its predecessors finished.
void graph_impl::check_acyclic() {
  std::vector<uint32_t> waiting(nodes_.size());
  worklist ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->index = i;
    waiting[i] = nodes_[i]->npredecessors;
    if (!waiting[i]) ready.push_back(nodes_[i].get());
  }
  size_t reached = 0;
  while (!ready.empty()) {
    graph_node* n = ready.back();
    ready.pop_back();
    ++reached;
    for (graph_node* t : n->successors)
      if (--waiting[t->index] == 0) ready.push_back(t);
  }
  if (reached != nodes_.size())
    util::fail("graph_start", "graph", util::to_hex(this),
               std::to_string(nodes_.size() - reached) + " of " + std::to_string(nodes_.size()) +
                   " nodes lie on or behind a cycle of edges");
  acyclic_ = true;
}

void graph_impl::start() {
  if (!acyclic_) check_acyclic();
  int expected = state_.load(std::memory_order_acquire);
  if (expected == running || !state_.compare_exchange_strong(expected, running))
    util::fail("graph_start", "graph", util::to_hex(this), "the graph is already running");
  failed_.store(nullptr, std::memory_order_relaxed);
  result_ = status_t{};
  for (auto& n : nodes_) {
    n->waiting.store(n->npredecessors, std::memory_order_relaxed);
    n->skip.store(false, std::memory_order_relaxed);
    n->status = status_t{};
  }
  pending.store(1, std::memory_order_relaxed);  // free_comp refuses a running graph
  // Its completion object counts the run as an operation in flight (arm_cont checks it).
  if (done_) done_->pending.fetch_add(1, std::memory_order_relaxed);
  if (nodes_.empty()) {
    unfinished_.store(1, std::memory_order_relaxed);
    finish_graph();
    return;
  }
  // One extra count held while the roots are fired: the graph cannot finish (and a
  // self-deleting graph cannot vanish) under this loop.
  unfinished_.store(nodes_.size() + 1, std::memory_order_release);
  worklist ready;
  for (auto& n : nodes_)
    if (n->npredecessors == 0) ready.push_back(n.get());
  drain(ready);
  if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_graph();
}

void graph_impl::drain(worklist& ready) {
  while (!ready.empty()) {
    graph_node* n = ready.back();
    ready.pop_back();
    run(n, ready);
  }
}

status_t graph_impl::invoke(graph_node* n) {
  try {
    return n->is_op ? post_comm_impl(n->op) : n->fn(n->value);
  } catch (const std::exception& e) {
    WEFT_LOG(warn, "graph node '%s' failed: %s", n->name.c_str(), e.what());
    status_t s;
    s.error = errorcode_t::error;
    s.user_context = n->value;
    return s;
  }
}

void graph_impl::run(graph_node* n, worklist& ready) {
  if (n->skip.load(std::memory_order_acquire)) {
    status_t s;
    s.error = errorcode_t::cancelled;
    s.user_context = n->value;
    return settle(n, s, true, ready);
  }
  // Whoever clears in_flight settles the node: the call's return, or a signal (or
  // graph_node_mark_complete) that may come from another thread before it returns.
  n->in_flight.store(true, std::memory_order_release);
  status_t s = invoke(n);
  if (s.error.is_posted()) return;
  if (!n->in_flight.exchange(false, std::memory_order_acq_rel)) return;
  if (s.error.is_retry()) {
    util::lock_guard<util::spinlock> g(retry_lock_);
    retry_.push_back(n);
    return;
  }
  settle(n, s, false, ready);
}

void graph_impl::settle(graph_node* n, const status_t& s, bool skipped, worklist& ready) {
  n->status = s;
  const bool failed = skipped || s.error.is_error() || s.error.is_cancelled();
  if (failed && !skipped) {
    graph_node* none = nullptr;
    failed_.compare_exchange_strong(none, n, std::memory_order_acq_rel);
  }
  for (size_t i = 0; i < n->successors.size(); ++i) {
    graph_node* t = n->successors[i];
    if (failed)
      t->skip.store(true, std::memory_order_relaxed);
    else if (n->edge_fns[i])
      n->edge_fns[i](s, n->value, t->value);
    if (t->waiting.fetch_sub(1, std::memory_order_acq_rel) == 1) ready.push_back(t);
  }
  if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_graph();
}

bool graph_impl::finish_node(graph_node* n, const status_t& s) {
  if (!n->in_flight.exchange(false, std::memory_order_acq_rel)) return false;
  worklist ready;
  settle(n, s, false, ready);
  drain(ready);
  return true;
}

void graph_impl::finish_graph() {
  status_t r;
  r.error = errorcode_t::done;
  if (graph_node* f = failed_.load(std::memory_order_acquire)) r = f->status;
  r.user_context = user_context_;
  result_ = r;
  comp_impl* done = done_;
  const bool self_delete = self_delete_;
  pending.store(0, std::memory_order_relaxed);
  if (self_delete) {
    delete this;
  } else {
    // From here another thread may restart or free the graph: nothing below touches it.
    state_.store(finished, std::memory_order_release);
  }
  if (done)
    while (!done->signal_counted(r)) util::cpu_relax();
}

bool graph_impl::test(status_t* out) {
  const int st = state_.load(std::memory_order_acquire);
  if (st == finished) {
    if (out) *out = result_;
    return true;
  }
  if (st == idle)
    util::fail("graph_test", "graph", util::to_hex(this), "the graph was never started");
  worklist again;
  {
    util::lock_guard<util::spinlock> g(retry_lock_);
    again.swap(retry_);
  }
  worklist ready;
  for (graph_node* n : again) {
    run(n, ready);
    drain(ready);
  }
  return false;
}

}  // namespace weft::impl
