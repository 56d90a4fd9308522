// SPDX-License-Identifier: BSD-3-Clause
#include "cont/cont.hpp"

#include <chrono>
#include <new>
#include <string>
#include <thread>

#include "core/hooks.hpp"
#include "util/fail.hpp"
#include "util/generation.hpp"
#include "util/log.hpp"
#include "weft/weft.hpp"

namespace weft::impl {

namespace {

// Continuations of freed requests that became ready where they could not run (inside
// another continuation, or on a Weft thread): nobody will test their request, so the next
// progress call of an application thread runs them (progress_orphans in the core).
util::spinlock orphan_lock;
std::vector<cont_impl*> orphans;

struct spare_owner {
  ~spare_owner() {
    while (t_spare.n) util::gen::release(t_spare.objs[--t_spare.n]);
  }
};

[[gnu::noinline, gnu::cold]] void own_spares() {
  thread_local spare_owner owner;
  (void)owner;
  t_spare.owned = true;
}

void orphan(cont_impl* c) {
  util::lock_guard<util::spinlock> g(orphan_lock);
  orphans.push_back(c);
  progress_hook.store(&cont_request_impl::run_orphans, std::memory_order_release);
}

}  // namespace

// ---- a continuation ----------------------------------------------------------------------

size_t cont_impl::seen() const {
  const int64_t p = pending.load(std::memory_order_acquire);
  return size_t(p > 0 ? p : 0);
}

int64_t cont_impl::in_flight() const {
  // arrived() first: a signal between the two loads shows as one more still in flight,
  // never one fewer.
  const int64_t a = int64_t(arrived());
  return pending.load(std::memory_order_acquire) - a;
}

size_t cont_impl::posted_at_least(size_t n) const {
  // An operation the core takes out of `pending` before it signals uncounted (a post
  // leaving the backlog) is missing from seen() until its signal adds it back, so a short
  // count (arm saw fewer than n) is re-read, spinning then yielding for up to a second,
  // before it is believed: only a wrong program or a signaller preempted in that window
  // gets here.
  size_t s = seen();
  for (int tries = 0; n > s && tries < 4096; ++tries) {
    util::cpu_relax();
    s = seen();
  }
  if (n <= s) return s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (n > s && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    s = seen();
  }
  return s;
}

[[noreturn, gnu::cold]] void cont_impl::refuse(size_t n, const char* why, size_t than) const {
  util::fail(
      "arm_cont", "nposted", std::to_string(n),
      std::string(why) + " " + std::to_string(than) + " (continuation " + util::to_hex(this) + ")");
}

error_t cont_impl::arm(size_t n) {
  // The thread that armed it is the only one that may arm it: no atomic exchange needed.
  if (armed_.load(std::memory_order_relaxed))
    util::fail("arm_cont", "cont", util::to_hex(this), "armed twice");
  if (body_.statuses && n > body_.capacity)
    refuse(n, "more than the capacity of its statuses array,", body_.capacity);
  if (n >= unarmed) refuse(n, "more operations than a continuation counts, at most", unarmed - 1);
  size_t posted = seen();
  if (n > posted) [[unlikely]]
    posted = posted_at_least(n);
  if (n > posted) refuse(n, "more than the operations posted with it:", posted);
  if (n < arrived()) refuse(n, "fewer than the operations that already signalled it:", arrived());
  // Refused above, it stays unarmed: the program may arm it again with the right count.
  armed_.store(true, std::memory_order_relaxed);
  n_ = n;
  const uint64_t take = unarmed - n;
  if ((count_.fetch_sub(take, std::memory_order_acq_rel) & 0xffffffffu) != take)
    return errorcode_t::posted;
  // Every operation completed before arming: the seed's flag, the callback not run, unless
  // the request queues such continuations for a later test.
  if (cr_->enqueue_complete()) {
    cr_->enqueue(this);
    return errorcode_t::posted;
  }
  cr_->retire(this);
  return errorcode_t::done;
}

void cont_impl::run() {
  if (const int64_t p = pending.load(std::memory_order_acquire) - int64_t(n_); p > 0)
    WEFT_LOG(error,
             "arm_cont: continuation %p armed with %zu operations, but %lld more were posted "
             "with it; it runs now, and their signals are lost",
             static_cast<void*>(this), n_, static_cast<long long>(p));
  ++t_cont_depth;
  if (body_.c_fn)
    body_.c_fn(static_cast<weft_status_t*>(body_.statuses), n_, body_.user_data);
  else
    body_.fn(static_cast<status_t*>(body_.statuses), n_, body_.user_data);
  --t_cont_depth;
  cr_->retire(this);
}

bool cont_impl::free_self() {
  if (armed_.load(std::memory_order_acquire))
    util::fail("free_comp", "comp", util::to_hex(this),
               "an armed continuation: Weft releases it once its callback has run");
  // Never armed and nothing posted with it (free_comp checked pending): withdrawn.
  cr_->retire(this);
  return true;
}

// ---- a continuation request --------------------------------------------------------------

cont_request_impl::cont_request_impl(const detail::cont_request_args& a)
    : comp_impl(comp_kind::cont_request), a_(a) {}

cont_request_impl::~cont_request_impl() = default;

bool cont_request_impl::signal(const status_t&) {
  WEFT_LOG(error,
           "a continuation request (%p) was signalled as an operation's completion "
           "object: pass a continuation of it instead; the signal is ignored",
           static_cast<void*>(this));
  return true;
}

void cont_request_impl::refuse_make() const {
  util::fail("alloc_cont", "request", util::to_hex(this), "the request was freed");
}

bool cont_request_impl::may_run_here() const {
  if (t_cont_depth > 0) return false;
  if (t_weft_thread && a_.thread != cont_thread_t::any) return false;
  return !a_.poll_only || freed_.load(std::memory_order_acquire);
}

void cont_request_impl::on_ready(cont_impl* c) {
  if (may_run_here()) return c->run();
  if (!freed_.load(std::memory_order_acquire)) return enqueue(c);
  orphan(c);  // nobody will test a freed request: the next progress call runs it
}

void cont_request_impl::enqueue(cont_impl* c) {
  util::lock_guard<util::spinlock> g(queue_lock_);
  c->next = nullptr;
  (tail_ ? tail_->next : head_) = c;
  tail_ = c;
  queued_.fetch_add(1, std::memory_order_release);
}

cont_impl* cont_request_impl::pop() {
  if (!queued_.load(std::memory_order_acquire)) return nullptr;
  util::lock_guard<util::spinlock> g(queue_lock_);
  cont_impl* c = head_;
  if (!c) return nullptr;
  head_ = c->next;
  if (!head_) tail_ = nullptr;
  queued_.fetch_sub(1, std::memory_order_release);
  return c;
}

size_t cont_request_impl::run_queued(size_t max) {
  size_t ran = 0;
  while (ran < max) {
    cont_impl* c = pop();
    if (!c) break;
    ++ran;
    c->run();
  }
  return ran;
}

void cont_request_impl::retire(cont_impl* c) {
  c->~cont_impl();
  if (!t_spare.owned) own_spares();
  if (t_spare.n < spare_cache::size) {
    util::gen::retire(c);  // handles to it go stale
    t_spare.objs[t_spare.n++] = c;
  } else {
    util::gen::release(c);
  }
  if (t_progress.depth > 0 && (t_credit.req == this || !t_credit.req)) {
    t_credit.req = this;
    ++t_credit.n;
    t_progress.at_exit = &flush_credit;
    return;
  }
  hand_back(1);
}

void cont_request_impl::flush_credit() {
  auto* r = const_cast<cont_request_impl*>(t_credit.req);
  const int64_t n = t_credit.n;
  t_credit = {nullptr, 0};
  t_progress.at_exit = nullptr;
  if (n) r->hand_back(n);
}

void cont_request_impl::refill_reserve() {
  // The batch is in state_ before the reserve says so: a reader that sees the reserve
  // sees the batch too (reserve_ is released after, acquired before state_).
  state_.fetch_add(one_active * (reserve_batch + 1), std::memory_order_acq_rel);
  reserve_.store(reserve_batch, std::memory_order_release);
}

void cont_request_impl::hand_back(int64_t n) {
  const int64_t now = state_.fetch_sub(n * one_active, std::memory_order_seq_cst) - n * one_active;
  // Watchers learn it, held or not. The flag is set before a watcher checks idleness and
  // read after this count drops (both sequentially consistent), so one of the two sees
  // the other: no lock taken here while nobody watches.
  if (active_units(now) < one_active && has_watchers_.load(std::memory_order_seq_cst)) on_idle();
  if (now == 0) delete this;  // freed, and this was its last continuation
}

void cont_request_impl::on_idle() {
  std::vector<comp_impl*> w;
  {
    util::lock_guard<util::spinlock> g(watch_lock_);
    w.swap(watchers_);
    has_watchers_.store(false, std::memory_order_relaxed);
  }
  status_t s;
  s.error = errorcode_t::done;
  s.user_context = util::tagged(static_cast<comp_impl*>(this));
  for (comp_impl* c : w)
    while (!c->signal_counted(s)) util::cpu_relax();  // a full queue drains meanwhile
}

error_t cont_request_impl::watch(comp_impl* comp) {
  flush_own();
  util::lock_guard<util::spinlock> g(watch_lock_);
  has_watchers_.store(true, std::memory_order_seq_cst);
  if (active_units() < one_active) return errorcode_t::done;
  comp->pending.fetch_add(1, std::memory_order_relaxed);
  watchers_.push_back(comp);
  return errorcode_t::posted;
}

bool cont_request_impl::test() {
  if (testing_.exchange(true, std::memory_order_acquire))
    util::fail("cont_request_test", "request", util::to_hex(this),
               "another thread is testing it, or a continuation is testing its own request "
               "(one tester at a time, seed 3.3)");
  struct done_testing {
    std::atomic<bool>& t;
    ~done_testing() { t.store(false, std::memory_order_release); }
  } guard{testing_};
  progress_x().runtime(a_.runtime)();
  if (t_cont_depth == 0)  // inside a continuation nothing more runs (seed 3.1)
    run_queued(a_.max_poll < 0 ? SIZE_MAX : size_t(a_.max_poll));
  flush_own();  // tested inside a progress call: what this thread retired counts now
  return idle();
}

cont_request_info_t cont_request_impl::info() const {
  flush_own();
  return cont_request_info_t{a_.poll_only,
                             a_.enqueue_complete,
                             a_.async_signal_safe,
                             a_.max_poll,
                             a_.thread,
                             size_t(active_units() / one_active),
                             queued_.load(std::memory_order_acquire)};
}

bool cont_request_impl::free_self() {
  if (testing_.load(std::memory_order_acquire))
    util::fail("free_comp", "comp", util::to_hex(this), "the request is being tested");
  freed_.store(true, std::memory_order_release);
  // What waits in the queue runs now when this thread may run it; later arrivals run where
  // they become ready (as if poll_only were off) or from progress (run_orphans).
  if (t_cont_depth == 0 && (!t_weft_thread || a_.thread == cont_thread_t::any))
    run_queued(SIZE_MAX);
  while (cont_impl* c = pop()) orphan(c);
  // The reserve goes back with the handle's count: no allocation takes from it after
  // freed_ (one racing with free_comp is the program's error, as any use after free).
  const int64_t back = 1 + reserve_.exchange(0, std::memory_order_acq_rel) * one_active;
  if (state_.fetch_sub(back, std::memory_order_acq_rel) == back) delete this;
  return true;
}

void cont_request_impl::run_orphans() {
  if (t_cont_depth > 0 || t_weft_thread) return;
  std::vector<cont_impl*> ready;
  {
    util::lock_guard<util::spinlock> g(orphan_lock);
    if (orphans.empty()) return;
    ready.swap(orphans);
    progress_hook.store(nullptr, std::memory_order_release);
  }
  for (cont_impl* c : ready) c->run();
}

}  // namespace weft::impl
