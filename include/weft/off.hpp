// SPDX-License-Identifier: BSD-3-Clause
// Objectified flexible functions: each `name_x(positional...)` is a functor whose setters
// name the optional arguments, in any order, and whose call operator runs the operation.
#pragma once

#include <optional>
#include <utility>

#include "weft/types.hpp"

namespace weft {

#define WEFT_OFF_ARG(type, name)        \
  auto& name(type v) {                  \
    a_.name = v;                        \
    return static_cast<self_t&>(*this); \
  }

// ---- runtime ----------------------------------------------------------------------------
namespace detail {
// One optional field per runtime attribute (the WEFT_ATTR rows of weft/settings.def); an
// attribute left unset takes its WEFT_* environment variable, else its default.
struct runtime_args {
#define WEFT_ATTR(type, name, ...) std::optional<WEFT_CXX_TYPE_##type> name;
#include "weft/settings.def"
};
WEFT_API runtime_t alloc_runtime_impl(const runtime_args& a, bool global);
}  // namespace detail

// Sets up a runtime: one setter per runtime attribute (packet_size, npackets, ...; see
// docs/configuration.md for each one's meaning, default and range), in any order, then
// call. A value out of range is a fatal_error naming the call, the attribute and the value.
template <bool Global>
class runtime_init_x {
  using self_t = runtime_init_x;
  detail::runtime_args a_;

 public:
#define WEFT_ATTR(type, name, ...) WEFT_OFF_ARG(WEFT_CXX_TYPE_##type, name)
#include "weft/settings.def"
  runtime_t operator()() const {
    return detail::alloc_runtime_impl(a_, Global);
  }
  runtime_t call() const {
    return (*this)();
  }
};
// g_runtime_init_x sets up the global default runtime; alloc_runtime_x an extra one.
using g_runtime_init_x = runtime_init_x<true>;
using alloc_runtime_x = runtime_init_x<false>;

namespace detail {
struct rank_args {
  runtime_t runtime;
};
WEFT_API int get_rank_impl(const rank_args& a, int which);
}  // namespace detail

template <int Which>
class rank_query_x {
  using self_t = rank_query_x;
  detail::rank_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  int operator()() const { return detail::get_rank_impl(a_, Which); }
  int call() const { return (*this)(); }
};
using get_rank_me_x = rank_query_x<0>;
using get_rank_n_x = rank_query_x<1>;
using get_rank_local_x = rank_query_x<2>;
using get_rank_local_n_x = rank_query_x<3>;

// ---- resources --------------------------------------------------------------------------
namespace detail {
struct device_args {
  runtime_t runtime;
  packet_pool_t packet_pool;
  size_t inbox_depth = 0;
  bool peers_progress = false;
  bool shared = false;
};
WEFT_API device_t alloc_device_impl(const device_args& a);
struct packet_pool_args {
  runtime_t runtime;
  size_t packet_size = 0;
  size_t npackets = 0;
};
WEFT_API packet_pool_t alloc_packet_pool_impl(const packet_pool_args& a);
struct matching_engine_args {
  runtime_t runtime;
  size_t nbuckets = 0;
  make_key_fn_t make_key = nullptr;
};
WEFT_API matching_engine_t alloc_matching_engine_impl(const matching_engine_args& a);
struct comp_args {
  runtime_t runtime;
  size_t depth = 0;      // completion queue capacity
  size_t threshold = 1;  // synchronizer: signals before it is ready
  handler_fn_t fn;
};
WEFT_API comp_t alloc_cq_impl(const comp_args& a);
WEFT_API comp_t alloc_sync_impl(const comp_args& a);
WEFT_API comp_t alloc_handler_impl(const comp_args& a);
struct rcomp_args {
  comp_t comp;
  runtime_t runtime;
  bool packet_delivery = false;
  bool in_place = false;
  std::optional<allocator_t> allocator;
};
WEFT_API rcomp_t register_rcomp_impl(const rcomp_args& a);
struct upacket_args {
  runtime_t runtime;
  packet_pool_t packet_pool;
};
WEFT_API void* get_upacket_impl(const upacket_args& a);
}  // namespace detail

class alloc_device_x {
  using self_t = alloc_device_x;
  detail::device_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(packet_pool_t, packet_pool)
  WEFT_OFF_ARG(size_t, inbox_depth)
  // A promise that every rank progresses its device of this index continuously (a progress
  // thread, or a runtime that polls while it waits), so that a backend may move this
  // device's puts by a mechanism that needs the target's CPU when it measures faster
  // (shared memory: as WEFT_SHM_RMA=auto, unless WEFT_SHM_RMA is set). Default false.
  WEFT_OFF_ARG(bool, peers_progress)
  // Many threads will post on and progress this device at once, as on the runtime's default
  // device, so a backend may spread it wider (shared memory: an inbox lane per hardware
  // thread of the rank's share of the host, unless WEFT_SHM_LANES is set). Default false:
  // a device of one thread's own.
  WEFT_OFF_ARG(bool, shared)
  device_t operator()() const { return detail::alloc_device_impl(a_); }
  device_t call() const { return (*this)(); }
};

class alloc_packet_pool_x {
  using self_t = alloc_packet_pool_x;
  detail::packet_pool_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(size_t, packet_size)
  WEFT_OFF_ARG(size_t, npackets)
  packet_pool_t operator()() const { return detail::alloc_packet_pool_impl(a_); }
  packet_pool_t call() const { return (*this)(); }
};

class alloc_matching_engine_x {
  using self_t = alloc_matching_engine_x;
  detail::matching_engine_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(size_t, nbuckets)
  WEFT_OFF_ARG(make_key_fn_t, make_key)
  matching_engine_t operator()() const { return detail::alloc_matching_engine_impl(a_); }
  matching_engine_t call() const { return (*this)(); }
};

class alloc_cq_x {
  using self_t = alloc_cq_x;
  detail::comp_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(size_t, depth)
  comp_t operator()() const { return detail::alloc_cq_impl(a_); }
  comp_t call() const { return (*this)(); }
};

class alloc_sync_x {
  using self_t = alloc_sync_x;
  detail::comp_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(size_t, threshold)
  comp_t operator()() const { return detail::alloc_sync_impl(a_); }
  comp_t call() const { return (*this)(); }
};

class alloc_handler_x {
  using self_t = alloc_handler_x;
  detail::comp_args a_;

