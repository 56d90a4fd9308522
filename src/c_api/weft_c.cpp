// SPDX-License-Identifier: BSD-3-Clause
// The C API (include/weft/weft.h): each call converts its handles, runs the C++ call and
// turns an exception into a return code, keeping the message for weft_last_error().
#include <atomic>
#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "c_api/guard.hpp"
#include "comp/comp.hpp"
#include "util/fail.hpp"
#include "weft/weft.h"
#include "weft/weft.hpp"

namespace weft::capi {
std::string& last_error() {
  thread_local std::string message;
  return message;
}
}  // namespace weft::capi

namespace {

using namespace weft;

using capi::c_comp;
using capi::cmp;
using capi::guard;
using capi::need;
using capi::to_c;

// Handles: the C pointer is the C++ handle's implementation pointer.
runtime_t rt(weft_runtime_t r) {
  return runtime_t{reinterpret_cast<impl::runtime_impl*>(r)};
}
device_t dev(weft_device_t d) {
  return device_t{reinterpret_cast<impl::device_impl*>(d)};
}
matching_engine_t eng(weft_matching_engine_t e) {
  return matching_engine_t{reinterpret_cast<impl::matching_engine_impl*>(e)};
}
packet_pool_t pool(weft_packet_pool_t p) {
  return packet_pool_t{reinterpret_cast<impl::packet_pool_impl*>(p)};
}
mr_t mreg(weft_mr_t m) {
  return mr_t{reinterpret_cast<impl::mr_impl*>(m)};
}
graph_node_t node(weft_graph_node_t n) {
  return graph_node_t{reinterpret_cast<impl::graph_node*>(n)};
}

status_t from_c(const weft_status_t& s) {
  status_t r;
  r.error = errorcode_t(s.errorcode);
  r.rank = s.rank;
  r.tag = s.tag;
  r.buf = s.buf;
  r.size = s.size;
  r.user_context = s.user_context;
  return r;
}
rmr_t from_c(const weft_rmr_t& m) {
  return rmr_t{m.base, m.size, m.key, m.generation};
}

// The list types are laid out alike, so lists pass through without a copy.
static_assert(sizeof(weft_buffer_t) == sizeof(buffer_t) &&
              offsetof(weft_buffer_t, size) == offsetof(buffer_t, size));
static_assert(sizeof(weft_rbuffer_t) == sizeof(rbuffer_t) &&
              offsetof(weft_rbuffer_t, disp) == offsetof(rbuffer_t, disp) &&
              offsetof(weft_rbuffer_t, size) == offsetof(rbuffer_t, size));
static_assert(sizeof(weft_rmr_t) == sizeof(rmr_t));

detail::comm_args to_args(weft_direction_t direction, int rank, void* buf, size_t size,
                          weft_comp_t comp, const weft_comm_opts_t* o, const char* call) {
  detail::comm_args a;
  a.direction = direction == WEFT_IN ? direction_t::IN : direction_t::OUT;
  a.rank = rank;
  a.local_buffer = buf;
  a.size = size;
  a.local_comp = cmp(comp);
  a.call_name = call;
  if (!o) return a;
  a.runtime = rt(o->runtime);
  a.device = dev(o->device);
  a.matching_engine = eng(o->matching_engine);
  a.matching_policy = matching_policy_t(uint8_t(o->matching_policy));
  a.tag = o->tag;
  a.remote_comp = o->remote_comp;
  a.packet_pool = pool(o->packet_pool);
  a.user_context = o->user_context;
  a.allow_done = o->allow_done;
  a.allow_posted = o->allow_posted;
  a.allow_retry = o->allow_retry;
  a.buffer_is_packet = o->buffer_is_packet;
  a.has_remote_buffer = o->has_remote_buffer || o->remote_buffers;
  a.remote_buffer = from_c(o->remote_buffer);
  a.remote_disp = o->remote_disp;
  a.buffers = reinterpret_cast<const buffer_t*>(o->buffers);
  a.nbuffers = o->nbuffers;
  a.remote_buffers = reinterpret_cast<const rbuffer_t*>(o->remote_buffers);
  a.nremote_buffers = o->nremote_buffers;
  return a;
}

int post(const detail::comm_args& a, weft_status_t* status) {
  return guard([&] {
    need(status, a.call_name, "status");
    *status = to_c(detail::post_comm_impl(a));
  });
}

// A send or active message without options: the short path (detail::post_short_impl),
// with its arguments in registers, on the default device.
int post_short(int rank, weft_rcomp_t rc, void* buf, size_t size, weft_comp_t comp, uint64_t tag,
               const char* call, weft_status_t* status) {
  return guard([&] {
    need(status, call, "status");
    *status = to_c(detail::post_short_impl(device_t{}, uint32_t(rank) | uint64_t(rc) << 32, buf,
                                           size, cmp(comp), tag));
  });
}

int post_one_sided(weft_direction_t d, int rank, void* buf, size_t size, weft_comp_t comp,
                   uint64_t disp, weft_rmr_t rmr, const weft_comm_opts_t* o, const char* call,
                   weft_status_t* status) {
  detail::comm_args a = to_args(d, rank, buf, size, comp, o, call);
  a.has_remote_buffer = true;
  a.remote_buffer = from_c(rmr);
  a.remote_disp = disp;
  return post(a, status);
}

std::atomic<weft_error_handler_fn_t> c_error_handler{nullptr};
void error_trampoline(const wire_error_t& e) {
  if (weft_error_handler_fn_t fn = c_error_handler.load()) fn(e.rank_me, e.peer, e.what.c_str());
}

}  // namespace

