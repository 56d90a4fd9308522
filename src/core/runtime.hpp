// SPDX-License-Identifier: BSD-3-Clause
// The runtime object: configuration, the network context and the registries that must be
// identical on every rank (remote completions, matching engines, devices by index).
#pragma once

#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "net/backend.hpp"
#include "pool/packet_pool.hpp"
#include "util/generation.hpp"
#include "util/mpmc_array.hpp"
#include "weft/weft.hpp"

namespace weft::impl {

// WEFT_YIELD's rule for a rank whose machine runs `machine_ranks` ranks of the job: on,
// off, or (auto) more ranks than CPUs online. Throws fatal_error for a bad WEFT_YIELD. The
// runtime decides its yield_when_idle by it; the MPI engine, counting its ranks itself, too.
bool yield_rule(long machine_ranks);

class device_impl;
class comp_impl;
class matching_engine_impl;
class packet_pool_impl;

// The attributes in force: one field per WEFT_ATTR row of weft/settings.def.
struct runtime_attr {
#define WEFT_ATTR(type, name, ...) WEFT_CXX_TYPE_##type name;
#include "weft/settings.def"
};

struct mr_impl {
  WEFT_GENERATIONAL_MEMORY  // behind mr_t handles, which carry a generation
      runtime_impl* rt;
  net::local_region net;
  rmr_t rmr;
  bool allocated = false;  // by alloc_memory: free_memory gives it back
};

struct rcomp_entry {
  comp_impl* comp;
  bool packet_delivery;
  bool in_place;      // lent to a handler until it returns (register_rcomp_x().in_place)
  allocator_t alloc;  // of arriving messages' buffers; empty: malloc
  // A buffer for an arriving message of `size` bytes (nullptr: none now), and its return.
  void* allocate(size_t size) const {
    return alloc.allocate ? alloc.allocate(size, alloc.ctx) : std::malloc(size ? size : 1);
  }
  void deallocate(void* buf) const {
    if (alloc.allocate)
      alloc.deallocate(buf, alloc.ctx);
    else
      std::free(buf);
  }
};

// Matching engine ids on the wire: 0 is Weft's own (barrier), 1 the default.
inline constexpr uint32_t internal_engine_id = 0;

class runtime_impl {
 public:
  WEFT_GENERATIONAL_MEMORY  // behind runtime_t handles, which carry a generation
  runtime_impl(const runtime_args& a, bool global);
  void resolve_attributes(const runtime_args& a, const char* call);
  bool print_stats_ = false;     // WEFT_STATS: devices' counters to stderr when freed
  bool yield_when_idle = false;  // WEFT_YIELD: progress gives the core away when idle
  ~runtime_impl();

  int rank() const { return boot->rank(); }
  int size() const { return boot->size(); }

  // shared: many threads use it (the default device; net::device_config::shared).
  device_impl* alloc_device(packet_pool_impl* pool, size_t inbox_depth, bool peers_progress = false,
                            bool shared = false);
  void free_device(device_impl* d);
  packet_pool_impl* alloc_pool(size_t packet_size, size_t npackets);
  void free_pool(packet_pool_impl* p);
  matching_engine_impl* alloc_engine(size_t nbuckets, make_key_fn_t fn);
  void free_engine(matching_engine_impl* e);

  rcomp_t register_rcomp(comp_impl* c, bool packet_delivery, bool in_place,
                         const allocator_t* alloc);
  allocator_t allocator;  // set_allocator: for registrations without their own (under lock_)
  std::mutex& registry_lock() { return lock_; }
  void deregister_rcomp(rcomp_t r);
  rcomp_entry* rcomp(uint32_t r) const { return rcomps_.get(r); }
  size_t rcomp_count() const { return rcomps_.size(); }
  matching_engine_impl* engine(uint32_t id) const { return engines_.get(id); }
  uint32_t engine_count() const { return uint32_t(engines_.size()); }
  // Lock-free: put_upacket and packet sends call it on their critical path. The default
  // pool inline (what packet delivery and get_upacket hand out), the others out of line.
  packet_pool_impl* pool_owning(const void* p) const {
    if (default_pool && default_pool->owns(p)) [[likely]]
      return default_pool;
    return other_pool_owning(p);
  }
  packet_pool_impl* other_pool_owning(const void* p) const;
  bool has_pool(const packet_pool_impl* p);
  bool has_engine(const matching_engine_impl* e) const;
  // Completion objects still registered, so free_comp can deregister them.
  void forget_comp(comp_impl* c);

  mr_impl* register_memory(void* base, size_t size);
  void deregister_memory(mr_impl* mr);
  // Progress on every device (while waiting inside a call, e.g. deregistration).
  void progress_all();

  void report_wire_error(int peer, const std::string& what);
  size_t pending_operations();

  std::shared_ptr<bootstrap::bootstrap> boot;
  std::unique_ptr<net::context> net;
  runtime_attr attr{};
  const int id;
  const bool is_global;
  // The defaults, or a fatal_error naming `call` when the runtime has none
  // (alloc_defaults(false)). Inline: a post that names no device or engine passes here.
  device_impl* device_or_fail(const char* call) const {
    if (default_device) [[likely]]
      return default_device;
    no_default(call, "device");
  }
  matching_engine_impl* engine_or_fail(const char* call) const {
    if (default_engine) [[likely]]
      return default_engine;
    no_default(call, "matching_engine");
  }
  packet_pool_impl* pool_or_fail(const char* call) const {
    if (default_pool) [[likely]]
      return default_pool;
    no_default(call, "packet_pool");
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void no_default(const char* call, const char* what);

  device_impl* default_device = nullptr;
  packet_pool_impl* default_pool = nullptr;
  matching_engine_impl* default_engine = nullptr;
  std::atomic<error_handler_fn_t> error_handler{nullptr};

 private:
  void check_agreement();

  std::mutex lock_;  // resource lists; serialises collective allocations
  std::vector<device_impl*> devices_;
  int next_device_index_ = 0;
  std::vector<packet_pool_impl*> pools_;
  util::mpmc_array<rcomp_entry*> rcomps_;
  util::mpmc_array<matching_engine_impl*> engines_;
  util::mpmc_array<packet_pool_impl*> pool_index_;  // pools_, read without the lock
  std::vector<std::unique_ptr<rcomp_entry>> rcomp_storage_;
  // The default wire-error log's counts (report_wire_error).
  std::atomic<uint64_t> wire_errors_{0}, wire_errors_shown_{0};
  std::atomic<int64_t> next_wire_summary_ns_{0};
  std::mutex mr_lock_;
  std::vector<mr_impl*> mrs_;
};

// The runtime a call runs on: the one given, else the global one; fails naming `call`
// when none is active (before g_runtime_init or after g_runtime_fina).
runtime_impl* resolve_runtime(runtime_t rt, const char* call);
// The global runtime (g_runtime_init), or null; inline: put_upacket reads it per message.
extern std::atomic<runtime_impl*> g_runtime;
inline runtime_impl* global_runtime() {
  return g_runtime.load(std::memory_order_acquire);
}
// The first live runtime for which `pred` holds (under the registry's lock), or nullptr.
runtime_impl* find_runtime(const std::function<bool(runtime_impl&)>& pred);

}  // namespace weft::impl