 public:
  explicit alloc_handler_x(handler_fn_t fn) { a_.fn = std::move(fn); }
  WEFT_OFF_ARG(runtime_t, runtime)
  comp_t operator()() const { return detail::alloc_handler_impl(a_); }
  comp_t call() const { return (*this)(); }
};

class register_rcomp_x {
  using self_t = register_rcomp_x;
  detail::rcomp_args a_;

 public:
  explicit register_rcomp_x(comp_t comp) { a_.comp = comp; }
  WEFT_OFF_ARG(runtime_t, runtime)
  // Deliver active messages that fit in a packet in a packet (return it with put_upacket)
  // instead of a malloc'd buffer: no allocation on the receive path.
  WEFT_OFF_ARG(bool, packet_delivery)
  // Lend each arriving active message to the handler (comp from alloc_handler) where it
  // arrived: status.buf is valid until the handler returns and stays Weft's (not freed by
  // the program). No allocation, copy or queue on the receive path.
  WEFT_OFF_ARG(bool, in_place)
  // The allocator of this handle's arriving messages (default: the runtime's, set_allocator).
  WEFT_OFF_ARG(allocator_t, allocator)
  rcomp_t operator()() const { return detail::register_rcomp_impl(a_); }
  rcomp_t call() const { return (*this)(); }
};

class get_upacket_x {
  using self_t = get_upacket_x;
  detail::upacket_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(packet_pool_t, packet_pool)
  // nullptr when the pool is empty.
  void* operator()() const { return detail::get_upacket_impl(a_); }
  void* call() const { return (*this)(); }
};

// ---- operations -------------------------------------------------------------------------
namespace detail {
struct comm_args {
  direction_t direction = direction_t::OUT;
  int rank = -1;
  void* local_buffer = nullptr;
  size_t size = 0;
  comp_t local_comp;
  runtime_t runtime;
  device_t device;
  matching_engine_t matching_engine;
  matching_policy_t matching_policy = matching_policy_t::rank_tag;
  tag_t tag = 0;
  rcomp_t remote_comp = rcomp_null;
  bool has_remote_buffer = false;
  rmr_t remote_buffer;
  uint64_t remote_disp = 0;  // offset of the access in the remote region
  packet_pool_t packet_pool;
  void* user_context = nullptr;
  bool allow_done = true;
  bool allow_posted = true;
  bool allow_retry = true;
  bool buffer_is_packet = false;
  // Buffer lists (1..max_buffers entries), instead of local_buffer/size and of one remote
  // region; copied by the post, so the arrays may go once it returns.
  const buffer_t* buffers = nullptr;
  size_t nbuffers = 0;
  const rbuffer_t* remote_buffers = nullptr;
  size_t nremote_buffers = 0;
  // Set by Weft for the last piece of a list put or get: the target's notification
  // reports this whole range instead of the piece.
  bool note_whole = false;
  uint64_t note_addr = 0;
  uint64_t note_size = 0;
  // Set by Weft for what it posts itself (graph nodes, pieces of a list, retries from the
  // backlog): with allow_retry(false) never refused for a full backlog (retry_backlog).
  bool internal = false;
  const char* call_name = "post_comm";
};
WEFT_API status_t post_comm_impl(const comm_args& a);
WEFT_API bool cancel_recv_impl(const comm_args& a);
// A send or active message that names nothing but its positional arguments, a device and
// a tag (the message-rate path): its arguments travel in registers, so the caller never
// builds the 216 bytes of comm_args (about a fifth of the 8-byte message rate went into
// those stores). rank_rcomp: the rank in the low 32 bits, the remote completion above
// (rcomp_null: a send). Same statuses and errors as post_comm_impl, which it falls back on
// for anything but a plain eager message.
WEFT_API status_t post_short_impl(device_t device, uint64_t rank_rcomp, void* buf, size_t size,
                                  comp_t local_comp, tag_t tag);
}  // namespace detail

// A setter that takes the post off the short path (post_short_impl).
#define WEFT_OFF_LONG_ARG(type, name)   \
  auto& name(type v) {                  \
    a_.name = v;                        \
    short_ = false;                     \
    return static_cast<self_t&>(*this); \
  }

template <typename Derived>
class comm_x_base {
 protected:
  using self_t = Derived;
  detail::comm_args a_;
  // Nothing set but what post_short_impl takes: known at compile time when the functor is
  // built and called in one expression, so the other branch and comm_args' stores vanish.
  bool short_ = true;

