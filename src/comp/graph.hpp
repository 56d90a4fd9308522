// SPDX-License-Identifier: BSD-3-Clause
// The completion graph (LCI paper 3.2.5 and 4.1.4): every node counts the signals it still
// waits for in an atomic; a node whose count reaches zero is fired at once by the thread
// that finished its last predecessor, and a finished node signals its successors.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "comp/comp.hpp"
#include "util/spinlock.hpp"
#include "weft/graph.hpp"

namespace weft::impl {

class graph_impl;

// A node is the completion object of its own operation, so its signal finishes it.
struct graph_node final : comp_impl {
  graph_node(graph_impl& g, std::string node_name)
      : comp_impl(comp_kind::internal), graph(g), name(std::move(node_name)) {}
  bool signal(const status_t& s) override;

  graph_impl& graph;
  const std::string name;
  void* value = nullptr;
  graph_node_fn_t fn;
  bool is_op = false;
  comm_args op;
  // Copies of the operation's buffer lists, so the caller's arrays may go.
  std::vector<buffer_t> op_buffers;
  std::vector<rbuffer_t> op_remote_buffers;
  std::vector<graph_node*> successors;
  std::vector<graph_edge_fn_t> edge_fns;  // parallel to successors; may be empty functions
  uint32_t npredecessors = 0;
  size_t index = 0;
  std::atomic<uint32_t> waiting{0};
  std::atomic<bool> skip{false};
  std::atomic<bool> in_flight{
      false};  // started and not yet finished  // a predecessor failed or was skipped
  status_t status;
};

class graph_impl final : public comp_impl {
 public:
  // `done` is signalled with the graph's status when it finishes; a `self_delete` graph
  // frees itself right after (Weft's own one-shot graphs).
  graph_impl(comp_impl* done, void* user_context, bool self_delete);
  // Posting an operation with the graph itself as completion object is refused at the
  // post; a signal that arrives anyway has no node to finish.
  bool signal(const status_t& s) override;

  graph_node* add_node(const graph_node_args& a, const char* call);
  void add_edge(graph_node* source, graph_node* target, graph_edge_fn_t fn);
  void start();
  bool test(status_t* out);
  // False when the node was not running.
  bool finish_node(graph_node* n, const status_t& s);
  graph_node* failed_node() const { return failed_.load(std::memory_order_acquire); }
  bool owns(const graph_node* n) const { return &n->graph == this; }

 private:
  enum state_t : int { idle, running, finished };
  using worklist = std::vector<graph_node*>;
  void run(graph_node* n, worklist& ready);
  status_t invoke(graph_node* n);
  void settle(graph_node* n, const status_t& s, bool skipped, worklist& ready);
  void drain(worklist& ready);
  void finish_graph();
  void check_idle(const char* call) const;
  void check_acyclic();

  std::vector<std::unique_ptr<graph_node>> nodes_;
  comp_impl* const done_;
  void* const user_context_;
  const bool self_delete_;
  bool acyclic_ = false;
  std::atomic<int> state_{idle};
  std::atomic<size_t> unfinished_{0};
  std::atomic<graph_node*> failed_{nullptr};
  status_t result_;
  util::spinlock retry_lock_;
  std::vector<graph_node*> retry_;
};

}  // namespace weft::impl
