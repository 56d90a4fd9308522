// SPDX-License-Identifier: BSD-3-Clause
#include "core/runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/wire.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"
#include "util/clock.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

namespace weft::impl {

std::atomic<runtime_impl*> g_runtime{nullptr};

namespace {

std::atomic<int> g_next_runtime_id{0};
// Every live runtime, for the calls that take a resource without its runtime (free_comp,
// free_packet_pool, free_matching_engine, put_upacket).
std::mutex g_runtimes_lock;
std::vector<runtime_impl*> g_runtimes;

// An attribute: the call's value, else its environment variable, else its default; each
// checked against the row's range in settings.def.
std::optional<size_t> pick(const std::optional<size_t>& given, util::setting s, const char* call) {
  return given ? util::check_given(s, *given, call) : util::get_size(s);
}

void default_error_handler(const wire_error_t& e) {
  util::log_message(util::log_level::error, "rank %d: message from rank %d dropped: %s", e.rank_me,
                    e.peer, e.what.c_str());
}

}  // namespace

runtime_impl* find_runtime(const std::function<bool(runtime_impl&)>& pred) {
  std::lock_guard<std::mutex> g(g_runtimes_lock);
  for (runtime_impl* r : g_runtimes)
    if (pred(*r)) return r;
  return nullptr;
}

runtime_impl* resolve_runtime(runtime_t rt, const char* call) {
  runtime_impl* r =
      rt.p ? util::live(rt.p, call, "runtime") : g_runtime.load(std::memory_order_acquire);
  if (!r)
    util::fail(call, "runtime", "none",
               "no runtime is active (call g_runtime_init() first; calls after "
               "g_runtime_fina() are invalid)");
  return r;
}

namespace {

// WEFT_YIELD: auto yields when the ranks of this machine outnumber its CPUs online. Spinning
// there takes the core from the very rank being waited for until the scheduler's time
// slice ends (milliseconds per round trip: a 4-rank job of 20000 waited puts took 40 s on
// 2 cores). The machine, not the host: ranks on network-namespace hosts or in containers
// of one machine share its CPUs (the tiled Cholesky on three namespace hosts of 2 cores ran
// at 31 GFLOP/s spinning, 44 yielding). Not this process's affinity mask: a launcher that
// binds each rank to a core of its own leaves one CPU in each mask, and those ranks must
// spin. The machine's ranks are counted only when the job could outnumber the CPUs: the
// count reads every rank's host record.
bool decide_yield(bootstrap::bootstrap& boot) {
  const std::string mode = util::get_text(util::setting::yield);
  if (mode != "auto") return mode == "on";
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus <= 0 || boot.size() <= cpus) return false;
  const int ranks = boot.machine_size();  // this host's ranks among them
  const bool over = yield_rule(ranks);
  if (over)
    WEFT_LOG(info,
             "progress yields when idle: %d ranks on this machine, %ld CPUs (WEFT_YIELD=auto)",
             ranks, cpus);
  return over;
}

}  // namespace

bool yield_rule(long machine_ranks) {
  const std::string mode = util::get_text(util::setting::yield);
  if (mode != "auto") return mode == "on";
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 && machine_ranks > cpus;
}

runtime_impl::runtime_impl(const runtime_args& a, bool global)
    : id(g_next_runtime_id.fetch_add(1)),
      is_global(global),
      rcomps_(16),
      engines_(8),
      pool_index_(4) {
  boot = bootstrap::acquire();
  util::set_log_rank(boot->rank());
  util::warn_unknown_settings();
  print_stats_ = util::get_flag(util::setting::stats);  // read now: a bad value fails here
  yield_when_idle = decide_yield(*boot);
  resolve_attributes(a, global ? "g_runtime_init" : "alloc_runtime");

  check_agreement();
  net = net::make_context(boot, id);
  engines_.put(internal_engine_id, new matching_engine_impl(internal_engine_id, 1024, nullptr));
  if (attr.alloc_defaults) {
    default_engine = alloc_engine(attr.match_buckets, nullptr);
    default_pool = alloc_pool(attr.packet_size, attr.npackets);
    default_device = alloc_device(default_pool, attr.inbox_depth, false, true);
  }

  if (global) {
    runtime_impl* expected = nullptr;
    if (!g_runtime.compare_exchange_strong(expected, this))
      util::fail("g_runtime_init", "global runtime", "already active",
                 "call g_runtime_fina() before initialising it again");
  }
  std::lock_guard<std::mutex> g(g_runtimes_lock);
  g_runtimes.push_back(this);
}

