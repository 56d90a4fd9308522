// SPDX-License-Identifier: BSD-3-Clause
// The public functions: argument resolution and checks, then the resource or device call.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "bootstrap/allgather.hpp"
#include "comp/comp.hpp"
#include "comp/graph.hpp"
#include "core/device.hpp"
#include "core/hooks.hpp"
#include "core/runtime.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"
#include "util/fail.hpp"
#include "util/settings.hpp"
#include "util/spinlock.hpp"

namespace weft {

namespace impl {
void start_barrier(device_impl& d, comp_impl* done);
}  // namespace impl

using namespace impl;  // and through it detail, the headers' plumbing defined here

const char* get_version() {
  return WEFT_VERSION_STRING;
}

const char* get_errorcode_str(errorcode_t code) {
  switch (code) {
    case errorcode_t::done: return "done";
    case errorcode_t::done_backlog: return "done (from the backlog)";
    case errorcode_t::posted: return "posted";
    case errorcode_t::posted_backlog: return "posted (to the backlog)";
    case errorcode_t::retry: return "retry";
    case errorcode_t::retry_lock: return "retry (a try-lock failed)";
    case errorcode_t::retry_nopacket: return "retry (no packet)";
    case errorcode_t::retry_nomem: return "retry (peer queue or request table full)";
    case errorcode_t::retry_backlog: return "retry (the device's backlog is at backlog_size)";
    case errorcode_t::cancelled: return "cancelled";
    case errorcode_t::error: return "error";
    case errorcode_t::error_truncated: return "error: message larger than the receive buffer";
    case errorcode_t::error_peer_dead: return "error: the peer is gone (died or unreachable)";
    case errorcode_t::error_nomem: return "error: the target ran out of memory";
    case errorcode_t::error_region:
      return "error: the remote region was deregistered or the access is outside it";
  }
  return "unknown error code";
}

// ---- attributes ---------------------------------------------------------------------------
#define WEFT_ATTR(type, name, ...)                          \
  WEFT_CXX_TYPE_##type runtime_t::get_attr_##name() const { \
    return resolve_runtime(*this, "get_attr")->attr.name;   \
  }
#include "weft/settings.def"
bool runtime_t::get_attr_yield_when_idle() const {
  return resolve_runtime(*this, "get_attr_yield_when_idle")->yield_when_idle;
}
int device_t::get_attr_index() const {
  return p ? util::live(p, "get_attr_index", "device")->index : -1;
}
uint64_t device_t::get_counter(counter_t c) const {
  if (int(c) < 0 || c >= counter_t::count)
    util::fail("get_counter", "counter", std::to_string(int(c)),
               "not a counter (there are " + std::to_string(int(counter_t::count)) + ")");
  const device_impl* d =
      p ? util::live(p, "get_counter", "device")
        : resolve_runtime(runtime_t{}, "get_counter")->device_or_fail("get_counter");
  return d->read_counter(c);
}
bool device_t::test_peer(int rank) const {
  device_impl* d = p ? util::live(p, "test_peer", "device")
                     : resolve_runtime(runtime_t{}, "test_peer")->device_or_fail("test_peer");
  if (rank < 0 || rank >= d->rt.size())
    util::fail("test_peer", "rank", std::to_string(rank),
               "not a rank of the job (0 .. " + std::to_string(d->rt.size() - 1) + ")");
  return d->check_peer(rank);
}
const char* get_counter_name(counter_t c) {
  return impl::counter_name(c);
}
size_t device_t::get_attr_inbox_depth() const {
  return p ? util::live(p, "get_attr_inbox_depth", "device")->inbox_depth : 0;
}
bool device_t::get_attr_peers_progress() const {
  return p && util::live(p, "get_attr_peers_progress", "device")->peers_progress;
}
bool device_t::get_attr_shared() const {
  return p && util::live(p, "get_attr_shared", "device")->shared;
}
size_t matching_engine_t::get_attr_nbuckets() const {
  return p ? util::live(p, "get_attr_nbuckets", "engine")->nbuckets() : 0;
}
size_t packet_pool_t::get_attr_packet_size() const {
  return p ? util::live(p, "get_attr_packet_size", "pool")->packet_size() : 0;
}
size_t packet_pool_t::get_attr_npackets() const {
  return p ? util::live(p, "get_attr_npackets", "pool")->npackets() : 0;
}