extern "C" {

const char* weft_strerror(int code) {
  switch (code) {
    case WEFT_OK: return "ok";
    case WEFT_ERR_USAGE:
      return "the call was refused: a bad argument or state (see weft_last_error)";
    case WEFT_ERR_NOMEM: return "the call ran out of memory";
    case WEFT_ERR_INTERNAL: return "internal error (see weft_last_error)";
  }
  return get_errorcode_str(errorcode_t(code));
}
const char* weft_last_error(void) {
  return capi::last_error().c_str();
}
const char* weft_get_version(void) {
  return get_version();
}

// ---- runtime ----------------------------------------------------------------------------
namespace {
constexpr size_t unset_size = WEFT_UNSET_SIZE;
constexpr int unset_flag = WEFT_UNSET_FLAG;
}  // namespace

void weft_runtime_opts_init(weft_runtime_opts_t* o) {
  if (!o) return;
#define WEFT_ATTR(type, name, ...) o->name = unset_##type;
#include "weft/settings.def"
}

static detail::runtime_args runtime_args_of(const weft_runtime_opts_t* o) {
  detail::runtime_args a;
  if (o) {
#define WEFT_ATTR(type, name, ...) \
  if (o->name != unset_##type) a.name = o->name;
#include "weft/settings.def"
  }
  return a;
}

int weft_g_runtime_init(void) {
  return weft_g_runtime_init_x(nullptr);
}
int weft_g_runtime_init_x(const weft_runtime_opts_t* opts) {
  return guard([&] { detail::alloc_runtime_impl(runtime_args_of(opts), true); });
}
int weft_g_runtime_fina(void) {
  return guard([] { g_runtime_fina(); });
}
weft_runtime_t weft_get_g_runtime(void) {
  return reinterpret_cast<weft_runtime_t>(get_g_runtime().p);
}
int weft_alloc_runtime(const weft_runtime_opts_t* opts, weft_runtime_t* runtime) {
  return guard([&] {
    need(runtime, "alloc_runtime", "runtime");
    *runtime = reinterpret_cast<weft_runtime_t>(
        detail::alloc_runtime_impl(runtime_args_of(opts), false).p);
  });
}
int weft_free_runtime(weft_runtime_t* runtime) {
  return guard([&] {
    runtime_t r = rt(*need(runtime, "free_runtime", "runtime"));
    free_runtime(&r);
    *runtime = nullptr;
  });
}
int weft_runtime_get_attr(weft_runtime_t runtime, weft_runtime_opts_t* attr) {
  return guard([&] {
    need(attr, "runtime_get_attr", "attr");
    runtime_t r = runtime ? rt(runtime) : get_g_runtime();
#define WEFT_ATTR(type, name, ...) attr->name = r.get_attr_##name();
#include "weft/settings.def"
  });
}

static int rank_query(weft_runtime_t runtime, int which) {
  int r = -1;
  detail::rank_args a{rt(runtime)};
  if (guard([&] { r = detail::get_rank_impl(a, which); }) != WEFT_OK) return -1;
  return r;
}
int weft_get_rank_me(void) {
  return rank_query(nullptr, 0);
}
int weft_get_rank_n(void) {
  return rank_query(nullptr, 1);
}
int weft_get_rank_local(void) {
  return rank_query(nullptr, 2);
}
int weft_get_rank_local_n(void) {
  return rank_query(nullptr, 3);
}
int weft_get_rank_me_x(weft_runtime_t runtime) {
  return rank_query(runtime, 0);
}
int weft_get_rank_n_x(weft_runtime_t runtime) {
  return rank_query(runtime, 1);
}

int weft_set_bootstrap(int rank, int size, int local_rank, int local_size,
                       weft_allgather_fn_t allgather, void* arg) {
  return guard([&] {
    if (!allgather)
      throw fatal_error("set_bootstrap", "allgather", "NULL", "a bootstrap needs an allgather");
    bootstrap_ops_t ops;
    ops.rank = rank;
    ops.size = size;
    ops.local_rank = local_rank;
    ops.local_size = local_size;
    ops.allgather = [allgather, arg](const void* s, void* r, size_t len) {
      allgather(s, r, len, arg);
    };
    set_bootstrap(std::move(ops));
  });
}

int weft_set_error_handler(weft_error_handler_fn_t fn, weft_runtime_t runtime) {
  return guard([&] {
    c_error_handler.store(fn);
    set_error_handler(fn ? error_trampoline : nullptr, rt(runtime));
  });
}

// ---- resources ----------------------------------------------------------------------------
int weft_alloc_device(weft_device_t* device) {
  return weft_alloc_device_x(nullptr, nullptr, 0, device);
}
int weft_alloc_device_x(weft_runtime_t runtime, weft_packet_pool_t p, size_t inbox_depth,
                        weft_device_t* device) {
  const weft_device_attr_t a{runtime, p, inbox_depth, 0, 0};
  return weft_alloc_device_attr(&a, device);
}
void weft_device_attr_init(weft_device_attr_t* attr) {
  if (attr) *attr = weft_device_attr_t{nullptr, nullptr, 0, 0, 0};
}
int weft_alloc_device_attr(const weft_device_attr_t* attr, weft_device_t* device) {
  return guard([&] {
    const weft_device_attr_t a = attr ? *attr : weft_device_attr_t{nullptr, nullptr, 0, 0, 0};
    if (a.peers_progress != 0 && a.peers_progress != 1)
      util::fail("alloc_device", "peers_progress", std::to_string(a.peers_progress), "0 or 1");
    if (a.shared != 0 && a.shared != 1)
      util::fail("alloc_device", "shared", std::to_string(a.shared), "0 or 1");
    need(device, "alloc_device", "device");
    *device = reinterpret_cast<weft_device_t>(alloc_device_x()
                                                  .runtime(rt(a.runtime))
                                                  .packet_pool(pool(a.packet_pool))
                                                  .inbox_depth(a.inbox_depth)
                                                  .peers_progress(a.peers_progress == 1)
                                                  .shared(a.shared == 1)()
                                                  .p);
  });
}
int weft_free_device(weft_device_t* device) {
  return guard([&] {
    device_t d = dev(*need(device, "free_device", "device"));
    free_device(&d);
    *device = nullptr;
  });
}
weft_device_t weft_get_default_device(weft_runtime_t runtime) {
  weft_device_t d = nullptr;
  guard([&] { d = reinterpret_cast<weft_device_t>(get_default_device(rt(runtime)).p); });
  return d;
}
int weft_device_get_attr_index(weft_device_t device) {
  return dev(device).get_attr_index();
}
int weft_device_get_attr_peers_progress(weft_device_t device) {
  return dev(device).get_attr_peers_progress() ? 1 : 0;
}
int weft_device_get_attr_shared(weft_device_t device) {
  return dev(device).get_attr_shared() ? 1 : 0;
}
size_t weft_device_get_attr_inbox_depth(weft_device_t device) {
  return dev(device).get_attr_inbox_depth();
}
int weft_device_get_counter(weft_device_t device, weft_counter_t counter, uint64_t* value) {
  return guard([&] {
    need(value, "device_get_counter", "value");
    *value = dev(device).get_counter(counter_t(counter));
  });
}
int weft_device_test_peer(weft_device_t device, int rank, int* alive) {
  return guard([&] { *need(alive, "device_test_peer", "alive") = dev(device).test_peer(rank); });
}
const char* weft_counter_name(weft_counter_t counter) {
  return get_counter_name(counter_t(counter));
}

int weft_alloc_packet_pool(weft_runtime_t runtime, size_t packet_size, size_t npackets,
                           weft_packet_pool_t* out) {
  return guard([&] {
    need(out, "alloc_packet_pool", "pool");
    *out = reinterpret_cast<weft_packet_pool_t>(
        alloc_packet_pool_x().runtime(rt(runtime)).packet_size(packet_size).npackets(npackets)().p);
  });
}
int weft_free_packet_pool(weft_packet_pool_t* p) {
  return guard([&] {
    packet_pool_t pp = pool(*need(p, "free_packet_pool", "pool"));
    free_packet_pool(&pp);
    *p = nullptr;
  });
}
weft_packet_pool_t weft_get_default_packet_pool(weft_runtime_t runtime) {
  weft_packet_pool_t p = nullptr;
  guard([&] { p = reinterpret_cast<weft_packet_pool_t>(get_default_packet_pool(rt(runtime)).p); });
  return p;
}
size_t weft_packet_pool_get_attr_packet_size(weft_packet_pool_t p) {
  return pool(p).get_attr_packet_size();
}
size_t weft_packet_pool_get_attr_npackets(weft_packet_pool_t p) {
  return pool(p).get_attr_npackets();
}
int weft_get_upacket(weft_packet_pool_t p, void** packet) {
  return guard(
      [&] { *need(packet, "get_upacket", "packet") = get_upacket_x().packet_pool(pool(p))(); });
}
int weft_put_upacket(void* packet) {
  return guard([&] { put_upacket(packet); });
}

int weft_alloc_matching_engine(weft_runtime_t runtime, size_t nbuckets, weft_make_key_fn_t make_key,
                               weft_matching_engine_t* engine) {
  return guard([&] {
    need(engine, "alloc_matching_engine", "engine");
    // policy is passed as matching_policy_t, an enum whose underlying type is uint8_t: the
    // calling conventions Weft supports pass both alike.
    auto fn = reinterpret_cast<make_key_fn_t>(reinterpret_cast<void (*)()>(make_key));
    *engine = reinterpret_cast<weft_matching_engine_t>(
        alloc_matching_engine_x().runtime(rt(runtime)).nbuckets(nbuckets).make_key(fn)().p);
  });
}
int weft_free_matching_engine(weft_matching_engine_t* engine) {
  return guard([&] {
    matching_engine_t e = eng(*need(engine, "free_matching_engine", "engine"));
    free_matching_engine(&e);
    *engine = nullptr;
  });
}
weft_matching_engine_t weft_get_default_matching_engine(weft_runtime_t runtime) {
  weft_matching_engine_t e = nullptr;
  guard([&] {
    e = reinterpret_cast<weft_matching_engine_t>(get_default_matching_engine(rt(runtime)).p);
  });
  return e;
}
size_t weft_matching_engine_get_attr_nbuckets(weft_matching_engine_t engine) {
  return eng(engine).get_attr_nbuckets();
}

// ---- completion objects ---------------------------------------------------------------------
int weft_alloc_cq(weft_comp_t* cq) {
  return weft_alloc_cq_x(nullptr, 0, cq);
}
int weft_alloc_cq_x(weft_runtime_t runtime, size_t depth, weft_comp_t* cq) {
  return guard([&] {
    *need(cq, "alloc_cq", "cq") = c_comp(alloc_cq_x().runtime(rt(runtime)).depth(depth)());
  });
}
int weft_alloc_sync(size_t threshold, weft_comp_t* sync) {
  return guard(
      [&] { *need(sync, "alloc_sync", "sync") = c_comp(alloc_sync_x().threshold(threshold)()); });
}
namespace {
// A C program's own completion object: its table, called through one virtual call.
class c_custom_comp final : public impl::comp_impl {
 public:
  explicit c_custom_comp(const weft_comp_ops_t& ops)
      : comp_impl(impl::comp_kind::custom), ops_(ops) {}
  bool signal(const status_t& s) override { return ops_.signal(to_c(s), ops_.ctx) != 0; }

 private:
  const weft_comp_ops_t ops_;
};
}  // namespace

int weft_alloc_custom_comp(const weft_comp_ops_t* ops, weft_comp_t* comp) {
  return guard([&] {
    need(comp, "alloc_custom_comp", "comp");
    if (!need(ops, "alloc_custom_comp", "ops")->signal)
      throw fatal_error("alloc_custom_comp", "ops->signal", "NULL", "the table needs signal");
    *comp = c_comp(comp_t{util::tagged(static_cast<impl::comp_impl*>(new c_custom_comp(*ops)))});
  });
}

int weft_alloc_handler(weft_handler_fn_t fn, void* arg, weft_comp_t* handler) {
  return guard([&] {
    need(handler, "alloc_handler", "handler");
    if (!fn) throw fatal_error("alloc_handler", "fn", "NULL", "a handler needs a function");
    *handler = c_comp(alloc_handler([fn, arg](status_t s) { fn(to_c(s), arg); }));
  });
}
int weft_free_comp(weft_comp_t* comp) {
  return guard([&] {
    comp_t c = cmp(*need(comp, "free_comp", "comp"));
    free_comp(&c);
    *comp = nullptr;
  });
}
int weft_register_rcomp(weft_comp_t comp, weft_rcomp_t* rcomp) {
  return weft_register_rcomp_x(comp, nullptr, 0, rcomp);
}
static allocator_t allocator_of(const weft_allocator_t* a) {
  return a ? allocator_t{a->allocate, a->deallocate, a->ctx} : allocator_t{};
}
int weft_set_allocator(weft_runtime_t runtime, const weft_allocator_t* allocator) {
  return guard([&] { set_allocator(allocator_of(allocator), rt(runtime)); });
}
// register_rcomp_x with a C delivery mode (WEFT_DELIVERY_*).
static register_rcomp_x rcomp_x(weft_comp_t comp, weft_runtime_t runtime, int delivery) {
  if (delivery < WEFT_DELIVERY_MALLOC || delivery > WEFT_DELIVERY_IN_PLACE)
    util::fail("register_rcomp", "delivery", std::to_string(delivery),
               "WEFT_DELIVERY_MALLOC, WEFT_DELIVERY_PACKET or WEFT_DELIVERY_IN_PLACE");
  return register_rcomp_x(cmp(comp))
      .runtime(rt(runtime))
      .packet_delivery(delivery == WEFT_DELIVERY_PACKET)
      .in_place(delivery == WEFT_DELIVERY_IN_PLACE);
}
int weft_register_rcomp_allocator(weft_comp_t comp, weft_runtime_t runtime, int delivery,
                                  const weft_allocator_t* allocator, weft_rcomp_t* rcomp) {
  return guard([&] {
    auto x = rcomp_x(comp, runtime, delivery);
    if (allocator) x.allocator(allocator_of(allocator));
    *need(rcomp, "register_rcomp", "rcomp") = x();
  });
}
int weft_register_rcomp_x(weft_comp_t comp, weft_runtime_t runtime, int delivery,
                          weft_rcomp_t* rcomp) {
  return guard(
      [&] { *need(rcomp, "register_rcomp", "rcomp") = rcomp_x(comp, runtime, delivery)(); });
}
int weft_deregister_rcomp(weft_rcomp_t rcomp, weft_runtime_t runtime) {
  return guard([&] { deregister_rcomp(rcomp, rt(runtime)); });
}
int weft_cq_pop(weft_comp_t cq, weft_status_t* status) {
  return guard([&] { *need(status, "cq_pop", "status") = to_c(cq_pop(cmp(cq))); });
}
int weft_cq_size(weft_comp_t cq, size_t* size) {
  return guard([&] { *need(size, "cq_size", "size") = cq_size(cmp(cq)); });
}

// A synchronizer's statuses come out as C++ statuses: convert them into the caller's array.
static int sync_collect(const char* call, weft_comp_t sync, weft_status_t* statuses, int* ready,
                        const detail::progress_args* wait) {
  return guard([&] {
    comp_t s = cmp(sync);
    impl::comp_impl* c = util::live(s.p, call, "sync");
    if (!c || c->kind != impl::comp_kind::sync)
      throw fatal_error(call, "sync", c ? "not a synchronizer" : "NULL",
                        "pass a comp from alloc_sync");
    if (!wait) need(ready, call, "ready");
    const size_t n = statuses ? static_cast<impl::sync_impl*>(c)->threshold() : 0;
    status_t small[8];
    std::vector<status_t> large(n > 8 ? n : 0);
    status_t* out = !statuses ? nullptr : n > 8 ? large.data() : small;
    bool done = true;
    if (wait)
      detail::sync_wait_impl(s, out, *wait);
    else
      done = sync_test(s, out);
    if (done)
      for (size_t i = 0; i < n; ++i) statuses[i] = to_c(out[i]);
    if (ready) *ready = done;
  });
}
int weft_sync_test(weft_comp_t sync, weft_status_t* statuses, int* ready) {
  return sync_collect("sync_test", sync, statuses, ready, nullptr);
}
int weft_sync_wait(weft_comp_t sync, weft_status_t* statuses) {
  return weft_sync_wait_x(sync, statuses, nullptr, nullptr);
}
int weft_sync_wait_x(weft_comp_t sync, weft_status_t* statuses, weft_runtime_t runtime,
                     weft_device_t device) {
  detail::progress_args a;
  a.runtime = rt(runtime);
  a.device = dev(device);
  return sync_collect("sync_wait", sync, statuses, nullptr, &a);
}
int weft_comp_signal(weft_comp_t comp, weft_status_t status) {
  bool taken = true;
  const int rc = guard([&] { taken = comp_signal(cmp(comp), from_c(status)).is_done(); });
  return rc == WEFT_OK && !taken ? int(WEFT_RETRY_NOMEM) : rc;
}

// ---- memory registration ----------------------------------------------------------------------
int weft_register_memory(void* base, size_t size, weft_mr_t* mr) {
  return weft_register_memory_x(base, size, nullptr, mr);
}
int weft_register_memory_x(void* base, size_t size, weft_runtime_t runtime, weft_mr_t* mr) {
  return guard([&] {
    need(mr, "register_memory", "mr");
    *mr = reinterpret_cast<weft_mr_t>(register_memory_x(base, size).runtime(rt(runtime))().p);
  });
}
int weft_deregister_memory(weft_mr_t* mr) {
  return guard([&] {
    mr_t m = mreg(*need(mr, "deregister_memory", "mr"));
    deregister_memory(&m);
    *mr = nullptr;
  });
}
int weft_alloc_memory(size_t size, weft_runtime_t runtime, weft_mr_t* mr) {
  return guard([&] {
    need(mr, "alloc_memory", "mr");
    *mr = reinterpret_cast<weft_mr_t>(alloc_memory_x(size).runtime(rt(runtime))().p);
  });
}
int weft_free_memory(weft_mr_t* mr) {
  return guard([&] {
    mr_t m = mreg(*need(mr, "free_memory", "mr"));
    free_memory(&m);
    *mr = nullptr;
  });
}
int weft_get_rmr(weft_mr_t mr, weft_rmr_t* out) {
  return guard([&] {
    rmr_t r = get_rmr(mreg(mr));
    *need(out, "get_rmr", "rmr") = weft_rmr_t{r.base, r.size, r.key, r.generation};
  });
}
void* weft_mr_get_attr_base(weft_mr_t mr) {
  return mreg(mr).get_attr_base();
}
size_t weft_mr_get_attr_size(weft_mr_t mr) {
  return mreg(mr).get_attr_size();
}

// ---- operations -------------------------------------------------------------------------------
void weft_comm_opts_init(weft_comm_opts_t* o) {
  if (!o) return;
  *o = weft_comm_opts_t{};
  o->matching_policy = WEFT_MATCH_RANK_TAG;
  o->remote_comp = WEFT_RCOMP_NULL;
  o->allow_done = o->allow_posted = o->allow_retry = 1;
}

int weft_post_comm_x(weft_direction_t direction, int rank, void* buf, size_t size, weft_comp_t comp,
                     const weft_comm_opts_t* opts, weft_status_t* status) {
  return post(to_args(direction, rank, buf, size, comp, opts, "post_comm"), status);
}
int weft_post_send(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                   weft_status_t* status) {
  return post_short(rank, WEFT_RCOMP_NULL, buf, size, comp, tag, "post_send", status);
}
int weft_post_send_x(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                     const weft_comm_opts_t* opts, weft_status_t* status) {
  detail::comm_args a = to_args(WEFT_OUT, rank, buf, size, comp, opts, "post_send");
  a.tag = tag;
  a.remote_comp = rcomp_null;
  return post(a, status);
}
int weft_post_recv(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                   weft_status_t* status) {
  return weft_post_recv_x(rank, buf, size, tag, comp, nullptr, status);
}
int weft_post_recv_x(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                     const weft_comm_opts_t* opts, weft_status_t* status) {
  detail::comm_args a = to_args(WEFT_IN, rank, buf, size, comp, opts, "post_recv");
  a.tag = tag;
  return post(a, status);
}
int weft_post_am(int rank, void* buf, size_t size, weft_comp_t comp, weft_rcomp_t remote_comp,
                 weft_status_t* status) {
  return post_short(rank, remote_comp, buf, size, comp, 0, "post_am", status);
}
int weft_post_am_x(int rank, void* buf, size_t size, weft_comp_t comp, weft_rcomp_t remote_comp,
                   const weft_comm_opts_t* opts, weft_status_t* status) {
  detail::comm_args a = to_args(WEFT_OUT, rank, buf, size, comp, opts, "post_am");
  a.remote_comp = remote_comp;
  return post(a, status);
}
int weft_post_put(int rank, void* buf, size_t size, weft_comp_t comp, uint64_t remote_disp,
                  weft_rmr_t rmr, weft_status_t* status) {
  return post_one_sided(WEFT_OUT, rank, buf, size, comp, remote_disp, rmr, nullptr, "post_put",
                        status);
}
int weft_post_put_x(int rank, void* buf, size_t size, weft_comp_t comp, uint64_t remote_disp,
                    weft_rmr_t rmr, const weft_comm_opts_t* opts, weft_status_t* status) {
  return post_one_sided(WEFT_OUT, rank, buf, size, comp, remote_disp, rmr, opts, "post_put",
                        status);
}
int weft_post_get(int rank, void* buf, size_t size, weft_comp_t comp, uint64_t remote_disp,
                  weft_rmr_t rmr, weft_status_t* status) {
  return post_one_sided(WEFT_IN, rank, buf, size, comp, remote_disp, rmr, nullptr, "post_get",
                        status);
}
int weft_post_get_x(int rank, void* buf, size_t size, weft_comp_t comp, uint64_t remote_disp,
                    weft_rmr_t rmr, const weft_comm_opts_t* opts, weft_status_t* status) {
  return post_one_sided(WEFT_IN, rank, buf, size, comp, remote_disp, rmr, opts, "post_get", status);
}
int weft_cancel_recv(int rank, void* buf, uint64_t tag, weft_comp_t comp,
                     const weft_comm_opts_t* opts, int* cancelled) {
  return guard([&] {
    need(cancelled, "cancel_recv", "cancelled");
    detail::comm_args a = to_args(WEFT_IN, rank, buf, 0, comp, opts, "cancel_recv");
    a.tag = tag;
    *cancelled = detail::cancel_recv_impl(a);
  });
}

// ---- progress and barrier ---------------------------------------------------------------------
int weft_progress(void) {
  return weft_progress_x(nullptr, nullptr, 0);
}
int weft_progress_x(weft_runtime_t runtime, weft_device_t device, uint32_t block_us) {
  weft::error_t e;
  int rc = guard(
      [&] { e = progress_x().runtime(rt(runtime)).device(dev(device)).block_us(block_us)(); });
  return rc != WEFT_OK ? rc : int(e.errorcode);
}
int weft_barrier(void) {
  return guard([] { barrier(); });
}
int weft_barrier_x(weft_runtime_t runtime, weft_device_t device, weft_comp_t comp,
                   weft_status_t* status) {
  return guard([&] {
    status_t s = barrier_x().runtime(rt(runtime)).device(dev(device)).comp(cmp(comp))();
    if (status) *status = to_c(s);
  });
}

// ---- completion graphs
// ---------------------------------------------------------------------------
int weft_alloc_graph(weft_comp_t comp, void* user_context, weft_comp_t* graph) {
  return guard([&] {
    *need(graph, "alloc_graph", "graph") =
        c_comp(alloc_graph_x().comp(cmp(comp)).user_context(user_context)());
  });
}
int weft_graph_add_node(weft_comp_t graph, weft_graph_node_fn_t fn, void* value, const char* name,
                        weft_graph_node_t* out) {
  return guard([&] {
    need(out, "graph_add_node", "node");
    if (!fn) throw fatal_error("graph_add_node", "fn", "NULL", "a function node needs a function");
    graph_node_t n = graph_add_node_x(cmp(graph), [fn](void* v) { return from_c(fn(v)); })
                         .value(value)
                         .name(name)();
    *out = reinterpret_cast<weft_graph_node_t>(n.p);
  });
}
int weft_graph_add_node_comm(weft_comp_t graph, weft_direction_t direction, int rank, void* buf,
                             size_t size, const weft_comm_opts_t* opts, const char* name,
                             weft_graph_node_t* out) {
  return guard([&] {
    need(out, "graph_add_node_op", "node");
    detail::graph_node_args a;
    a.graph = cmp(graph);
    a.is_op = true;
    a.op = to_args(direction, rank, buf, size, graph, opts, "post_comm");
    a.name = name;
    *out = reinterpret_cast<weft_graph_node_t>(detail::graph_add_node_impl(a).p);
  });
}
int weft_graph_add_edge(weft_comp_t graph, weft_graph_node_t source, weft_graph_node_t target,
                        weft_graph_edge_fn_t fn) {
  return guard([&] {
    graph_edge_fn_t f;
    if (fn) f = [fn](status_t s, void* sv, void* tv) { fn(to_c(s), sv, tv); };
    graph_add_edge_x(cmp(graph), node(source), node(target)).fn(f)();
  });
}
int weft_graph_start(weft_comp_t graph) {
  return guard([&] { graph_start(cmp(graph)); });
}
int weft_graph_test(weft_comp_t graph, weft_status_t* status, int* finished) {
  return guard([&] {
    status_t s;
    bool done = graph_test(cmp(graph), &s);
    *need(finished, "graph_test", "finished") = done;
    if (done && status) *status = to_c(s);
  });
}
int weft_graph_wait(weft_comp_t graph, weft_status_t* status) {
  return weft_graph_wait_x(graph, nullptr, nullptr, status);
}
int weft_graph_wait_x(weft_comp_t graph, weft_runtime_t runtime, weft_device_t device,
                      weft_status_t* status) {
  return guard([&] {
    status_t s = graph_wait_x(cmp(graph)).runtime(rt(runtime)).device(dev(device))();
    if (status) *status = to_c(s);
  });
}
int weft_graph_node_mark_complete(weft_graph_node_t n, weft_status_t status) {
  return guard([&] { graph_node_mark_complete(node(n), from_c(status)); });
}
weft_graph_node_t weft_graph_get_failed_node(weft_comp_t graph) {
  weft_graph_node_t n = nullptr;
  guard([&] { n = reinterpret_cast<weft_graph_node_t>(graph_get_failed_node(cmp(graph)).p); });
  return n;
}
const char* weft_graph_node_get_name(weft_graph_node_t n) {
  const char* name = nullptr;
  guard([&] { name = node(n).get_attr_name(); });
  return name;
}
void* weft_graph_node_get_value(weft_graph_node_t n) {
  void* v = nullptr;
  guard([&] { v = node(n).get_attr_value(); });
  return v;
}
int weft_graph_node_get_status(weft_graph_node_t n, weft_status_t* status) {
  return guard(
      [&] { *need(status, "graph_node_get_status", "status") = to_c(node(n).get_attr_status()); });
}

}  // extern "C"
