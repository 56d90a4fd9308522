// SPDX-License-Identifier: BSD-3-Clause
// The one small interface every backend implements (shm, ofi, ucx, and mixed over them).
// A context holds a runtime's global network resources; a device holds those a thread
// touches on the critical path. Nothing above this file knows which backend runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/types.hpp"

namespace weft::bootstrap {
class bootstrap;
}

namespace weft::net {

// Receives what a device's poll found. Called on the polling thread.
//
// Back-pressure: on_message and on_remote_notify return false when the sink cannot take
// the message now (no request left for an unexpected message, a full completion queue, no
// memory), having done nothing. The backend then keeps it where it is (a shared-memory
// cell stays claimed, a network receive buffer is not reposted, a UCP descriptor is kept),
// offers it again on later polls before anything that arrived after it on the same path,
// and stops taking more once what it keeps reaches its own bound; so the sender's queue
// fills and the sender sees retry. Nothing is dropped.
class sink {
 public:
  virtual ~sink() = default;
  // A message from `rank`; `data` is valid only during the call. False: not taken.
  virtual bool on_message(int rank, const void* data, size_t len) = 0;
  // A put's source buffer may be reused (`ctx` as given to try_put). `ok` false: the
  // target refused the access (region deregistered or access outside it); nothing written.
  virtual void on_put_local_done(void* ctx, bool ok) = 0;
  // A get's data has arrived in the local buffer (`ok` false: refused, nothing read).
  virtual void on_get_done(void* ctx, bool ok) = 0;
  // The notification of a put from `rank` (its data is visible in this process's memory),
  // or of a get by `rank` (its data has been read from this process's memory). `note` is
  // the blob the initiator passed, valid only during the call. False: not taken.
  virtual bool on_remote_notify(int rank, const void* note, size_t len) = 0;
  // Whether `rank` may write rendezvous data of `size` bytes at `addr`, which carries
  // `note`: only into a buffer this process offered that rank (a backend that copies the
  // data itself asks first, since the address comes from the peer).
  virtual bool expects_data(int rank, uint64_t addr, size_t size, const void* note, size_t len) = 0;
  // A message from `rank` whose data is on its way already (device::try_send_ahead),
  // under the backend's `id`, waiting for accept_ahead or refuse_ahead. False: not taken
  // (as on_message); the backend offers it again later.
  virtual bool on_ahead(int rank, uint32_t id, const void* data, size_t len) = 0;
};

// A local registration. Backends that need none (shm) fill base and size only.
struct local_region {
  void* base = nullptr;
  size_t size = 0;
  uint64_t key = 0;
  uint64_t generation = 0;
  void* backend = nullptr;
  uint64_t local = 0;  // the backend's own index of the registration (shm: its table slot)
};

// What a peer needs to address registered memory of this process. Every key a backend
// issues is nonzero and not guessable; key 0 names nothing and is refused (a rendezvous
// receive buffer, which the target's core named itself, is reached through send_data).
struct rkey_t {
  uint64_t key = 0;
  uint64_t generation = 0;
};

// A number no other device of this process had or will have: a peer that remembers a
// device by (rank, index) adds it, so that a device freed and allocated again at the same
// index is not taken for its predecessor.
inline uint64_t next_device_generation() {
  static std::atomic<uint64_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed);
}

// Largest notification blob a put or get carries to the target.
inline constexpr size_t max_note_size = 40;

struct device_config {
  size_t cell_size;    // largest message (header + payload) one send carries
  size_t inbox_depth;  // messages that may wait in a device's receive queue
  // Every rank progresses its device of this index continuously: puts may take a mechanism
  // that needs the target's CPU (alloc_device_x's peers_progress).
  bool peers_progress = false;
  // Many threads post on and progress it (the runtime's default device, the task engine's,
  // alloc_device_x's `shared`): a backend may spread it wider (shm: default_lanes).
  bool shared = false;
};

class device {
 public:
  virtual ~device() = default;
  virtual size_t max_message_size() const = 0;
  // Largest header + payload that a backend moves as one cache line (or doorbell).
  virtual size_t max_inject_size() const = 0;

