// SPDX-License-Identifier: BSD-3-Clause
// Continuations (seed 002): a continuation is a completion object that counts the signals of
// the operations posted with it and, once armed with their number and all of them have
// signalled, runs its callback; a continuation request tracks the continuations registered
// with it, runs those that could not run where they became ready, and reports whether any is
// left active. The layer sits on the completion objects (src/comp) and calls the core only
// to progress; the core knows a continuation only as a completion kind whose counted
// signals leave `pending` to it (comp_impl::signal_counted).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "comp/comp.hpp"
#include "util/generation.hpp"
#include "util/spinlock.hpp"
#include "weft/cont.hpp"
#include "weft/weft.h"

namespace weft::impl {

class cont_request_impl;

// Retired continuations of this thread, reused by its next alloc_cont: no lock and no
// allocation per continuation when one thread allocates and runs them (a thread that only
// runs them fills its cache, then gives the rest back to the allocator). Trivially
// destructible, so that reaching it is one %fs-relative access: a thread_local with a
// destructor is reached through a guard that calls __tls_get_addr (measured: a fifth of a
// continuation's own cost). Its destructor lives in cont.cpp, registered once per thread.
struct spare_cache {
  static constexpr size_t size = 256;
  void* objs[size];
  size_t n;
  bool owned;  // the thread's exit gives the cached objects back
};
inline thread_local spare_cache t_spare __attribute__((tls_model("initial-exec")));

// Continuations of one request that this thread retired inside its current progress call
// and has not yet taken off the request's count: one atomic update per progress call instead
// of one per continuation. The request looks active a little longer, until that call
// returns, as if they had run then; a reader on this thread flushes first.
struct handback_credit {
  const cont_request_impl* req;
  int64_t n;
};
inline thread_local handback_credit t_credit __attribute__((tls_model("initial-exec")));

// Set on threads that Weft's layers start (mark_weft_thread).
// initial-exec: read on every continuation; the default model calls __tls_get_addr in a
// shared library.
inline thread_local bool t_weft_thread __attribute__((tls_model("initial-exec"))) = false;
// Above zero while this thread runs a continuation: one that becomes ready meanwhile is
// queued, never run inside another (seed 3.1).
inline thread_local int t_cont_depth __attribute__((tls_model("initial-exec"))) = 0;

// What a continuation runs and where its statuses go: a C++ body with status_t[] or, from the
// C API, a C body with weft_status_t[] (to_c converts each status as it arrives).
struct cont_body {
  cont_fn_t fn = nullptr;
  weft_cont_fn_t c_fn = nullptr;
  void* user_data = nullptr;
  void* statuses = nullptr;  // status_t[] or weft_status_t[]
  size_t capacity = 0;
  void (*to_c)(void* array, size_t i, const status_t& s) = nullptr;
};

class cont_impl final : public comp_impl {
 public:
  // One word counts both: operations that signalled (high 32 bits, each signal's index
  // into the statuses) and operations still awaited (low 32 bits), which holds `unarmed`,
  // far above any count, until arm_cont takes it away: one atomic add per signal.
  // `pending` only grows with this continuation's signals: it counts every operation posted
  // with it, and each uncounted signal adds itself; in flight = pending - signalled. So a
  // counted signal is one atomic add, and arm_cont's check is one load.
  static constexpr uint64_t unarmed = uint64_t(1) << 31;
  static constexpr uint64_t one_signal = (uint64_t(1) << 32) - 1;  // arrived + 1, awaited - 1
  cont_impl(cont_request_impl* cr, const cont_body& body)
      : comp_impl(comp_kind::cont), cr_(cr), body_(body) {}
  // comp_signal and uncounted signals.
  bool signal(const status_t& s) override {
    arrive(s, false);
    return true;
  }
  bool signal_counted(const status_t& s) override {
    arrive(s, true);
    return true;
  }
  bool free_self() override;
  error_t arm(size_t n);
  // Runs the callback on this thread, then hands the object back to its request.
  void run();
  cont_request_impl* request() const { return cr_; }
  cont_impl* next = nullptr;  // in its request's ready queue

 private:
  void arrive(const status_t& s, bool counted);

  cont_request_impl* const cr_;
  const cont_body body_;
  size_t arrived() const { return size_t(count_.load(std::memory_order_acquire) >> 32); }
  int64_t in_flight() const override;
  size_t seen() const;  // the operations posted with it (and signalled uncounted), nearly always
  [[gnu::noinline]] size_t posted_at_least(size_t n) const;  // seen(), waiting out a signaller
  [[noreturn, gnu::cold]] void refuse(size_t n, const char* why, size_t than) const;

  size_t n_ = 0;  // armed count, written before `count_` is released
  std::atomic<uint64_t> count_{unarmed};
  std::atomic<uint32_t> slots_{0};  // statuses written (only when kept)
  std::atomic<bool> armed_{false};
};

class cont_request_impl final : public comp_impl {
 public:
  explicit cont_request_impl(const detail::cont_request_args& a);
  ~cont_request_impl() override;
  // A request is no operation's completion object (post refuses it).
  bool signal(const status_t&) override;
  bool free_self() override;