// ---- runtime ------------------------------------------------------------------------------
namespace detail {

runtime_t alloc_runtime_impl(const runtime_args& a, bool global) {
  if (global && global_runtime())
    util::fail("g_runtime_init", "global runtime", "already active",
               "call g_runtime_fina() before initialising it again");
  const char* call = global ? "g_runtime_init" : "alloc_runtime";
  return runtime_t{
      util::tagged(util::allocating(call, "runtime attributes", a.max_requests.value_or(0),
                                    [&] { return new runtime_impl(a, global); }))};
}

int get_rank_impl(const rank_args& a, int which) {
  runtime_impl* rt = resolve_runtime(a.runtime, "get_rank");
  switch (which) {
    case 0: return rt->rank();
    case 1: return rt->size();
    case 2: return rt->boot->local_rank();
    default: return rt->boot->local_size();
  }
}

}  // namespace detail

namespace {
void destroy_runtime(runtime_impl* rt, const char* call) {
  if (size_t n = rt->pending_operations())
    util::fail(call, "runtime", std::to_string(rt->id),
               std::to_string(n) + " operations are still pending (progress until they complete)");
  delete rt;
}
}  // namespace

void g_runtime_fina() {
  runtime_impl* rt = global_runtime();
  if (!rt) util::fail("g_runtime_fina", "runtime", "none", "no global runtime is active");
  destroy_runtime(rt, "g_runtime_fina");
}

runtime_t get_g_runtime() {
  return runtime_t{util::tagged(global_runtime())};
}

void free_runtime(runtime_t* runtime) {
  if (!runtime || !runtime->p) util::fail("free_runtime", "runtime", "empty", "nothing to free");
  destroy_runtime(util::live(runtime->p, "free_runtime", "runtime"), "free_runtime");
  runtime->p = nullptr;
}

void set_bootstrap(bootstrap_ops_t ops) {
  if (bootstrap::bootstrap_active())
    util::fail("set_bootstrap", "ops", "rank " + std::to_string(ops.rank),
               "a runtime is active: call set_bootstrap before g_runtime_init/alloc_runtime");
  if (!ops.allgather)
    util::fail("set_bootstrap", "allgather", "empty", "a bootstrap needs an allgather");
  if (ops.size < 1 || ops.rank < 0 || ops.rank >= ops.size)
    util::fail("set_bootstrap", "rank", std::to_string(ops.rank),
               "needs 0 <= rank < size = " + std::to_string(ops.size));
  if (ops.local_size > 0 &&
      (ops.local_rank < 0 || ops.local_rank >= ops.local_size || ops.local_size > ops.size))
    util::fail("set_bootstrap", "local_rank",
               std::to_string(ops.local_rank) + " of " + std::to_string(ops.local_size),
               "needs 0 <= local_rank < local_size <= size");
  bootstrap::set_user_bootstrap(ops);
}

void set_error_handler(error_handler_fn_t fn, runtime_t runtime) {
  resolve_runtime(runtime, "set_error_handler")->error_handler.store(fn);
}