  // Two-sided: the concatenation hdr|payload reaches the peer's device of the same index.
  // False when the peer's queue is full: retry later.
  virtual bool try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                        size_t len) = 0;
  // An answer to an operation of the peer's (the core's clear-to-send and refusal, at most
  // 48 bytes in all): the peer's sink always takes it, and it needs no order with this
  // rank's other messages, so a backend may pass it ahead of messages the peer holds
  // (shared memory: the answer lane). False: retry later, as try_send.
  virtual bool try_send_answer(int rank, const void* hdr, size_t hdr_len, const void* payload,
                               size_t len) {
    return try_send(rank, hdr, hdr_len, payload, len);
  }

  // The core's rendezvous data: `size` bytes into `remote_addr`, a buffer the target's core
  // named in its clear-to-send (not a registered region; no handle of a user's reaches this
  // path). Completes and notifies as try_put does. False: resources busy, retry later.
  virtual bool try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr,
                             const void* note, size_t note_len, void* ctx) = 0;

  // The core's rendezvous data sent ahead of its ready-to-send: the message hdr|payload
  // (the ready-to-send) reaches the peer's sink as on_ahead, and the `size` bytes at
  // `src` start moving at once, without waiting for a clear-to-send. The target's core
  // names the destination later (accept_ahead) or refuses (refuse_ahead, then its
  // refusal message, on which the core here calls cancel_ahead). Completes as
  // try_send_data does (on_put_local_done(ctx, true) once the target has taken every
  // byte). False: this backend cannot for this peer and size now (it has no such path, no
  // free channel, too much data ahead not yet accepted): send the ready-to-send alone.
  virtual bool try_send_ahead(int /*rank*/, const void* /*hdr*/, size_t /*hdr_len*/,
                              const void* /*payload*/, size_t /*len*/, const void* /*src*/,
                              size_t /*size*/, void* /*ctx*/) {
    return false;
  }
  // The target's side of data ahead announced by on_ahead, whose ready-to-send says `size`
  // bytes: its first `accept` bytes go to `dst` (the rest is dropped), and the sink gets
  // on_remote_notify(note) once every byte is in. False: it is gone (its source died), or
  // the backend's announcement disagrees with `size` (then refused, as by refuse_ahead).
  virtual bool accept_ahead(int /*rank*/, uint32_t /*id*/, void* /*dst*/, size_t /*size*/,
                            size_t /*accept*/, const void* /*note*/, size_t /*note_len*/) {
    return false;
  }
  // The target will not take the data ahead; its core then sends its refusal message.
  virtual void refuse_ahead(int /*rank*/, uint32_t /*id*/) {}
  // At the source, on the target's refusal: stops the data ahead whose context is `ctx`.
  // When it returns, nothing touches its source buffer any more.
  virtual void cancel_ahead(int /*rank*/, void* /*ctx*/) {}

  // One-sided. `remote_addr` is an address in the target process covered by `rkey`.
  // With a note (note_len > 0, at most max_note_size), the target's sink gets
  // on_remote_notify(note) once a put's data is there or a get's data has been read.
  // False: resources busy, retry later.
  virtual bool try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t rkey,
                       const void* note, size_t note_len, void* ctx) = 0;
  virtual bool try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t rkey,
                       const void* note, size_t note_len, void* ctx) = 0;
  // Checked at posting: nullptr when the backend sees nothing wrong with accessing
  // [remote_addr, +size) through `rkey` at `rank`, else why not. Backends whose hardware
  // checks keys (ofi, ucx) report a refusal through on_put_local_done/on_get_done instead.
  virtual const char* check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t rkey) = 0;

  // Delivers up to `max` events to the sink and advances transfers in flight.
  // Returns the number of events and transfer steps performed.
  virtual size_t poll(sink& s, size_t max) = 0;

  // Sleeps until a message may have arrived for this device or `timeout_us` passed, and
  // returns true. Returns false at once, without sleeping, when one is already queued or
  // work is in hand (so that a caller that must give the core away yields instead). Wakes
  // may be spurious.
  virtual bool wait_for_message(uint32_t timeout_us) = 0;

  // The same as a file descriptor, so that one thread can sleep on two backends at once
  // (mixed: shared memory and the network). arm_wake() makes wake_fd() readable at the next
  // arrival and returns true, or returns false when something is pending already (do not
  // sleep); after the sleep, settle_wake() empties what woke it. No descriptor: -1, and
  // wait_for_message() is the only way to sleep.
  virtual int wake_fd() { return -1; }
  virtual bool arm_wake() { return false; }
  virtual void settle_wake() {}

  // False once the peer process is known to be gone.
  virtual bool peer_alive(int rank) = 0;
  // Once it is gone, why, for error messages (cold path).
  virtual std::string why_gone(int /*rank*/) { return "the peer process has died"; }
  // Drops every transfer in flight with a dead peer; when it returns, no thread touches
  // the local buffers of those transfers again, except the puts and gets that
  // settles_accesses(rank) leaves to the backend.
  virtual void forget_peer(int rank) = 0;
  // True: the puts and gets this device took with `rank` end only through the sink
  // (on_put_local_done, on_get_done), once nothing touches their local buffers any more,
  // even after the peer is taken for dead, so the core must not fail them itself (ofi: the
  // provider reads and writes user buffers until it hands the operation back, which a
  // stopped peer that resumes may make seconds later). False: forget_peer drops them and
  // the core fails them.
  virtual bool settles_accesses(int /*rank*/) const { return false; }
  // Called by the core's periodic check (every 50 ms or so, one thread): repairs what a
  // dead peer left half done (shm: an inbox cell it claimed and never published). Returns
  // how many things it repaired.
  virtual size_t repair() { return 0; }
  // True (once) when the backend took a peer for dead by itself since the last call (ofi:
  // silent, expelled, or a failed send), so that the core fails what waits on it even
  // while nothing is pending.
  virtual bool peers_changed() { return false; }
  // The backend's own share of a device counter (shm: the bytes each large-transfer
  // mechanism moved); the core adds it to its own.
  virtual uint64_t count(counter_t /*c*/) const { return 0; }
};

class context {
 public:
  virtual ~context() = default;
  virtual const char* name() const = 0;
  // Collective over all ranks, in the same order everywhere: device i talks to device i.
  virtual std::unique_ptr<device> alloc_device(int index, const device_config& cfg) = 0;
  virtual local_region register_memory(void* base, size_t size) = 0;
  // Stops new remote accesses to the region. Those already running finish first:
  // deregistration is complete when region_idle says so (the caller progresses meanwhile).
  virtual void deregister_memory(local_region& mr) = 0;
  virtual bool region_idle(const local_region& mr) = 0;
  virtual void release_region(local_region& mr) = 0;
  virtual rkey_t get_rkey(const local_region& mr) = 0;
  // A one-line description of the mechanisms chosen (for logs and benchmarks).
  virtual std::string describe() const = 0;
};

std::unique_ptr<context> make_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id);
// The network backend a mixed job uses across hosts (WEFT_NET_BACKEND).
std::string network_backend_name();

// What weft-info shows of a backend: whether this build has it (and what it needs when it
// has not), and what it finds on this machine (providers, transports, permissions).
struct finding {
  std::string item, value;
};
struct backend_report {
  std::string name;
  bool built;
  std::string needs;
  std::vector<finding> found;
};
std::vector<backend_report> describe_backends();

}  // namespace weft::net
