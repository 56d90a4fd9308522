// SPDX-License-Identifier: BSD-3-Clause
// Completion objects (LCI paper 4.1.4): a functor with a virtual signal(). Built-in kinds
// are atomic-based: synchronizer, completion queue, handler.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "util/generation.hpp"
#include "util/sharded_queue.hpp"
#include "util/small_copy.hpp"
#include "util/spinlock.hpp"
#include "util/wide_store.hpp"
#include "weft/types.hpp"

namespace weft::impl {

// Writes a status about to be signalled: in the widths its copies read it back (a queue's
// entry, a handler's argument), see util/wide_store.hpp.
static_assert(offsetof(status_t, rank) == 4 && offsetof(status_t, tag) == 8 &&
              offsetof(status_t, buf) == 16 && offsetof(status_t, size) == 24 &&
              offsetof(status_t, user_context) == 32 && sizeof(error_t) == 4);
[[gnu::always_inline]] inline void store_status(status_t& s, errorcode_t e, int rank, tag_t tag,
                                                void* buf, size_t size, void* user_context) {
  auto* p = reinterpret_cast<char*>(&s);
  util::store16(p, util::pair_word(uint32_t(e), uint32_t(rank)), uint64_t(tag));
  util::store16(p + 16, util::word_of(buf), uint64_t(size));
  s.user_context = user_context;
}

// Kinds from `graph` on cannot be an operation's completion object (post refuses them).
enum class comp_kind : uint8_t { sync, cq, handler, internal, custom, cont, graph, cont_request };

class comp_impl {
 public:
  WEFT_GENERATIONAL_MEMORY  // behind comp_t handles, which carry a generation
      explicit comp_impl(comp_kind k)
      : kind(k) {}
  virtual ~comp_impl() = default;
  // False when the object cannot take the signal now (a full queue): the caller keeps
  // the status in the backlog and tries again.
  virtual bool signal(const status_t& s) = 0;
  // A signal of an operation counted in `pending`. Continuations override it to see the
  // signal before the count drops (arm_cont checks the posts that have not signalled).
  virtual bool signal_counted(const status_t& s) {
    pending.fetch_sub(1, std::memory_order_relaxed);
    if (signal(s)) return true;
    pending.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // free_comp's last step: true when the object takes over its own release (a
  // continuation request with continuations still active), false to be deleted now.
  virtual bool free_self() { return false; }
  // Operations posted with it that have not signalled: what free_comp refuses to free.
  virtual int64_t in_flight() const { return pending.load(std::memory_order_acquire); }

  const comp_kind kind;
  // Operations posted with this object that have not signalled yet; freeing it before
  // they finish is refused. (A continuation counts differently: see cont.hpp.)
  std::atomic<int64_t> pending{0};
};

// A synchronizer counts signals; a test that finds `threshold` of them takes exactly that
// many, with their statuses in arrival order, and leaves any later ones for the next test.
// Testers and signallers may run concurrently: a short lock orders them (one locked
// instruction each, as the two counters it replaces), and a tester that finds too few
// signals returns without taking it. Statuses wait in a ring that grows, under the lock,
// only when more than two rounds of signals are outstanding.
class sync_impl final : public comp_impl {
 public:
  explicit sync_impl(size_t threshold);
  bool signal(const status_t& s) override;
  bool test(status_t* out);
  size_t threshold() const { return threshold_; }

 private:
  void grow();  // under lock_

  const size_t threshold_;
  util::spinlock lock_;
  std::unique_ptr<status_t[]> ring_;
  size_t capacity_, head_ = 0, count_ = 0;
  // count_, readable without the lock: a tester skips the lock while too few arrived.
  alignas(util::cache_line) std::atomic<size_t> ready_{0};
};

// Payload bytes that a completion queue entry holds itself: a queue cell is a cache line,
// and its sequence word and the status leave this much of it unused.
inline constexpr size_t cq_inline_max = 16;

class cq_impl final : public comp_impl {
 public:
  explicit cq_impl(size_t depth) : comp_impl(comp_kind::cq), q_(depth) {}
  bool signal(const status_t& s) override {
    return q_.push_with([&](entry& e) { e.s = s; });
  }
  // An active message of at most cq_inline_max bytes whose malloc'd buffer pop() allocates,
  // on the thread that takes the message and will free it. Allocated in progress instead,
  // a window of messages outgrows glibc's per-thread cache (7 chunks of a size) and every
  // chunk past it takes the arena's slower path twice; see docs/concepts.md.
  [[gnu::always_inline]] bool signal_inline(int rank, tag_t tag, const void* data, size_t n) {
    return q_.push_with([&](entry& e) {
      store_status(e.s, errorcode_t::done, rank, tag, &inline_tag, n, nullptr);
      util::small_copy(e.data, data, n);
    });
  }
  // A payload kept in its entry is copied to a new malloc'd buffer here; when none can be
  // had the status says error_nomem (buf null, size the message's).
  bool pop(status_t& out) {
    return q_.pop_with([&](entry& e) {
      out = e.s;
      if (out.buf != &inline_tag) return;
      // Bounded for the compiler too: signal_inline stored at most cq_inline_max bytes.
      const size_t n = out.size < cq_inline_max ? out.size : cq_inline_max;
      out.buf = std::malloc(n ? n : 1);
      if (out.buf)
        util::small_copy(out.buf, e.data, n);
      else
        out.error = errorcode_t::error_nomem;
    });
  }
  size_t size() const { return q_.size_approx(); }

 private:
  struct entry {
    status_t s;
    unsigned char data[cq_inline_max];
  };
  static_assert(sizeof(entry) + sizeof(size_t) <= util::cache_line);
  // The address that marks a status whose payload is in its entry.
  static inline constinit char inline_tag = 0;
  util::sharded_queue<entry> q_;  // a ring per signalling thread: see sharded_queue.hpp
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

// The program's own completion object behind a handle: one more virtual call.
class custom_comp_impl final : public comp_impl {
 public:
  explicit custom_comp_impl(custom_comp* c) : comp_impl(comp_kind::custom), c_(c) {}
  bool signal(const status_t& s) override { return c_->signal(s); }

 private:
  custom_comp* const c_;
};

}  // namespace weft::impl