  // The operation: every post but a short send or active message (post_send_x, post_am_x).
  status_t post() const { return detail::post_comm_impl(a_); }

 public:
  WEFT_OFF_LONG_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(device_t, device)
  WEFT_OFF_LONG_ARG(matching_engine_t, matching_engine)
  WEFT_OFF_LONG_ARG(matching_policy_t, matching_policy)
  WEFT_OFF_ARG(tag_t, tag)
  WEFT_OFF_LONG_ARG(rcomp_t, remote_comp)
  WEFT_OFF_LONG_ARG(packet_pool_t, packet_pool)
  WEFT_OFF_LONG_ARG(void*, user_context)
  WEFT_OFF_LONG_ARG(bool, allow_done)
  WEFT_OFF_LONG_ARG(bool, allow_posted)
  WEFT_OFF_LONG_ARG(bool, allow_retry)
  // The local buffer is a packet from get_upacket: Weft returns it to its pool.
  WEFT_OFF_LONG_ARG(bool, buffer_is_packet)
  auto& remote_buffer(rmr_t v) {
    a_.remote_buffer = v;
    a_.has_remote_buffer = true;
    short_ = false;
    return static_cast<Derived&>(*this);
  }
  auto& remote_disp(uint64_t v) {
    a_.remote_disp = v;
    short_ = false;
    return static_cast<Derived&>(*this);
  }
  // Sends, puts or receives into `n` local buffers in order as one message or transfer
  // (post with local_buffer nullptr and size 0).
  auto& buffers(const buffer_t* list, size_t n) {
    a_.buffers = list;
    a_.nbuffers = n;
    short_ = false;
    return static_cast<Derived&>(*this);
  }
  // Put or get: scatter to (gather from) `n` remote buffers in order instead of one
  // region (post_put_x/post_get_x with an empty rmr_t and remote_disp 0).
  auto& remote_buffers(const rbuffer_t* list, size_t n) {
    a_.remote_buffers = list;
    a_.nremote_buffers = n;
    a_.has_remote_buffer = true;
    short_ = false;
    return static_cast<Derived&>(*this);
  }
  status_t operator()() const { return static_cast<const Derived&>(*this).post(); }
  status_t call() const { return (*this)(); }
  // The arguments as set so far (graph_add_node_op keeps a copy).
  const detail::comm_args& get_args() const { return a_; }