// ---- resources ----------------------------------------------------------------------------
namespace detail {

// Sizes: upper bounds checked at the call; an allocation that fails is Weft's error.
device_t alloc_device_impl(const device_args& a) {
  runtime_impl* rt = resolve_runtime(a.runtime, "alloc_device");
  if (a.inbox_depth) util::check_given(util::setting::inbox_depth, a.inbox_depth, "alloc_device");
  packet_pool_impl* pool = util::live(a.packet_pool.p, "alloc_device", "packet_pool");
  return device_t{util::tagged(util::allocating("alloc_device", "inbox_depth", a.inbox_depth, [&] {
    return rt->alloc_device(pool, a.inbox_depth, a.peers_progress, a.shared);
  }))};
}

packet_pool_t alloc_packet_pool_impl(const packet_pool_args& a) {
  runtime_impl* rt = resolve_runtime(a.runtime, "alloc_packet_pool");
  size_t ps = a.packet_size ? a.packet_size : rt->attr.packet_size;
  size_t n = a.npackets ? a.npackets : rt->attr.npackets;
  if (ps < 64 || ps > (size_t(1) << 30))
    util::fail("alloc_packet_pool", "packet_size", std::to_string(ps), "must be 64 B .. 1 GiB");
  util::check_given(util::setting::npackets, n, "alloc_packet_pool");
  if (ps * n > (size_t(1) << 40))
    util::fail("alloc_packet_pool", "npackets", std::to_string(n),
               "packet_size x npackets exceeds 1 TiB");
  return packet_pool_t{util::tagged(
      util::allocating("alloc_packet_pool", "npackets", n, [&] { return rt->alloc_pool(ps, n); }))};
}

matching_engine_t alloc_matching_engine_impl(const matching_engine_args& a) {
  runtime_impl* rt = resolve_runtime(a.runtime, "alloc_matching_engine");
  if (a.nbuckets)
    util::check_given(util::setting::match_buckets, a.nbuckets, "alloc_matching_engine",
                      "nbuckets");
  return matching_engine_t{
      util::tagged(util::allocating("alloc_matching_engine", "nbuckets", a.nbuckets,
                                    [&] { return rt->alloc_engine(a.nbuckets, a.make_key); }))};
}

comp_t alloc_cq_impl(const comp_args& a) {
  runtime_impl* rt = resolve_runtime(a.runtime, "alloc_cq");
  const size_t depth = a.depth ? a.depth : rt->attr.cq_depth;
  util::check_given(util::setting::cq_depth, depth, "alloc_cq", "depth");
  return comp_t{util::tagged(
      util::allocating("alloc_cq", "depth", depth, [&] { return new cq_impl(depth); }))};
}

comp_t alloc_sync_impl(const comp_args& a) {
  if (a.threshold < 1 || a.threshold > (size_t(1) << 24))
    util::fail("alloc_sync", "threshold", std::to_string(a.threshold), "must be 1 .. 2^24");
  return comp_t{util::tagged(util::allocating("alloc_sync", "threshold", a.threshold,
                                              [&] { return new sync_impl(a.threshold); }))};
}

}  // namespace detail

comp_t alloc_custom_comp(custom_comp* c) {
  if (!c) util::fail("alloc_custom_comp", "comp", "nullptr", "give the program's object");
  return comp_t{util::tagged(static_cast<comp_impl*>(
      util::allocating("alloc_custom_comp", "comp", 1, [&] { return new custom_comp_impl(c); })))};
}

namespace detail {

comp_t alloc_handler_impl(const comp_args& a) {
  if (!a.fn) util::fail("alloc_handler", "fn", "empty", "a handler needs a function");
  return comp_t{util::tagged(static_cast<comp_impl*>(new handler_impl(a.fn)))};
}

rcomp_t register_rcomp_impl(const rcomp_args& a) {
  if (!a.comp.p)
    util::fail("register_rcomp", "comp", "empty", "register an allocated completion object");
  comp_impl* c = util::live(a.comp.p, "register_rcomp", "comp");
  if (a.allocator && !a.allocator->allocate != !a.allocator->deallocate)
    util::fail("register_rcomp", "allocator", "half set",
               "give both allocate and deallocate, or neither (malloc and free)");
  // Lent buffers go back when the completion returns: only a handler returns at once.
  if (a.in_place && c->kind != comp_kind::handler)
    util::fail("register_rcomp", "in_place", "true",
               "messages are lent only to a handler (alloc_handler), which returns before the "
               "buffer is reused; this comp keeps statuses for later");
  if (a.in_place && a.packet_delivery)
    util::fail("register_rcomp", "packet_delivery", "true",
               "in_place lends the message where it arrived: no packet to deliver it in");
  return resolve_runtime(a.runtime, "register_rcomp")
      ->register_rcomp(c, a.packet_delivery, a.in_place, a.allocator ? &*a.allocator : nullptr);
}

void* get_upacket_impl(const upacket_args& a) {
  packet_pool_impl* p = util::live(a.packet_pool.p, "get_upacket", "packet_pool");
  if (!p) p = resolve_runtime(a.runtime, "get_upacket")->pool_or_fail("get_upacket");
  return p->get();
}

}  // namespace detail