// Every attribute from the call, the environment or settings.def, then the checks that
// tie attributes together. Every size has an upper bound in settings.def: a value near
// 2^64 once looped for ever rounding up to a power of two, and 16G buckets aborted in the
// allocator.
void runtime_impl::resolve_attributes(const runtime_args& a, const char* call) {
  using util::setting;
  attr.packet_size = *pick(a.packet_size, setting::packet_size, call);
  attr.npackets = *pick(a.npackets, setting::npackets, call);
  attr.match_buckets = *pick(a.match_buckets, setting::match_buckets, call);
  attr.cq_depth = *pick(a.cq_depth, setting::cq_depth, call);
  attr.inbox_depth = *pick(a.inbox_depth, setting::inbox_depth, call);
  attr.max_requests = *pick(a.max_requests, setting::max_requests, call);
  attr.backlog_size = *pick(a.backlog_size, setting::backlog_size, call);
  attr.wire_errors_fatal = a.wire_errors_fatal.value_or(util::get_flag(setting::wire_errors_fatal));
  attr.alloc_defaults = a.alloc_defaults.value_or(util::get_flag(setting::alloc_defaults));
  if (attr.packet_size & (attr.packet_size - 1))
    util::fail(call, "packet_size", std::to_string(attr.packet_size), "must be a power of two");
  // A message occupies one cell of packet_size bytes: 16 for the queue, 16 for the header.
  const size_t eager_max = attr.packet_size - 32;
  attr.eager_size = pick(a.eager_size, setting::eager_size, call).value_or(eager_max);
  if (attr.eager_size > eager_max)
    util::fail(call, "eager_size", std::to_string(attr.eager_size),
               "exceeds packet_size - 32 = " + std::to_string(eager_max));
  attr.inject_size = *pick(a.inject_size, setting::inject_size, call);
  if (attr.inject_size > attr.eager_size)
    util::fail(call, "inject_size", std::to_string(attr.inject_size),
               "exceeds the eager size " + std::to_string(attr.eager_size));
}

// Settings that change the wire must agree everywhere (see bootstrap::check_agreement).
void runtime_impl::check_agreement() {
  char mine[512];
  snprintf(mine, sizeof(mine),
           "wire_version=%u packet_size=%zu eager_size=%zu inject_size=%zu alloc_defaults=%d "
           "backend=%s net_backend=%s",
           unsigned(wire_version), attr.packet_size, attr.eager_size, attr.inject_size,
           int(attr.alloc_defaults), util::get_text(util::setting::backend).c_str(),
           net::network_backend_name().c_str());
  boot->check_agreement("cfg-" + std::to_string(id), mine, "g_runtime_init", "settings", "");
}

runtime_impl::~runtime_impl() {
  {
    std::lock_guard<std::mutex> g(g_runtimes_lock);
    std::erase(g_runtimes, this);
  }
  const uint64_t dropped = wire_errors_.load(), shown = wire_errors_shown_.load();
  if (dropped > 10 && dropped > shown)
    util::log_message(util::log_level::error, "rank %d: %llu messages dropped in all", boot->rank(),
                      static_cast<unsigned long long>(dropped));
  if (is_global) {
    runtime_impl* self = this;
    g_runtime.compare_exchange_strong(self, nullptr);
  }
  if (print_stats_)
    for (const device_impl* d : devices_) d->print_counters(stderr);
  for (auto* d : devices_) delete d;
  for (auto* p : pools_) delete p;
  // Registrations left behind stay allocated (a few bytes each), marked dead, so that a
  // deregister_memory after finalize reports the error instead of touching freed memory.
  for (auto* m : mrs_) m->rt = nullptr;
  for (size_t i = 0; i < engines_.size(); ++i) delete engines_.get(i);
}

