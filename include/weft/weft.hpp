// SPDX-License-Identifier: BSD-3-Clause
// Weft: a lightweight communication library for asynchronous many-task runtimes.
//
// The interface follows the LCI paper (SC'25): runtime objects, devices, post_comm and the
// calls derived from it, status done / posted / retry, completion objects, explicit progress.
// Every call has an `_x` variant taking named optional arguments in any order:
//   weft::post_am_x(rank, buf, size, comp, rcomp).tag(7).device(dev)();
// See docs/api.md for the thread-safety table and docs/concepts.md for the message path.
#pragma once

#include "weft/graph.hpp"
#include "weft/off.hpp"
#include "weft/types.hpp"
#include "weft/version.hpp"

namespace weft {

WEFT_API const char* get_version();
// The name of counter `c` as weft/counters.def spells it ("sent_eager"); "" when `c` is not
// a counter.
WEFT_API const char* get_counter_name(counter_t c);

// ---- runtime ----------------------------------------------------------------------------
inline void g_runtime_init() {
  g_runtime_init_x()();
}
WEFT_API void g_runtime_fina();
WEFT_API runtime_t get_g_runtime();  // empty when no global runtime is active
inline runtime_t alloc_runtime() {
  return alloc_runtime_x()();
}
WEFT_API void free_runtime(runtime_t* runtime);

inline int get_rank_me() {
  return get_rank_me_x()();
}
inline int get_rank_n() {
  return get_rank_n_x()();
}
// Rank of this process among the processes on its host, and their number.
inline int get_rank_local() {
  return get_rank_local_x()();
}
inline int get_rank_local_n() {
  return get_rank_local_n_x()();
}

// Use the program's own collectives (an MPI communicator, say) instead of a launcher's:
// call before the first g_runtime_init/alloc_runtime; every runtime allocated afterwards
// gets rank, size and its address exchange from `ops`. Refused while a runtime is active.
WEFT_API void set_bootstrap(bootstrap_ops_t ops);

// Runtime-level handler for errors found at a target that has nothing to signal.
WEFT_API void set_error_handler(error_handler_fn_t fn, runtime_t runtime = {});

// ---- resources --------------------------------------------------------------------------
inline device_t alloc_device() {
  return alloc_device_x()();
}
WEFT_API void free_device(device_t* device);
WEFT_API device_t get_default_device(runtime_t runtime = {});

inline packet_pool_t alloc_packet_pool() {
  return alloc_packet_pool_x()();
}
WEFT_API void free_packet_pool(packet_pool_t* pool);
WEFT_API packet_pool_t get_default_packet_pool(runtime_t runtime = {});

inline matching_engine_t alloc_matching_engine() {
  return alloc_matching_engine_x()();
}
WEFT_API void free_matching_engine(matching_engine_t* engine);
WEFT_API matching_engine_t get_default_matching_engine(runtime_t runtime = {});

inline comp_t alloc_cq() {
  return alloc_cq_x()();
}
inline comp_t alloc_sync() {
  return alloc_sync_x()();
}
inline comp_t alloc_handler(handler_fn_t fn) {
  return alloc_handler_x(std::move(fn))();
}
WEFT_API void free_comp(comp_t* comp);

inline rcomp_t register_rcomp(comp_t comp) {
  return register_rcomp_x(comp)();
}
WEFT_API void deregister_rcomp(rcomp_t rcomp, runtime_t runtime = {});

// Completion checking.
// Error retry when empty. An active message of at most 16 bytes gets its malloc'd buffer
// here, on the popping thread (error_nomem if none can be had): docs/api.md.
WEFT_API status_t cq_pop(comp_t cq);
WEFT_API size_t cq_size(comp_t cq);
// True once the synchronizer got its threshold of signals; copies them into `statuses`
// (an array of threshold entries, or nullptr) and resets it for reuse.
WEFT_API bool sync_test(comp_t sync, status_t* statuses);
inline void sync_wait(comp_t sync, status_t* statuses) {
  sync_wait_x(sync, statuses)();
}
// Signal a completion object from user code (for example to wake a waiter). Returns done,
// or retry_nomem when the object cannot take it now (a full completion queue): signal
// again later. It never waits, so a handler may call it from inside progress.
[[nodiscard]] WEFT_API error_t comp_signal(comp_t comp, status_t status);

// Packets: fixed-size buffers a user can fill and send without a copy into Weft's own
// buffers, or receive active messages in (register_rcomp_x(...).packet_delivery(true)).
inline void* get_upacket() {
  return get_upacket_x()();
}
// Returns a packet to its pool; a buffer that is not a packet is released with std::free.
WEFT_API void put_upacket(void* packet);

// ---- memory registration ------------------------------------------------------------------
// Registers [base, base + size) for one-sided access by peers (get_rmr gives the handle to
// send them). Not collective. deregister_memory waits for accesses in progress (it
// progresses the runtime meanwhile) and makes every handle to the region refused.
inline mr_t register_memory(void* base, size_t size) {
  return register_memory_x(base, size)();
}
WEFT_API void deregister_memory(mr_t* mr);
WEFT_API rmr_t get_rmr(mr_t mr);

// ---- operations -------------------------------------------------------------------------
inline status_t post_comm(direction_t direction, int rank, void* local_buffer, size_t size,
                          comp_t local_comp) {
  return post_comm_x(direction, rank, local_buffer, size, local_comp)();
}
inline status_t post_send(int rank, void* buf, size_t size, tag_t tag, comp_t comp) {
  return post_send_x(rank, buf, size, tag, comp)();
}
inline status_t post_recv(int rank, void* buf, size_t size, tag_t tag, comp_t comp) {
  return post_recv_x(rank, buf, size, tag, comp)();
}
inline status_t post_am(int rank, void* buf, size_t size, comp_t local_comp, rcomp_t remote_comp) {
  return post_am_x(rank, buf, size, local_comp, remote_comp)();
}
inline status_t post_put(int rank, void* local_buffer, size_t size, comp_t local_comp,
                         uint64_t remote_disp, rmr_t rmr) {
  return post_put_x(rank, local_buffer, size, local_comp, remote_disp, rmr)();
}
inline status_t post_get(int rank, void* local_buffer, size_t size, comp_t local_comp,
                         uint64_t remote_disp, rmr_t rmr) {
  return post_get_x(rank, local_buffer, size, local_comp, remote_disp, rmr)();
}
// Removes a posted, not yet matched receive; its completion object is then signalled with
// errorcode_t::cancelled. Returns false when no such receive is pending (it matched).
inline bool cancel_recv(int rank, void* buf, tag_t tag, comp_t comp) {
  return cancel_recv_x(rank, buf, tag, comp)();
}

// ---- progress and synchronisation -------------------------------------------------------
// Returns done when it moved anything, retry otherwise.
inline error_t progress() {
  return progress_x()();
}
inline void barrier() {
  barrier_x()();
}

}  // namespace weft