void free_device(device_t* device) {
  if (!device || !device->p) util::fail("free_device", "device", "empty", "nothing to free");
  device_impl* d = util::live(device->p, "free_device", "device");
  if (d == d->rt.default_device)
    util::fail("free_device", "device", "default device", "the runtime frees its default device");
  if (size_t n = d->pending_operations())
    util::fail("free_device", "device", std::to_string(d->index),
               std::to_string(n) + " operations are still pending on it");
  d->rt.free_device(d);
  device->p = nullptr;
}

device_t get_default_device(runtime_t runtime) {
  return device_t{util::tagged(resolve_runtime(runtime, "get_default_device")->default_device)};
}

void free_packet_pool(packet_pool_t* pool) {
  if (!pool || !pool->p) util::fail("free_packet_pool", "pool", "empty", "nothing to free");
  packet_pool_impl* p = util::live(pool->p, "free_packet_pool", "pool");
  // The pool's own runtime, whichever it is (not the global one by default).
  runtime_impl* rt = find_runtime([&](runtime_impl& r) { return r.has_pool(p); });
  if (!rt)
    util::fail("free_packet_pool", "pool", util::to_hex(pool->p),
               "not a pool of any live runtime (freed already, or its runtime was)");
  if (p == rt->default_pool)
    util::fail("free_packet_pool", "pool", "default pool", "the runtime frees its default pool");
  rt->free_pool(p);
  pool->p = nullptr;
}

packet_pool_t get_default_packet_pool(runtime_t runtime) {
  return packet_pool_t{
      util::tagged(resolve_runtime(runtime, "get_default_packet_pool")->default_pool)};
}

void free_matching_engine(matching_engine_t* engine) {
  if (!engine || !engine->p)
    util::fail("free_matching_engine", "engine", "empty", "nothing to free");
  matching_engine_impl* e = util::live(engine->p, "free_matching_engine", "engine");
  runtime_impl* rt = find_runtime([&](runtime_impl& r) { return r.has_engine(e); });
  if (!rt)
    util::fail("free_matching_engine", "engine", util::to_hex(engine->p),
               "not an engine of any live runtime (freed already, or its runtime was)");
  rt->free_engine(e);
  engine->p = nullptr;
}

matching_engine_t get_default_matching_engine(runtime_t runtime) {
  return matching_engine_t{
      util::tagged(resolve_runtime(runtime, "get_default_matching_engine")->default_engine)};
}

void free_comp(comp_t* comp) {
  if (!comp || !comp->p) util::fail("free_comp", "comp", "empty", "nothing to free");
  comp_impl* c = util::live(comp->p, "free_comp", "comp");
  if (c->kind == comp_kind::graph && c->pending.load(std::memory_order_acquire))
    util::fail("free_comp", "comp", util::to_hex(c), "the graph is running");
  if (int64_t n = c->in_flight())
    util::fail("free_comp", "comp", util::to_hex(c),
               std::to_string(n) + " operations that signal it are still pending");
  // Registered for remote completion on any runtime: forgotten on each.
  find_runtime([c](runtime_impl& r) {
    r.forget_comp(c);
    return false;
  });
  if (c->free_self()) {  // it releases itself (it may throw first: a continuation armed)
    comp->p = nullptr;
    return;
  }
  delete c;
  comp->p = nullptr;
}

void set_allocator(allocator_t allocator, runtime_t runtime) {
  if (!allocator.allocate != !allocator.deallocate)
    util::fail("set_allocator", "allocator", "half set",
               "give both allocate and deallocate, or neither (malloc and free)");
  runtime_impl* rt = resolve_runtime(runtime, "set_allocator");
  std::lock_guard<std::mutex> g(rt->registry_lock());
  rt->allocator = allocator;
}

void deregister_rcomp(rcomp_t rcomp, runtime_t runtime) {
  resolve_runtime(runtime, "deregister_rcomp")->deregister_rcomp(rcomp);
}

