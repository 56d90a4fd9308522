// SPDX-License-Identifier: BSD-3-Clause
// Weft: a lightweight communication library for asynchronous many-task runtimes.
//
// The interface follows the LCI paper (SC'25): runtime objects, devices, post_comm and the
// calls derived from it, status done / posted / retry, completion objects, explicit progress.
// Every call has an `_x` variant taking named optional arguments in any order:
//   weft::post_am_x(rank, buf, size, comp, rcomp).tag(7).device(dev)();
// See docs/api.md for the thread-safety table and docs/concepts.md for the message path.
#pragma once

#include "weft/cont.hpp"
#include "weft/graph.hpp"
#include "weft/off.hpp"
#include "weft/types.hpp"
#include "weft/version.hpp"

namespace weft {

// Reference. Every call below is also an `_x` functor (weft/off.hpp) taking the same
// positional arguments and named optional ones. Unless a comment says otherwise, a call
// given a bad argument (a freed handle, a rank out of range, a null buffer with a size)
// throws weft::fatal_error naming the call, the argument and the value, and changes
// nothing; a call that needs a runtime and finds none throws the same. Posts return a
// status_t whose error is done (complete, buffer reusable), posted (the completion object
// will be signalled) or a retry code (nothing happened; post again after progress).

// The library's version, "MAJOR.MINOR.PATCH" (WEFT_VERSION_STRING of the headers it was
// built with).
WEFT_API const char* get_version();
// The name of counter `c` as weft/counters.def spells it ("sent_eager"); "" when `c` is not
// a counter.
WEFT_API const char* get_counter_name(counter_t c);

// ---- runtime ----------------------------------------------------------------------------
// Sets up the global runtime from the launcher's environment and the WEFT_* settings
// (docs/configuration.md); collective over the job. Throws when one is already active, when
// a setting is out of range or differs between ranks (naming both), or when the backend
// cannot start.
inline void g_runtime_init() {
  g_runtime_init_x()();
}
// Frees the global runtime and everything allocated from it; collective. Throws when none
// is active.
WEFT_API void g_runtime_fina();
// The global runtime; empty when none is active.
WEFT_API runtime_t get_g_runtime();
// An extra runtime, with its own devices, engines and registries; collective, in the same
// order on every rank. Throws as g_runtime_init does.
inline runtime_t alloc_runtime() {
  return alloc_runtime_x()();
}
// Frees a runtime from alloc_runtime and empties *runtime; collective.
WEFT_API void free_runtime(runtime_t* runtime);

// This process's rank in the global runtime's job (0 .. get_rank_n() - 1).
inline int get_rank_me() {
  return get_rank_me_x()();
}
// The number of ranks in the global runtime's job.
inline int get_rank_n() {
  return get_rank_n_x()();
}
// Rank of this process among the processes on its host.
inline int get_rank_local() {
  return get_rank_local_x()();
}
// The number of processes on this process's host.
inline int get_rank_local_n() {
  return get_rank_local_n_x()();
}

// Use the program's own collectives (an MPI communicator, say) instead of a launcher's:
// call before the first g_runtime_init/alloc_runtime; every runtime allocated afterwards
// gets rank, size and its address exchange from `ops`. Refused while a runtime is active.
WEFT_API void set_bootstrap(bootstrap_ops_t ops);

// Runtime-level handler for errors found at a target that has nothing to signal (a
// malformed or unroutable message); nullptr restores the default, which logs them.
WEFT_API void set_error_handler(error_handler_fn_t fn, runtime_t runtime = {});

// ---- resources --------------------------------------------------------------------------
// A device of the global runtime: a set of network resources that threads using it share
// (use one per thread for no sharing). Collective and ordered, like every allocation whose
// objects peers address by index.
inline device_t alloc_device() {
  return alloc_device_x()();
}
// Frees a device and empties *device. Throws, freeing nothing, while operations on it are
// pending.
WEFT_API void free_device(device_t* device);
// The runtime's own device, used by posts that name none.
WEFT_API device_t get_default_device(runtime_t runtime = {});

// A pool of packets of the runtime's packet_size (get_upacket, packet delivery).
inline packet_pool_t alloc_packet_pool() {
  return alloc_packet_pool_x()();
}
// Frees a packet pool and empties *pool; throws while a device draws on it.
WEFT_API void free_packet_pool(packet_pool_t* pool);
// The runtime's own packet pool.
WEFT_API packet_pool_t get_default_packet_pool(runtime_t runtime = {});

// A matching engine: where sends and receives meet by (rank, tag). Ordered: every rank
// allocates its engines in the same order (a send names the engine it targets).
inline matching_engine_t alloc_matching_engine() {
  return alloc_matching_engine_x()();
}
// Frees a matching engine and empties *engine; throws while receives are posted on it.
WEFT_API void free_matching_engine(matching_engine_t* engine);
// The runtime's own matching engine, used by posts that name none.
WEFT_API matching_engine_t get_default_matching_engine(runtime_t runtime = {});

// A completion queue of cq_depth entries per signalling thread: signalled operations wait in
// it for cq_pop (each thread's in the order it signalled them).
inline comp_t alloc_cq() {
  return alloc_cq_x()();
}
// A synchronizer: ready once it has its threshold (default 1) of signals (sync_test).
inline comp_t alloc_sync() {
  return alloc_sync_x()();
}
// A handler: `fn` runs with each signal's status, on the signalling thread (inside progress
// or a post); it must not block.
inline comp_t alloc_handler(handler_fn_t fn) {
  return alloc_handler_x(std::move(fn))();
}
// A completion handle for the program's own completion object `c` (see custom_comp); Weft
// does not own `c`: free_comp frees the handle, the program its object.
WEFT_API comp_t alloc_custom_comp(custom_comp* c);
// Frees a completion object and empties *comp; throws while operations that will signal it
// are pending.
WEFT_API void free_comp(comp_t* comp);

// Registers a completion object for peers to name as the remote completion of an active
// message or a put: collective and ordered, so the handle is the same on every rank.
inline rcomp_t register_rcomp(comp_t comp) {
  return register_rcomp_x(comp)();
}
// The allocator of arriving active messages' buffers for every remote completion the runtime
// registers from now on without one of its own (register_rcomp_x(...).allocator(a)); an
// empty allocator_t restores malloc. A buffer so delivered is the program's to free with
// its own allocator (put_upacket would use std::free).
WEFT_API void set_allocator(allocator_t allocator, runtime_t runtime = {});
// Withdraws a remote completion handle; messages that name it later are refused. Freeing
// works in either order: free_comp releases every handle to the object, and deregistering a
// handle already released is a no-op; only a handle the runtime never gave out is refused.
WEFT_API void deregister_rcomp(rcomp_t rcomp, runtime_t runtime = {});

// Takes the oldest entry of a completion queue: its status with error done, or error retry
// when the queue is empty. An active message of at most 16 bytes gets its malloc'd buffer
// here, on the popping thread (error_nomem if none can be had): docs/api.md.
WEFT_API status_t cq_pop(comp_t cq);
// The number of entries waiting in a completion queue (a moment's snapshot).
WEFT_API size_t cq_size(comp_t cq);
// True once the synchronizer got its threshold of signals; copies them into `statuses`
// (an array of threshold entries, or nullptr) and resets it for reuse.
WEFT_API bool sync_test(comp_t sync, status_t* statuses);
// Progresses the synchronizer's runtime until sync_test is true.
inline void sync_wait(comp_t sync, status_t* statuses) {
  sync_wait_x(sync, statuses)();
}
// Signal a completion object from user code (for example to wake a waiter). Returns done,
// or retry_nomem when the object cannot take it now (a full completion queue): signal
// again later. It never waits, so a handler may call it from inside progress.
[[nodiscard]] WEFT_API error_t comp_signal(comp_t comp, status_t status);

// Packets: fixed-size buffers a user can fill and send without a copy into Weft's own
// buffers, or receive active messages in (register_rcomp_x(...).packet_delivery(true)).
// Returns nullptr when the pool is empty.
inline void* get_upacket() {
  return get_upacket_x()();
}
// Returns a packet to its pool; a buffer that is not a packet is released with std::free.
WEFT_API void put_upacket(void* packet);

// ---- memory registration ------------------------------------------------------------------
// Registers [base, base + size) for one-sided access by peers (get_rmr gives the handle to
// send them). Not collective. Throws when the range is empty, too large or not all mapped.
inline mr_t register_memory(void* base, size_t size) {
  return register_memory_x(base, size)();
}
// Deregisters and empties *mr: waits for accesses in progress (it progresses the runtime
// meanwhile) and makes every handle to the region refused from then on.
WEFT_API void deregister_memory(mr_t* mr);
// Allocates `size` zeroed bytes and registers them (the base: mr.get_attr_base()). Peers on
// this host map such memory on their first access, so that their puts and gets into it
// are one memcpy each, with no system call and no CPU of this rank (docs/shm.md); across
// the network it is registered memory like any other. Not collective. Give it back with
// free_memory, not deregister_memory.
inline mr_t alloc_memory(size_t size) {
  return alloc_memory_x(size)();
}
// Deregisters an allocation of alloc_memory (as deregister_memory does) and frees it;
// empties *mr.
WEFT_API void free_memory(mr_t* mr);
// The remote handle of a registration: plain data to send to peers for post_put/post_get.
WEFT_API rmr_t get_rmr(mr_t mr);

// ---- operations -------------------------------------------------------------------------
// The one operation every other is: direction OUT sends `size` bytes of `local_buffer` to
// `rank`, IN receives into it; named arguments add a tag, a remote completion (an active
// message), a remote buffer (a put or get), a device, an engine. Status: done, posted
// (local_comp will be signalled) or retry.
inline status_t post_comm(direction_t direction, int rank, void* local_buffer, size_t size,
                          comp_t local_comp) {
  return post_comm_x(direction, rank, local_buffer, size, local_comp)();
}
// Sends `size` bytes to `rank` with `tag`, matched there by a post_recv. Status: done
// (eager: the buffer is free), posted (rendezvous: `comp` is signalled) or retry.
inline status_t post_send(int rank, void* buf, size_t size, tag_t tag, comp_t comp) {
  return post_send_x(rank, buf, size, tag, comp)();
}
// Receives a send from `rank` with `tag` into `buf` (at most `size` bytes; more is
// error_truncated). Status: done (the message was here), posted or retry.
inline status_t post_recv(int rank, void* buf, size_t size, tag_t tag, comp_t comp) {
  return post_recv_x(rank, buf, size, tag, comp)();
}
// Sends an active message: it arrives at `rank` in a buffer Weft allocates and signals the
// completion object registered there as `remote_comp`. Status as post_send.
inline status_t post_am(int rank, void* buf, size_t size, comp_t local_comp, rcomp_t remote_comp) {
  return post_am_x(rank, buf, size, local_comp, remote_comp)();
}
// Writes `size` bytes to offset `remote_disp` of the peer's region `rmr`. Status: posted
// (local_comp signalled when the source may be reused) or retry; error_region when the
// peer refused the access, error_peer_dead when it is gone.
inline status_t post_put(int rank, void* local_buffer, size_t size, comp_t local_comp,
                         uint64_t remote_disp, rmr_t rmr) {
  return post_put_x(rank, local_buffer, size, local_comp, remote_disp, rmr)();
}
// Reads `size` bytes from offset `remote_disp` of the peer's region `rmr`. Status as
// post_put (local_comp signalled when the data is in local_buffer).
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
// Moves the default device's work along: the backlog, arrivals, completions. Returns done
// when it moved anything, retry otherwise. Throws only for a malformed message when
// wire_errors_fatal is set.
inline error_t progress() {
  return progress_x()();
}
// Waits, progressing, until every rank of the global runtime has entered the barrier.
// Throws naming the rank when a peer is dead.
inline void barrier() {
  barrier_x()();
}

}  // namespace weft