 protected:
  void set_one_sided(direction_t d, int rank, void* local_buffer, size_t size, comp_t local_comp,
                     uint64_t remote_disp, rmr_t rmr, const char* call_name) {
    a_.direction = d;
    a_.rank = rank;
    a_.local_buffer = local_buffer;
    a_.size = size;
    a_.local_comp = local_comp;
    a_.remote_disp = remote_disp;
    a_.remote_buffer = rmr;
    a_.has_remote_buffer = true;
    a_.call_name = call_name;
  }
};

class post_comm_x : public comm_x_base<post_comm_x> {
 public:
  post_comm_x(direction_t direction, int rank, void* local_buffer, size_t size, comp_t local_comp) {
    a_.direction = direction;
    a_.rank = rank;
    a_.local_buffer = local_buffer;
    a_.size = size;
    a_.local_comp = local_comp;
    a_.call_name = "post_comm";
  }
  auto& direction(direction_t v) {
    a_.direction = v;
    return *this;
  }
};

class post_send_x : public comm_x_base<post_send_x> {
 public:
  post_send_x(int rank, void* buf, size_t size, tag_t tag, comp_t comp) {
    a_.rank = rank;
    a_.local_buffer = buf;
    a_.size = size;
    a_.tag = tag;
    a_.local_comp = comp;
    a_.call_name = "post_send";
  }

 private:
  friend comm_x_base<post_send_x>;
  status_t post() const {
    if (short_)
      return detail::post_short_impl(a_.device, uint32_t(a_.rank) | uint64_t(rcomp_null) << 32,
                                     a_.local_buffer, a_.size, a_.local_comp, a_.tag);
    return detail::post_comm_impl(a_);
  }
};

class post_recv_x : public comm_x_base<post_recv_x> {
 public:
  post_recv_x(int rank, void* buf, size_t size, tag_t tag, comp_t comp) {
    a_.direction = direction_t::IN;
    a_.rank = rank;
    a_.local_buffer = buf;
    a_.size = size;
    a_.tag = tag;
    a_.local_comp = comp;
    a_.call_name = "post_recv";
  }
};

class post_am_x : public comm_x_base<post_am_x> {
 public:
  post_am_x(int rank, void* buf, size_t size, comp_t local_comp, rcomp_t remote_comp) {
    a_.rank = rank;
    a_.local_buffer = buf;
    a_.size = size;
    a_.local_comp = local_comp;
    a_.remote_comp = remote_comp;
    a_.call_name = "post_am";
  }

 private:
  friend comm_x_base<post_am_x>;
  status_t post() const {
    if (short_)
      return detail::post_short_impl(a_.device, uint32_t(a_.rank) | uint64_t(a_.remote_comp) << 32,
                                     a_.local_buffer, a_.size, a_.local_comp, a_.tag);
    return detail::post_comm_impl(a_);
  }
};

// One-sided: put `size` bytes of local_buffer at offset remote_disp of the peer's region
// `rmr`, or get them from there. With .remote_comp(rc) the target's completion object is
// signalled too: after a put once the data is visible there, after a get once it has been
// read (status: the initiator's rank, .tag(t), the region's address and the size).
class post_put_x : public comm_x_base<post_put_x> {
 public:
  post_put_x(int rank, void* local_buffer, size_t size, comp_t local_comp, uint64_t remote_disp,
             rmr_t rmr) {
    set_one_sided(direction_t::OUT, rank, local_buffer, size, local_comp, remote_disp, rmr,
                  "post_put");
  }
};

class post_get_x : public comm_x_base<post_get_x> {
 public:
  post_get_x(int rank, void* local_buffer, size_t size, comp_t local_comp, uint64_t remote_disp,
             rmr_t rmr) {
    set_one_sided(direction_t::IN, rank, local_buffer, size, local_comp, remote_disp, rmr,
                  "post_get");
  }
};

// ---- memory registration --------------------------------------------------------------
namespace detail {
struct register_args {
  void* base = nullptr;
  size_t size = 0;
  runtime_t runtime;
};
WEFT_API mr_t register_memory_impl(const register_args& a);
}  // namespace detail

class register_memory_x {
  using self_t = register_memory_x;
  detail::register_args a_;