  // Registers a new continuation. Inline: the body is built just before, and a copy
  // through memory would load it while its stores are in flight (a store-forwarding stall).
  [[gnu::always_inline]] cont_impl* make(const cont_body& body) {
    if (freed_.load(std::memory_order_acquire)) [[unlikely]]
      refuse_make();
    // One that this thread retired in the same progress call (a continuation posting the
    // next operation of a chain) still holds its count: take that instead of an atomic add.
    // On the thread that allocated the request, a count taken ahead (reserve_) does it.
    if (t_credit.req == this && t_credit.n > 0)
      --t_credit.n;
    else if (owner_ == &t_spare)
      take_reserve();
    else
      state_.fetch_add(one_active, std::memory_order_acq_rel);
    if (t_spare.n == 0) [[unlikely]]
      return new cont_impl(this, body);
    void* mem = t_spare.objs[--t_spare.n];
    util::gen::revive(mem);
    return ::new (mem) cont_impl(this, body);
  }
  // A continuation whose operations have all signalled: run here when allowed, else queued.
  void on_ready(cont_impl* c);
  void enqueue(cont_impl* c);
  // A continuation ran (or completed at arm): recycled, and the request may become idle.
  // Inside a progress call it only counts the hand-back for this thread (handback_credit),
  // and the outermost call's end hands back the batch with one atomic update.
  void retire(cont_impl* c);
  // Hands back this thread's deferred count: the progress scope's end, and whoever reads
  // the request's state on this thread meanwhile (test, watch, info).
  static void flush_credit();
  bool test();
  error_t watch(comp_impl* comp);
  cont_request_info_t info() const;
  bool enqueue_complete() const { return a_.enqueue_complete; }
  // Runs queued continuations of freed requests; progress calls it (see cont.cpp).
  static void run_orphans();

 private:
  [[noreturn, gnu::cold]] void refuse_make() const;
  bool may_run_here() const;
  cont_impl* pop();
  size_t run_queued(size_t max);
  void on_idle();
  void hand_back(int64_t n);  // n continuations retired: the count drops, idle or released
  void flush_own() const {
    if (t_credit.req == this) flush_credit();
  }

  // The owner's next continuation takes one of the counts it added to state_ ahead.
  [[gnu::always_inline]] void take_reserve() {
    const int64_t r = reserve_.load(std::memory_order_relaxed);
    if (r == 0) [[unlikely]]
      return refill_reserve();
    reserve_.store(r - 1, std::memory_order_release);
  }
  void refill_reserve();
  // Twice the active continuations, plus twice the reserve, plus one while the program
  // holds the handle. Active: state_ less the reserve, read first (see reserve_).
  static constexpr int64_t one_active = 2;
  // `state` less the reserve (loaded after `state`: a hand-back's own count).
  int64_t active_units(int64_t state) const {
    return state - reserve_.load(std::memory_order_acquire) * one_active;
  }
  int64_t active_units() const {
    const int64_t r = reserve_.load(std::memory_order_acquire);
    return state_.load(std::memory_order_acquire) - r * one_active;
  }
  bool idle() const { return active_units() < one_active; }

  const detail::cont_request_args a_;
  std::atomic<int64_t> state_{1};
  // Registrations that the allocating thread (owner_, the address of its t_spare) took
  // ahead, in a batch: it registers a continuation by a plain store here instead of an
  // atomic add on state_, which already counts the batch. Only the owner writes it (free_self
  // too, after freed_ stops the owner's allocations), always after adding a batch to state_;
  // a reader loads it before state_, so a stale value can only make the request look more
  // active, never idle while a continuation whose allocation it could know of is active.
  static constexpr int64_t reserve_batch = 64;
  const void* const owner_ = &t_spare;
  std::atomic<int64_t> reserve_{0};
  std::atomic<bool> testing_{false};
  std::atomic<bool> freed_{false};
  util::spinlock queue_lock_;
  cont_impl* head_ = nullptr;
  cont_impl* tail_ = nullptr;
  std::atomic<size_t> queued_{0};
  util::spinlock watch_lock_;
  std::atomic<bool> has_watchers_{false};
  std::vector<comp_impl*> watchers_;
};

// Inline: every signal of a continuation passes here (one call less per operation).
inline void cont_impl::arrive(const status_t& s, bool counted) {
  // The status is written before the count that releases it to the callback: the slot is
  // claimed with a separate index only when statuses are kept.
  if (body_.statuses) {
    const size_t i = size_t(slots_.fetch_add(1, std::memory_order_relaxed));
    if (i < body_.capacity) {
      if (body_.to_c)
        body_.to_c(body_.statuses, i, s);
      else
        static_cast<status_t*>(body_.statuses)[i] = s;
    }
  }
  // A counted signal leaves `pending` as it is (it counts every operation posted with
  // this continuation); an uncounted one adds itself, before the count: once the count is
  // in, the last signaller may run and recycle this continuation, so nothing here may
  // touch it after its own fetch_add.
  if (!counted) pending.fetch_add(1, std::memory_order_relaxed);
  // Armed and awaiting this signal alone (the usual case of one operation per continuation,
  // armed before it completed): nobody else writes the count any more, so the locked add
  // is skipped (5-6 ns on an AMD EPYC). The acquire load synchronises with the arm's and
  // the other signals' adds, so their statuses and n_ are visible to the callback. The
  // count is left one signal short: only a free_comp of it from its own callback would
  // read it (refused either way, as an operation still pending).
  if ((count_.load(std::memory_order_acquire) & 0xffffffffu) == 1) return cr_->on_ready(this);
  const uint64_t before = count_.fetch_add(one_signal, std::memory_order_acq_rel);
  if ((before & 0xffffffffu) == 1) cr_->on_ready(this);
}

}  // namespace weft::impl