namespace {
[[noreturn, gnu::cold, gnu::noinline]] void fail_kind(const comp_impl* p, const char* call,
                                                      const char* arg, const char* what,
                                                      const char* alloc) {
  util::fail(call, arg, p ? what : "empty", alloc);
}

// The completion queue or synchronizer a handle names, checked. Inline: queues are popped
// on the critical path.
template <typename T>
[[gnu::always_inline]] inline T* as_kind(comp_t c, comp_kind k, const char* call, const char* arg,
                                         const char* what, const char* alloc) {
  comp_impl* p = util::live(c.p, call, arg);
  if (!p || p->kind != k) [[unlikely]]
    fail_kind(p, call, arg, what, alloc);
  return static_cast<T*>(p);
}
}  // namespace

status_t cq_pop(comp_t cq) {
  auto* q = as_kind<cq_impl>(cq, comp_kind::cq, "cq_pop", "cq", "not a completion queue",
                             "pass a comp from alloc_cq");
  status_t s;
  if (!q->pop(s)) s.error = errorcode_t::retry;
  return s;
}

size_t cq_size(comp_t cq) {
  return as_kind<cq_impl>(cq, comp_kind::cq, "cq_size", "cq", "not a completion queue",
                          "pass a comp from alloc_cq")
      ->size();
}

bool sync_test(comp_t sync, status_t* statuses) {
  return as_kind<sync_impl>(sync, comp_kind::sync, "sync_test", "sync", "not a synchronizer",
                            "pass a comp from alloc_sync")
      ->test(statuses);
}

error_t comp_signal(comp_t comp, status_t status) {
  comp_impl* c = util::live(comp.p, "comp_signal", "comp");
  if (!c) util::fail("comp_signal", "comp", "empty", "nothing to signal");
  if (c->kind == comp_kind::graph)
    util::fail("comp_signal", "comp", "a graph",
               "finish a function node with graph_node_mark_complete instead");
  return signal_comp(c, status) ? errorcode_t::done : errorcode_t::retry_nomem;
}

// A packet of another pool or runtime, a malloc'd buffer (a large message) or null: out of
// line, so that the usual return (a packet of the global runtime's default pool) saves no
// registers and builds no std::function.
[[gnu::noinline]] static void put_upacket_other(void* packet) {
  if (!packet) util::fail("put_upacket", "packet", "nullptr", "nothing to return");
  runtime_impl* rt = global_runtime();
  packet_pool_impl* p = rt ? rt->pool_owning(packet) : nullptr;
  if (!p) find_runtime([&](runtime_impl& r) { return (p = r.pool_owning(packet)) != nullptr; });
  if (p)
    p->put(packet);
  else
    std::free(packet);
}

void put_upacket(void* packet) {
  runtime_impl* rt = global_runtime();
  packet_pool_impl* p = rt ? rt->default_pool : nullptr;
  if (p && p->owns(packet)) [[likely]]
    return p->put(packet);
  put_upacket_other(packet);
}

