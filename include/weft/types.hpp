// SPDX-License-Identifier: BSD-3-Clause
// Weft public value types: status, error codes, handles, limits, the exception type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "weft/export.hpp"

// The C++ type of each `type` column of weft/settings.def.
#define WEFT_CXX_TYPE_size size_t
#define WEFT_CXX_TYPE_flag bool

namespace weft {

// Two namespaces for what users need not touch: detail holds the headers' own plumbing
// (argument structs, the *_impl entry points the functors call); impl holds the private
// classes behind the handles, declared here only so that a handle can point to one. The
// private side sees detail whole.
namespace detail {}
namespace impl {
using namespace detail;
class runtime_impl;
class device_impl;
class comp_impl;
class matching_engine_impl;
class packet_pool_impl;
struct mr_impl;
struct graph_node;
}  // namespace impl

using tag_t = uint64_t;
// Tags are 64 bits, as task runtimes use (LCW, HPX): every value 0..max_tag is a user tag.
// The wire carries them in the 16-byte header at no extra cost.
inline constexpr tag_t max_tag = UINT64_MAX;
// Largest message or transfer Weft accepts (128 TiB, beyond any user address range).
inline constexpr size_t max_msg_size = size_t(1) << 47;

// The category of an error code is given by its range; see docs/api.md.
enum class errorcode_t : int {
  done = 0,         // completed immediately; the status carries the completion data
  done_backlog,     // a backlogged operation completed (seen only in completion objects)
  posted = 16,      // posted; the completion object will be signalled
  posted_backlog,   // could not be submitted now and went to the backlog queue
  retry = 32,       // resubmit later: a temporary resource shortage
  retry_lock,       // a try-lock on a shared resource failed
  retry_nopacket,   // the packet pool is empty
  retry_nomem,      // the peer's receive queue or a request table is full
  retry_backlog,    // the device's backlog holds backlog_size items: progress and drain first
  cancelled = 48,   // a posted receive was cancelled before it matched
  error = 64,       // generic failure delivered to a completion object
  error_truncated,  // the message was larger than the posted receive buffer
  error_peer_dead,  // the peer process died with the operation pending
  error_nomem,      // the target could not allocate the buffer for an active message
  error_region,     // a put or get refused: the remote region was deregistered meanwhile
};

WEFT_API const char* get_errorcode_str(errorcode_t code);

struct error_t {
  errorcode_t errorcode = errorcode_t::retry;

  constexpr error_t() = default;
  constexpr error_t(errorcode_t c) : errorcode(c) {}
  constexpr bool is_done() const { return errorcode < errorcode_t::posted; }
  constexpr bool is_posted() const {
    return errorcode >= errorcode_t::posted && errorcode < errorcode_t::retry;
  }
  constexpr bool is_retry() const {
    return errorcode >= errorcode_t::retry && errorcode < errorcode_t::cancelled;
  }
  constexpr bool is_cancelled() const { return errorcode == errorcode_t::cancelled; }
  constexpr bool is_error() const { return errorcode >= errorcode_t::error; }
  const char* get_str() const { return get_errorcode_str(errorcode); }
  // Spelt out, not defaulted: the public headers compile as C++17 (HPX and LCW still are).
  constexpr bool operator==(const error_t& o) const { return errorcode == o.errorcode; }
  constexpr bool operator!=(const error_t& o) const { return errorcode != o.errorcode; }
};

struct buffer_t {
  void* base = nullptr;
  size_t size = 0;
};

// The completion descriptor: returned by a post call that finished at once (done), and
// passed to completion objects. For an error status, `rank` names the peer.
struct status_t {
  error_t error;
  int rank = -1;
  tag_t tag = 0;
  void* buf = nullptr;
  size_t size = 0;
  void* user_context = nullptr;