mr_impl* runtime_impl::register_memory(void* base, size_t size) {
  auto* m = new mr_impl{this, net->register_memory(base, size), {}};
  m->rmr = rmr_t{reinterpret_cast<uint64_t>(base), size, m->net.key, m->net.generation};
  std::lock_guard<std::mutex> g(mr_lock_);
  mrs_.push_back(m);
  return m;
}

void runtime_impl::deregister_memory(mr_impl* m) {
  {
    std::lock_guard<std::mutex> g(mr_lock_);
    auto it = std::find(mrs_.begin(), mrs_.end(), m);
    if (it == mrs_.end())
      util::fail("deregister_memory", "mr", "unknown", "not a registration of this runtime");
    mrs_.erase(it);
  }
  net->deregister_memory(m->net);
  // Accesses already holding the region finish first; ours may need this thread's progress.
  auto start = std::chrono::steady_clock::now();
  while (!net->region_idle(m->net)) {
    progress_all();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      util::fail("deregister_memory", "region", std::to_string(m->rmr.key),
                 "a peer's access has been in progress for 10 s (did it die during the access?)");
  }
  net->release_region(m->net);
  delete m;
}

// Under the resource lock, so that free_device waits for the pass instead of freeing a
// device it progresses; a try-lock, since the callers loop and another thread may hold the
// lock for a collective allocation.
void runtime_impl::progress_all() {
  std::unique_lock<std::mutex> g(lock_, std::try_to_lock);
  if (!g.owns_lock()) return;
  for (auto* d : devices_) d->progress();
}

size_t runtime_impl::pending_operations() {
  std::lock_guard<std::mutex> g(lock_);
  size_t n = 0;
  for (auto* d : devices_) n += d->pending_operations();
  return n;
}

device_impl* runtime_impl::alloc_device(packet_pool_impl* pool, size_t inbox_depth,
                                        bool peers_progress, bool shared) {
  if (!pool) pool = pool_or_fail("alloc_device");
  std::lock_guard<std::mutex> g(lock_);  // collective: one allocation at a time per process
  auto* d = new device_impl(*this, next_device_index_++, pool,
                            inbox_depth ? inbox_depth : attr.inbox_depth, peers_progress, shared);
  devices_.push_back(d);
  return d;
}

void runtime_impl::no_default(const char* call, const char* what) {
  util::fail(call, what, "none",
             std::string("this runtime has no default ") + what +
                 " (it was allocated with alloc_defaults(false)): name one");
}

void runtime_impl::free_device(device_impl* d) {
  std::lock_guard<std::mutex> g(lock_);
  auto it = std::find(devices_.begin(), devices_.end(), d);
  if (it == devices_.end())
    util::fail("free_device", "device", util::to_hex(d), "not a device of this runtime");
  devices_.erase(it);
  delete d;
}

packet_pool_impl* runtime_impl::alloc_pool(size_t packet_size, size_t npackets) {
  auto* p = new packet_pool_impl(packet_size, npackets);
  std::lock_guard<std::mutex> g(lock_);
  pools_.push_back(p);
  pool_index_.push_back(p);
  return p;
}

void runtime_impl::free_pool(packet_pool_impl* p) {
  std::lock_guard<std::mutex> g(lock_);
  for (auto* d : devices_)
    if (d->pool == p)
      util::fail("free_packet_pool", "packet_pool", util::to_hex(p),
                 "device " + std::to_string(d->index) + " still uses it");
  auto it = std::find(pools_.begin(), pools_.end(), p);
  if (it == pools_.end())
    util::fail("free_packet_pool", "packet_pool", util::to_hex(p), "not a pool of this runtime");
  if (p->available() != p->npackets())
    util::fail("free_packet_pool", "packet_pool", util::to_hex(p),
               std::to_string(p->npackets() - p->available()) + " packets are still in use");
  pools_.erase(it);
  for (size_t i = 0; i < pool_index_.size(); ++i)
    if (pool_index_.get(i) == p) pool_index_.put(i, nullptr);
  delete p;
}

