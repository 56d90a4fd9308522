// Completion objects (LCI paper 4.1.4): a functor with a virtual signal(). Built-in kinds
// are atomic-based: synchronizer, completion queue, handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "util/mpmc_queue.hpp"
#include "weft/types.hpp"

namespace weft::detail {

enum class comp_kind : uint8_t { sync, cq, handler, graph, internal };

class comp_impl {
 public:
  explicit comp_impl(comp_kind k) : kind(k) {}
  virtual ~comp_impl() = default;
  // False when the object cannot take the signal now (a full queue): the caller keeps
  // the status in the backlog and tries again.
  virtual bool signal(const status_t& s) = 0;

  const comp_kind kind;
  // Operations posted with this object that have not signalled yet; freeing it before
  // they finish is refused.
  std::atomic<int64_t> pending{0};
};

class sync_impl final : public comp_impl {
 public:
  explicit sync_impl(size_t threshold);
  bool signal(const status_t& s) override;
  bool test(status_t* out);
  size_t threshold() const { return threshold_; }

 private:
  size_t threshold_;
  std::unique_ptr<status_t[]> statuses_;
  alignas(64) std::atomic<size_t> claimed_{0};
  alignas(64) std::atomic<size_t> ready_{0};
};

class cq_impl final : public comp_impl {
 public:
  explicit cq_impl(size_t depth) : comp_impl(comp_kind::cq), q_(depth) {}
  bool signal(const status_t& s) override { return q_.push(s); }
  bool pop(status_t& out) { return q_.pop(out); }
  size_t size() const { return q_.size_approx(); }

 private:
  util::mpmc_queue<status_t> q_;
};

// Signals `c`: a completion queue, the usual target on the critical path, without the
// virtual call (cq_impl is final, so the cast lets the push be inlined).
inline bool signal_comp(comp_impl* c, const status_t& s) {
  return c->kind == comp_kind::cq ? static_cast<cq_impl*>(c)->signal(s) : c->signal(s);
}

class handler_impl final : public comp_impl {
 public:
  explicit handler_impl(handler_fn_t fn) : comp_impl(comp_kind::handler), fn_(std::move(fn)) {}
  bool signal(const status_t& s) override {
    fn_(s);
    return true;
  }

 private:
  handler_fn_t fn_;
};

}  // namespace weft::detail