  buffer_t get_buffer() const { return {buf, size}; }
};

enum class direction_t : uint8_t { OUT, IN };

// A device's performance counters: one per row of weft/counters.def (sent_inject,
// sent_eager, ..., peers_dead), read with device_t::get_counter.
enum class counter_t : int {
#define WEFT_COUNTER(name, NAME, doc) name,
#include "weft/counters.def"
  count
};

enum class matching_policy_t : uint8_t {
  none = 0,       // any rank, any tag (the sender must use the same policy)
  rank_only = 1,  // match on source rank, any tag
  tag_only = 2,   // match on tag, any rank
  rank_tag = 3,   // match on both (default)
};

// A user key function replaces the matching engine's own key computation.
using make_key_fn_t = uint64_t (*)(int rank, tag_t tag, matching_policy_t policy);

// Handles are small trivially copyable values: `thread_local device_t d;` works. Each
// converts to an opaque pointer (get_opaque) and back (from_opaque), so a runtime can keep
// it in its own C structures without naming Weft's private classes; the pointer carries
// the handle's generation, so a stale one is still refused on use.
#define WEFT_HANDLE_OPAQUE(handle, impl_type)  \
  void* get_opaque() const {                   \
    return p;                                  \
  }                                            \
  static handle from_opaque(void* v) {         \
    return handle{static_cast<impl_type*>(v)}; \
  }
struct runtime_t {
  impl::runtime_impl* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  WEFT_HANDLE_OPAQUE(runtime_t, impl::runtime_impl)
  // Attributes, fixed when the runtime is allocated: get_attr_<name>() for each WEFT_ATTR
  // row of weft/settings.def (packet_size, npackets, ...), the value in force after the
  // call's arguments, the environment and the defaults were resolved. A freed runtime is
  // a fatal_error naming get_attr.
#define WEFT_ATTR(type, name, ...) WEFT_API WEFT_CXX_TYPE_##type get_attr_##name() const;
#include "weft/settings.def"
  // Whether this runtime's progress gives the core away when it finds nothing to do
  // (WEFT_YIELD as resolved at allocation; auto: this machine runs more ranks of the job
  // than it has CPUs online). A task runtime's idle threads read it to sleep rather than
  // spin or yield there.
  WEFT_API bool get_attr_yield_when_idle() const;
};
struct device_t {
  impl::device_impl* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  WEFT_HANDLE_OPAQUE(device_t, impl::device_impl)
  WEFT_API int get_attr_index() const;
  WEFT_API size_t get_attr_inbox_depth() const;
  // Whether it was allocated with peers_progress (alloc_device_x); false for an empty handle.
  WEFT_API bool get_attr_peers_progress() const;
  // Whether it is shared (alloc_device_x's `shared`; the default device is); false for an
  // empty handle.
  WEFT_API bool get_attr_shared() const;
  // Counter `c` of this device, summed over the threads that used it; an empty handle reads
  // the global runtime's default device. A freed device is a fatal_error naming
  // get_counter.
  WEFT_API uint64_t get_counter(counter_t c) const;
  // Whether peer `rank` is alive, asked of the transport now (a system call on shared
  // memory). A peer found gone is gone for good on this device: every operation with it
  // ends with error_peer_dead, as when progress finds it. Progress looks for dead peers
  // only while operations wait on them; a runtime that waits for peers by its own
  // protocol (a task engine waiting for a peer's next message) asks here. A rank out of
  // range is a fatal_error naming test_peer; this rank is always alive. An empty handle
  // asks the global runtime's default device.
  WEFT_API bool test_peer(int rank) const;
};
struct comp_t {
  impl::comp_impl* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  WEFT_HANDLE_OPAQUE(comp_t, impl::comp_impl)
};
struct matching_engine_t {
  impl::matching_engine_impl* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  WEFT_HANDLE_OPAQUE(matching_engine_t, impl::matching_engine_impl)
  WEFT_API size_t get_attr_nbuckets() const;
};
struct packet_pool_t {
  impl::packet_pool_impl* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  WEFT_HANDLE_OPAQUE(packet_pool_t, impl::packet_pool_impl)
  WEFT_API size_t get_attr_packet_size() const;
  WEFT_API size_t get_attr_npackets() const;
};
// A completion object of the program's own kind (a task runtime's own future or event):
// subclass it, allocate it as the program likes, and hand it to alloc_custom_comp; Weft
// then signals it like its own objects, through one virtual call, allocating nothing.
// signal() runs on the signalling thread (inside progress or a post) and must neither
// block nor throw; it returns false when the object cannot take the status now, and Weft
// keeps the status in the device's backlog and signals again later (back-pressure, as a
// full queue gives). The object must outlive its comp_t (free_comp first).
class custom_comp {
 public:
  virtual ~custom_comp() = default;
  virtual bool signal(const status_t& status) = 0;
};

// Where the buffers of arriving active messages come from (LCI v2's set_allocator): a
// runtime that frees them with its own allocator sets it once, and Weft allocates them
// there instead of with malloc. `allocate` returns `size` bytes or nullptr (no memory: the
// message is refused as malloc failing would be, error_nomem at the sender for a
// rendezvous one, back-pressure for an eager one); `deallocate` takes back a buffer Weft
// allocated but could not deliver (a dead sender, a full queue). Both get `ctx`. Empty
// (allocate == nullptr): malloc and free.
struct allocator_t {
  void* (*allocate)(size_t size, void* ctx) = nullptr;
  void (*deallocate)(void* buf, void* ctx) = nullptr;
  void* ctx = nullptr;
};

// A remote completion handle: an index valid on every rank that registered the same
// sequence of completion objects (registration is collective and ordered).
using rcomp_t = uint32_t;
inline constexpr rcomp_t rcomp_null = UINT32_MAX;

// A local memory registration (register_memory). Registering a local buffer is optional;
// a buffer a peer puts into or gets from must be registered.
struct mr_t {
  impl::mr_impl* p = nullptr;
  bool is_empty() const { return p == nullptr; }
  WEFT_HANDLE_OPAQUE(mr_t, impl::mr_impl)
  WEFT_API void* get_attr_base() const;
  WEFT_API size_t get_attr_size() const;
};

// Remote memory handle (get_rmr): what a peer needs to put into or get from a registered
// region. Trivially copyable, to be packed into any message. `key` and `generation` name
// one registration: after deregister_memory the handle is refused even if the same memory
// is registered again.
struct rmr_t {
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t key = 0;
  uint64_t generation = 0;
  bool is_empty() const { return key == 0 && size == 0; }
};

// One entry of a remote buffer list: `size` bytes at offset `disp` of the region `rmr`.
struct rbuffer_t {
  rmr_t rmr;
  uint64_t disp = 0;
  size_t size = 0;
};
// Most entries a buffer list (.buffers(), .remote_buffers()) may have.
inline constexpr size_t max_buffers = 64;

// A program's own collective layer (typically MPI) as Weft's bootstrap: see set_bootstrap
// and <weft/mpi.hpp>.
struct bootstrap_ops_t {
  int rank = -1;
  int size = 0;
  // Ranks on this host and this rank among them; -1 and 0: Weft works them out from
  // WEFT_HOST_ID or the host's name and boot id, exchanged with allgather.
  int local_rank = -1;
  int local_size = 0;
  // Collective: gathers `len` bytes from every rank into `recv` (size * len bytes, in rank
  // order). Called by the thread that allocates a runtime or a device.
  std::function<void(const void* send, void* recv, size_t len)> allgather;
};

// The one exception type Weft throws. what() reads
// "weft: <call>: <argument> = <value>: <reason>".
class WEFT_API fatal_error : public std::runtime_error {
 public:
  fatal_error(std::string call, std::string argument, std::string value, const std::string& reason);
  const std::string& call() const { return call_; }
  const std::string& argument() const { return argument_; }
  const std::string& value() const { return value_; }

 private:
  std::string call_, argument_, value_;
};

using handler_fn_t = std::function<void(status_t)>;

// Errors found at a target with nothing to signal (a malformed message, an unknown remote
// completion). The default handler logs with both ranks and drops the message.
struct wire_error_t {
  int rank_me;
  int peer;
  std::string what;
};
using error_handler_fn_t = void (*)(const wire_error_t&);

}  // namespace weft