// ---- operations ---------------------------------------------------------------------------
namespace detail {

// The device of arguments whose handles untagged() has already checked and stripped:
// checking a stripped handle again would take a reused object for a stale one.
static device_impl* device_of_untagged(const comm_args& b) {
  if (b.device.p) return b.device.p;
  if (b.runtime.p) return b.runtime.p->device_or_fail(b.call_name);
  return resolve_runtime(runtime_t{}, b.call_name)->device_or_fail(b.call_name);
}

// Whether every handle a post names is live, and none but the completion object carries a
// generation tag (its object's memory was freed before: a recycled continuation, a
// synchronizer allocated per operation); the layers below read that one through comp_of,
// which takes the tag off. False sends the post the slow way, which copies the arguments
// with their tags taken off, or says what is wrong. Inline, one compare per handle: every
// post passes here.
[[gnu::always_inline]] static inline bool live_as_given(const comm_args& a) {
  const auto c = reinterpret_cast<uintptr_t>(a.local_comp.p);
  const auto e = reinterpret_cast<uintptr_t>(a.matching_engine.p);
  const auto p = reinterpret_cast<uintptr_t>(a.packet_pool.p);
  const auto d = reinterpret_cast<uintptr_t>(a.device.p);
  const auto r = reinterpret_cast<uintptr_t>(a.runtime.p);
  if ((e | p | d | r) & ~util::gen::address_mask) return false;
  return util::live_any(c) && util::live_untagged(e) && util::live_untagged(p) &&
         util::live_untagged(d) && util::live_untagged(r);
}

// A copy of `a` whose handles are checked and stripped of their tags (the layers below
// dereference them).
[[gnu::noinline]] static comm_args untagged(const comm_args& a) {
  const char* call = a.call_name;
  comm_args b = a;
  b.local_comp.p = util::live(a.local_comp.p, call, "local_comp");
  b.matching_engine.p = util::live(a.matching_engine.p, call, "matching_engine");
  b.packet_pool.p = util::live(a.packet_pool.p, call, "packet_pool");
  b.device.p = util::live(a.device.p, call, "device");
  b.runtime.p = util::live(a.runtime.p, call, "runtime");
  return b;
}

[[gnu::noinline]] static status_t post_tagged(const comm_args& a) {
  const comm_args b = untagged(a);
  return device_of_untagged(b)->post(b);
}

status_t post_comm_impl(const comm_args& a) {
  if (!live_as_given(a)) [[unlikely]]
    return post_tagged(a);
  // Checked above: the device needs no second look.
  if (a.device.p) return a.device.p->post(a);
  return resolve_runtime(a.runtime, a.call_name)->device_or_fail(a.call_name)->post(a);
}

bool cancel_recv_impl(const comm_args& a) {
  const comm_args b = untagged(a);
  device_impl* d = device_of_untagged(b);
  if (b.rank < 0 || b.rank >= d->rt.size())
    util::fail("cancel_recv", "rank", std::to_string(b.rank),
               "out of range [0, " + std::to_string(d->rt.size()) + ")");
  return d->cancel(b);
}

[[gnu::noinline]] static device_impl* default_device(const progress_args& a, const char* call) {
  return resolve_runtime(a.runtime, call)->device_or_fail(call);
}

// Inline: every progress call passes here.
[[gnu::always_inline]] static inline device_impl* resolve_device(const progress_args& a,
                                                                 const char* call) {
  if (a.device.p) [[likely]]
    return util::live(a.device.p, call, "device");
  return default_device(a, call);
}

error_t progress_impl(const progress_args& a) {
  device_impl* d = resolve_device(a, "progress");
  error_t e = d->progress();
  if (e.is_retry() && a.block_us && d->backlog_empty()) {
    d->net->wait_for_message(a.block_us);
    e = d->progress();
  }
  if (auto* hook = progress_hook.load(std::memory_order_relaxed)) [[unlikely]]
    hook();
  return e;
}

status_t barrier_impl(const progress_args& a) {
  device_impl* d = resolve_device(a, "barrier");
  status_t s;
  s.rank = d->rt.rank();
  if (a.comp.p) {
    start_barrier(*d, util::live(a.comp.p, "barrier", "comp"));
    s.error = errorcode_t::posted;
    return s;
  }
  sync_impl done(1);
  start_barrier(*d, &done);
  status_t out;
  while (!done.test(&out)) d->progress();
  if (out.error.is_error())
    util::fail("barrier", "rank", std::to_string(out.rank), out.error.get_str());
  s.error = errorcode_t::done;
  return s;
}

status_t graph_wait_impl(comp_t graph, const progress_args& a) {
  device_impl* d = resolve_device(a, "graph_wait");
  status_t s;
  while (!graph_test(graph, &s)) d->progress();
  return s;
}

void sync_wait_impl(comp_t sync, status_t* statuses, const progress_args& a) {
  auto* s = as_kind<sync_impl>(sync, comp_kind::sync, "sync_wait", "sync", "not a synchronizer",
                               "pass a comp from alloc_sync");
  device_impl* d = resolve_device(a, "sync_wait");
  while (!s->test(statuses)) d->progress();
}

}  // namespace detail
}  // namespace weft