 public:
  register_memory_x(void* base, size_t size) {
    a_.base = base;
    a_.size = size;
  }
  WEFT_OFF_ARG(runtime_t, runtime)
  mr_t operator()() const { return detail::register_memory_impl(a_); }
  mr_t call() const { return (*this)(); }
};

namespace detail {
struct alloc_memory_args {
  size_t size = 0;
  runtime_t runtime;
};
WEFT_API mr_t alloc_memory_impl(const alloc_memory_args& a);
}  // namespace detail

class alloc_memory_x {
  using self_t = alloc_memory_x;
  detail::alloc_memory_args a_;

 public:
  explicit alloc_memory_x(size_t size) { a_.size = size; }
  WEFT_OFF_ARG(runtime_t, runtime)
  mr_t operator()() const { return detail::alloc_memory_impl(a_); }
  mr_t call() const { return (*this)(); }
};

class cancel_recv_x {
  using self_t = cancel_recv_x;
  detail::comm_args a_;

 public:
  cancel_recv_x(int rank, void* buf, tag_t tag, comp_t comp) {
    a_.direction = direction_t::IN;
    a_.rank = rank;
    a_.local_buffer = buf;
    a_.tag = tag;
    a_.local_comp = comp;
    a_.call_name = "cancel_recv";
  }
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(device_t, device)
  WEFT_OFF_ARG(matching_engine_t, matching_engine)
  WEFT_OFF_ARG(matching_policy_t, matching_policy)
  bool operator()() const { return detail::cancel_recv_impl(a_); }
  bool call() const { return (*this)(); }
};

// ---- progress, completion checking, barrier ---------------------------------------------
namespace detail {
struct progress_args {
  runtime_t runtime;
  device_t device;
  uint32_t block_us = 0;  // progress: when idle, sleep up to this long for a message
  comp_t comp;            // barrier: signalled when the barrier completes (non-blocking form)
};
WEFT_API error_t progress_impl(const progress_args& a);
WEFT_API status_t barrier_impl(const progress_args& a);
WEFT_API void sync_wait_impl(comp_t sync, status_t* statuses, const progress_args& a);
}  // namespace detail

class progress_x {
  using self_t = progress_x;
  detail::progress_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(device_t, device)
  // When this call finds nothing to do, sleep (in the kernel) until a message arrives for
  // the device or `block_us` microseconds pass, then progress once more. For threads that
  // would otherwise spin on an oversubscribed host. 0 (default): never sleep.
  WEFT_OFF_ARG(uint32_t, block_us)
  error_t operator()() const { return detail::progress_impl(a_); }
  error_t call() const { return (*this)(); }
};

// Blocking by default; with .comp(c) it returns posted at once and signals c when every
// rank has entered the barrier (progress the device meanwhile).
class barrier_x {
  using self_t = barrier_x;
  detail::progress_args a_;

 public:
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(device_t, device)
  WEFT_OFF_ARG(comp_t, comp)
  status_t operator()() const { return detail::barrier_impl(a_); }
  status_t call() const { return (*this)(); }
};

// Waits for a synchronizer, progressing a device (the default one unless given).
class sync_wait_x {
  using self_t = sync_wait_x;
  comp_t sync_;
  status_t* statuses_;
  detail::progress_args a_;

 public:
  sync_wait_x(comp_t sync, status_t* statuses) : sync_(sync), statuses_(statuses) {}
  WEFT_OFF_ARG(runtime_t, runtime)
  WEFT_OFF_ARG(device_t, device)
  void operator()() const { detail::sync_wait_impl(sync_, statuses_, a_); }
  void call() const { (*this)(); }
};

#undef WEFT_OFF_ARG

}  // namespace weft