bool runtime_impl::has_pool(const packet_pool_impl* p) {
  std::lock_guard<std::mutex> g(lock_);
  return std::find(pools_.begin(), pools_.end(), p) != pools_.end();
}

bool runtime_impl::has_engine(const matching_engine_impl* e) const {
  for (size_t i = 0; i < engines_.size(); ++i)
    if (engines_.get(i) == e) return true;
  return false;
}

packet_pool_impl* runtime_impl::other_pool_owning(const void* ptr) const {
  for (size_t i = 0; i < pool_index_.size(); ++i)
    if (packet_pool_impl* p = pool_index_.get(i); p && p->owns(ptr)) return p;
  return nullptr;
}

matching_engine_impl* runtime_impl::alloc_engine(size_t nbuckets, make_key_fn_t fn) {
  std::lock_guard<std::mutex> g(lock_);
  uint32_t id = uint32_t(engines_.size());
  auto* e = new matching_engine_impl(id, nbuckets ? nbuckets : attr.match_buckets, fn);
  engines_.put(id, e);
  return e;
}

void runtime_impl::free_engine(matching_engine_impl* e) {
  if (!has_engine(e))
    util::fail("free_matching_engine", "engine", util::to_hex(e), "not an engine of this runtime");
  if (e == default_engine || e->id() == internal_engine_id)
    util::fail("free_matching_engine", "engine", std::to_string(e->id()),
               "the runtime's own engines are freed with the runtime");
  if (size_t n = e->entries())
    util::fail("free_matching_engine", "engine", std::to_string(e->id()),
               std::to_string(n) + " receives or unexpected messages are still queued in it");
  std::lock_guard<std::mutex> g(lock_);
  engines_.put(e->id(), nullptr);
  delete e;
}

rcomp_t runtime_impl::register_rcomp(comp_impl* c, bool packet_delivery, bool in_place,
                                     const allocator_t* alloc) {
  std::lock_guard<std::mutex> g(lock_);
  rcomp_storage_.push_back(std::make_unique<rcomp_entry>(
      rcomp_entry{c, packet_delivery, in_place, alloc ? *alloc : allocator}));
  return rcomp_t(rcomps_.push_back(rcomp_storage_.back().get()));
}

// Freeing works in any order: a handle already released (deregistered, or its completion
// object freed, which releases every handle to it) is left as it is; only a handle this
// runtime never gave out is refused.
void runtime_impl::deregister_rcomp(rcomp_t r) {
  if (r >= rcomps_.size())
    util::fail("deregister_rcomp", "rcomp", std::to_string(r),
               "not a remote completion handle of this runtime (" + std::to_string(rcomps_.size()) +
                   " registered)");
  rcomps_.put(r, nullptr);
}

void runtime_impl::forget_comp(comp_impl* c) {
  for (size_t i = 0; i < rcomps_.size(); ++i)
    if (auto* e = rcomps_.get(i); e && e->comp == c) rcomps_.put(i, nullptr);
}

// A handler the program set sees every error. The default log keeps its first lines, then
// says once a second how many more came: messages to a freed queue under traffic once
// logged 400 000 lines.
void runtime_impl::report_wire_error(int peer, const std::string& what) {
  if (auto fn = error_handler.load(std::memory_order_acquire)) {
    fn(wire_error_t{rank(), peer, what});
    return;
  }
  constexpr uint64_t first_lines = 10;
  const uint64_t n = wire_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n <= first_lines) {
    default_error_handler(wire_error_t{rank(), peer, what});
    return;
  }
  const int64_t now = util::now_ns();
  int64_t due = next_wire_summary_ns_.load(std::memory_order_relaxed);
  if (now < due || !next_wire_summary_ns_.compare_exchange_strong(due, now + 1000000000)) return;
  const uint64_t shown = wire_errors_shown_.exchange(n, std::memory_order_relaxed);
  util::log_message(util::log_level::error,
                    "rank %d: %llu more messages dropped since (the last from rank %d: %s)", rank(),
                    static_cast<unsigned long long>(n - std::max(shown, first_lines)), peer,
                    what.c_str());
}

}  // namespace weft::impl
