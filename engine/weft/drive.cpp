// SPDX-License-Identifier: BSD-3-Clause
// What drives the Weft engine (seed 000 section 5.3). The progress thread only calls
// Weft's progress on the engine's device: Weft drains the network, answers rendezvous and
// signals the two FIFOs. The communication side pops them fairly (up to am_batch active
// message callbacks, then every bulk completion, again while any ran) and starts the
// deferred posts in order. Either thread may be off: weft_engine_progress then does its
// part on the runtime's thread.
#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "engine/weft/weft_engine.hpp"
#include "util/clock.hpp"

namespace weft::engine {
namespace {

// Idle polls before a thread yields its core (on a machine with fewer cores than threads
// a spinning thread would otherwise keep the workers off theirs for a whole time slice).
constexpr int idle_polls_before_yield = 64;

void pin(std::thread& t, int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(t.native_handle(), sizeof(set), &set);
}

}  // namespace

int weft_engine::enable() {
  if (running_.exchange(true)) return WEFT_OK;
  if (attr.progress_thread) {
    progress_thread_ = std::thread([this] { progress_loop(); });
    pin(progress_thread_, attr.progress_cpu);
  }
  if (attr.comm_thread) {
    comm_thread_ = std::thread([this] { comm_loop(); });
    pin(comm_thread_, attr.comm_cpu);
  }
  return WEFT_OK;
}

int weft_engine::disable() {
  if (!running_.exchange(false)) return WEFT_OK;
  if (progress_thread_.joinable()) progress_thread_.join();
  if (comm_thread_.joinable()) comm_thread_.join();
  return WEFT_OK;
}

void weft_engine::progress_loop() {
  mark_weft_thread();  // continuations with thread = application do not run here
  int idle = 0;
  while (running_.load(std::memory_order_relaxed)) {
    if (progress_x().device(dev_)().is_done()) {
      idle = 0;
    } else if (++idle == idle_polls_before_yield) {
      idle = 0;
      sched_yield();
    }
  }
}

void weft_engine::comm_loop() {
  mark_weft_thread();
  int idle = 0;
  while (running_.load(std::memory_order_relaxed)) {
    if (!progress_thread_runs()) progress_x().device(dev_)();
    if (drain()) {
      idle = 0;
    } else if (++idle == idle_polls_before_yield) {
      idle = 0;
      sched_yield();
    }
  }
}

int weft_engine::progress() {
  watch();
  if (!progress_thread_runs()) progress_x().device(dev_)();
  return running_.load(std::memory_order_relaxed) && attr.comm_thread ? 0 : drain();
}

// Sleeps only where nothing else would drive the device: with the progress thread running
// the device is that thread's, and with the communication thread the FIFOs are. On 3 ranks
// sharing 2 cores the executor's driver sleeping here instead of yielding leaves the
// workers the cores (docs/cholesky.md: the Cholesky across hosts from 41-44 to 50-54
// GFLOP/s together with the workers' part).
int weft_engine::progress_wait(uint32_t timeout_us) {
  const bool threads = running_.load(std::memory_order_relaxed) && attr.comm_thread;
  if (progress_thread_runs() || threads) return progress();
  watch();
  if (progress_x().device(dev_)().is_done()) return drain();
  if (const int n = drain()) return n;
  progress_x().device(dev_).block_us(timeout_us)();
  return drain();
}

int weft_engine::can_serve() {
  return ndeferred_.load(std::memory_order_relaxed) < attr.deferred ? 1 : 0;
}

// The seed's fairness rule; one thread at a time, so callbacks never run concurrently.
int weft_engine::drain() {
  if (!drain_lock_.try_lock()) return 0;
  util::lock_guard<util::spinlock> g(drain_lock_, util::adopt_lock);
  int total = 0;
  for (;;) {
    int n = 0;
    for (size_t i = 0; i < attr.am_batch; ++i, ++n) {
      status_t s = cq_pop(am_cq_);  // retry: empty; an entry may carry an error
      if (s.error.is_retry()) break;
      handle_am(s);
    }
    for (;; ++n) {
      status_t s = cq_pop(bulk_cq_);
      if (s.error.is_retry()) break;
      handle_bulk(s);
    }
    n += start_deferred();
    if (nparked_.load(std::memory_order_acquire)) n += deliver_parked();
    if (!n) return total;
    total += n;
  }
}

void weft_engine::handle_am(const status_t& s) {
  if (s.error.is_error()) {  // a long message whose sender died half-way: no buffer
    report(s.rank, "an active message failed on its way: " + std::string(s.error.get_str()));
    return;
  }
  switch (kind_of(s.tag)) {
    case msg_kind::am: {
      const uint64_t tag = low_of(s.tag);
      weft_engine_tag_entry_t t{};
      if (!tag_entry(tag, t)) {
        if (tag < WEFT_ENGINE_MAX_TAGS && parked_.size() < attr.queue_depth) {
          parked_.push_back(s);  // its buffer goes with it
          nparked_.store(parked_.size(), std::memory_order_release);
          return;
        }
        report(s.rank, "an active message on tag " + std::to_string(tag) +
                           ", not registered here, was dropped (" + std::to_string(parked_.size()) +
                           " wait for their tags already)");
        break;
      }
      __atomic_fetch_add(&stats.am_received, 1, __ATOMIC_RELAXED);
      __atomic_fetch_add(&stats.callbacks, 1, __ATOMIC_RELAXED);
      t.fn(this, weft_engine_tag_t(tag), s.buf, s.size, s.rank, t.data);
      break;
    }
    case msg_kind::put_eager: on_put_eager(s); break;
    case msg_kind::announce: on_announce(s); break;
    default: report(s.rank, "a message of unknown kind was dropped");
  }
  if (s.buf) put_upacket(s.buf);  // a packet (packet delivery), or a long message's malloc
}

// Under the drain lock, as handle_am: the parked messages whose tag is registered now.
int weft_engine::deliver_parked() {
  std::vector<status_t> waiting;
  waiting.swap(parked_);
  int n = 0;
  for (const status_t& s : waiting) {
    const uint64_t tag = low_of(s.tag);
    weft_engine_tag_entry_t t;
    if (tag_entry(tag, t)) {
      handle_am(s);
      ++n;
    } else {
      parked_.push_back(s);
    }
  }
  nparked_.store(parked_.size(), std::memory_order_release);
  return n;
}

void weft_engine::handle_bulk(const status_t& s) {
  if (!s.user_context) return on_notification(s);  // at the target of a put or get
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  on_local_done(s);
}

int weft_engine::defer(deferred_post&& d) {
  util::lock_guard<util::spinlock> g(deferred_lock_);
  if (deferred_.size() >= attr.deferred) return WEFT_RETRY;
  deferred_.push_back(std::move(d));
  ndeferred_.store(deferred_.size(), std::memory_order_release);
  __atomic_fetch_add(&stats.deferred, 1, __ATOMIC_RELAXED);
  return WEFT_POSTED;
}

// Starts deferred posts in order until one is refused again; returns how many started.
int weft_engine::start_deferred() {
  if (!ndeferred_.load(std::memory_order_acquire)) return 0;
  int n = 0;
  for (;;) {
    deferred_post d;
    {
      util::lock_guard<util::spinlock> g(deferred_lock_);
      if (deferred_.empty()) return n;
      d = std::move(deferred_.front());
      deferred_.pop_front();
    }
    int rc;
    if (d.op) {
      rc = start_rma(d.op);
    } else {
      status_t s = send(d.rank, d.tag, d.bytes.data(), d.bytes.size());
      rc = s.error.is_retry() ? WEFT_RETRY : WEFT_DONE;
      if (s.error.is_error())
        report(d.rank, "a deferred active message failed: " + std::string(s.error.get_str()));
      else if (!s.error.is_retry() && kind_of(d.tag) == msg_kind::am)
        __atomic_fetch_add(&stats.am_sent, 1, __ATOMIC_RELAXED);
    }
    util::lock_guard<util::spinlock> g(deferred_lock_);
    if (rc == WEFT_RETRY) {  // back at the front: order is kept
      deferred_.push_front(std::move(d));
      return n;
    }
    ndeferred_.store(deferred_.size(), std::memory_order_release);
    ++n;
  }
}

void weft_engine::report(int rank, const std::string& what) {
  weft_engine_report(this, rank, what.c_str());
}

int weft_engine::watch_peers(int on) {
  watching_.store(on != 0, std::memory_order_release);
  return WEFT_OK;
}

// Progress looks for dead peers only while operations wait on them; a runtime waiting for
// a peer's next message by its own protocol has none, so the engine asks the transport
// itself (a system call per peer on shared memory, hence every 50 ms). One caller claims
// each look; a peer is reported once.
void weft_engine::watch() {
  if (!watching_.load(std::memory_order_relaxed)) return;
  const int64_t now = util::coarse_now_ns();
  int64_t due = next_watch_ns_.load(std::memory_order_relaxed);
  if (now < due ||
      !next_watch_ns_.compare_exchange_strong(due, now + 50'000'000, std::memory_order_relaxed))
    return;
  for (int r = 0; r < rank_n; ++r) {
    if (dev_.test_peer(r) || reported_dead_[size_t(r)].exchange(true)) continue;
    report(r, "the peer died (seen by weft_engine_watch_peers) while this rank waited for it");
  }
}

}  // namespace weft::engine
