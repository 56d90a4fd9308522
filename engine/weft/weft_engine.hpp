// SPDX-License-Identifier: BSD-3-Clause
// The Weft engine (weft/engine.h, seed 000 section 5.3). Its own Weft device carries every
// message; Weft's progress (on the progress thread, or inside weft_engine_progress) drains
// the network, answers rendezvous and signals two completion queues, which are the
// engine's FIFOs: `am_cq` for active messages (the runtime's tags, eager puts, announces)
// and `bulk_cq` for bulk data (local put/get completions, put/get notifications at the
// target). The communication side (its thread, or weft_engine_progress) pops them with
// the seed's fairness rule, runs the callbacks, and starts the posts that found the
// network out of resources (the deferred queue). Every queue is bounded: the FIFOs by
// queue_depth (a full one holds messages back where they arrived), the deferred queue by
// `deferred` (past it a post returns WEFT_RETRY), the pairing table by the puts in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "util/spinlock.hpp"
#include "weft/engine_ops.h"
#include "weft/weft.hpp"

namespace weft::engine {

// The kind of an engine message, in the top byte of its Weft tag.
enum class msg_kind : uint64_t {
  am = 1,         // a runtime's active message: the low bits are its engine tag
  put_eager = 2,  // a small put: eager_header, the remote callback's data, the bytes
  announce = 3,   // the remote callback of a large put or get: announce_header, its data
  put_data = 4,   // the notification of a large put (low bits: its sequence number)
  get_data = 5,   // the notification of a get (low bits: its sequence number)
  packed = 6,     // the notification of a put or get whose remote callback fits its tag
};
// A remote callback of at most packed_max bytes rides in its put's or get's notification
// tag (packed: bits 0-39 the bytes, 40-42 their count, 43-48 the engine tag), so that
// it needs no announce and no pairing at the target.
inline constexpr size_t packed_max = 5;
static_assert(WEFT_ENGINE_MAX_TAGS <= 64, "the packed notification has 6 bits for the tag");
inline uint64_t pack_callback(uint32_t r_tag, const void* data, size_t n) {
  uint64_t bits = uint64_t(n) << 40 | uint64_t(r_tag) << 43;
  for (size_t i = 0; i < n; ++i)  // the first byte lowest, on any byte order
    bits |= uint64_t(static_cast<const unsigned char*>(data)[i]) << (8 * i);
  return bits;
}
// The engine tag and bytes pack_callback put in `bits`; how many bytes.
inline size_t unpack_callback(uint64_t bits, unsigned char (&out)[packed_max], uint32_t& r_tag) {
  r_tag = uint32_t(bits >> 43) & 63;
  for (size_t i = 0; i < packed_max; ++i) out[i] = static_cast<unsigned char>(bits >> (8 * i));
  return size_t(bits >> 40) & 7;
}
inline tag_t make_tag(msg_kind k, uint64_t low) {
  return tag_t(uint64_t(k) << 56 | (low & ((uint64_t(1) << 56) - 1)));
}
inline msg_kind kind_of(tag_t t) {
  return msg_kind(uint64_t(t) >> 56);
}
inline uint64_t low_of(tag_t t) {
  return uint64_t(t) & ((uint64_t(1) << 56) - 1);
}

// A region as peers see it: packed into WEFT_ENGINE_MEM_PACKED bytes.
struct packed_region {
  uint32_t magic;           // packed_magic
  int32_t owner;            // the rank that registered it
  uint32_t id, generation;  // the owner's engine table entry, checked by eager puts
  rmr_t rmr;
  uint64_t pad[2];
};
static_assert(sizeof(packed_region) == WEFT_ENGINE_MEM_PACKED);
inline constexpr uint32_t packed_magic = 0x57454654;  // "WEFT"

struct eager_header {
  uint32_t region, generation;  // the target's table entry
  uint64_t disp;
  uint32_t r_tag, r_size;
};
struct announce_header {
  uint64_t seq;
  uint32_t r_tag, r_size;
};

struct mem_region {
  void* base = nullptr;
  size_t size = 0;
  mr_t mr;
  uint32_t id = 0, generation = 0;
  bool allocated = false;  // by alloc_memory: free_memory frees it
};

// A put or get in flight at its initiator, or waiting in the deferred queue.
struct rma_op {
  bool is_get = false;
  weft_engine_mem_t lreg = nullptr;
  ptrdiff_t ldispl = 0, rdispl = 0;
  packed_region rreg{};
  size_t size = 0;
  int rank = 0;
  weft_engine_onesided_fn l_fn = nullptr;
  void* l_data = nullptr;
  uint64_t seq = 0;          // the notification's sequence number (0: no announce)
  bool announced = false;    // the announce went out
  bool packed = false;       // the remote callback rides in the notification's tag ...
  uint64_t packed_low = 0;   // ... as these low bits (pack_callback)
  std::vector<char> r_copy;  // announce_header and the remote data, while deferred
};

// Something the engine could not start at once.
struct deferred_post {
  std::unique_ptr<rma_op> op;  // a put or get
  int rank = 0;                // or an active message of this Weft tag, copied:
  tag_t tag = 0;
  std::vector<char> bytes;
};

// The two halves of a large put or get's remote callback at its target.
struct pairing {
  bool have_data = false, have_announce = false;
  uint32_t r_tag = 0;
  std::vector<char> r_data;
};

class weft_engine : public weft_engine_s {
 public:
  explicit weft_engine(const weft_engine_attr_t& a);
  ~weft_engine();

  int post_am(weft_engine_tag_t tag, int rank, const void* buf, size_t size);
  int register_memory(void* base, size_t size, weft_engine_mem_t* mem);
  int deregister_memory(weft_engine_mem_t mem);
  int alloc_memory(size_t size, void** base, weft_engine_mem_t* mem);
  int free_memory(weft_engine_mem_t mem);
  int pack(weft_engine_mem_t mem, void* out);
  int post_rma(int is_get, weft_engine_mem_t lreg, ptrdiff_t ldispl, const void* rreg,
               ptrdiff_t rdispl, size_t size, int rank, weft_engine_onesided_fn l_fn, void* l_data,
               weft_engine_tag_t r_tag, const void* r_data, size_t r_size);
  int progress();
  int progress_wait(uint32_t timeout_us);
  int enable();
  int disable();
  int can_serve();
  int release();  // weft_engine_free: refused while anything is in flight
  int watch_peers(int on);

 private:
  // The region table: a region in (registered or allocated), and out (deregistered or freed).
  int add_region(std::unique_ptr<mem_region> r, weft_engine_mem_t* mem);
  int forget_region(weft_engine_mem_t mem, bool allocated, const char* call);
  // rma.cpp
  int start_rma(std::unique_ptr<rma_op>& op);
  int put_eager(const rma_op& op, weft_engine_tag_t r_tag, const void* r_data, size_t r_size);
  void on_put_eager(const status_t& s);
  void on_announce(const status_t& s);
  void on_notification(const status_t& s);
  void on_local_done(const status_t& s);
  void run_remote(int src, const char* what, uint32_t r_tag, void* data, size_t n);
  // drive.cpp
  int drain();
  void handle_am(const status_t& s);
  void handle_bulk(const status_t& s);
  int start_deferred();
  int defer(deferred_post&& d);
  status_t send(int rank, tag_t tag, const void* buf, size_t size);
  void progress_loop();
  void comm_loop();
  void report(int rank, const std::string& what);
  void watch();  // while watching, every 50 ms: each peer that died, reported once

  std::atomic<bool> watching_{false};
  std::atomic<int64_t> next_watch_ns_{0};
  std::unique_ptr<std::atomic<bool>[]> reported_dead_;  // by rank, made with the engine

  device_t dev_;
  comp_t am_cq_, bulk_cq_;
  rcomp_t am_rc_ = rcomp_null, bulk_rc_ = rcomp_null;
  size_t eager_limit_ = 0;

  util::spinlock regions_lock_;
  std::vector<mem_region*> regions_;  // by id; null: free
  std::vector<uint32_t> free_ids_;
  uint32_t next_generation_ = 1;

  util::spinlock deferred_lock_;
  std::deque<deferred_post> deferred_;
  std::atomic<size_t> ndeferred_{0};

  util::spinlock pairing_lock_;
  std::unordered_map<uint64_t, pairing> pairings_;  // (source rank, sequence number)
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<size_t> in_flight_{0};  // puts and gets posted, not yet completed here

  // Active messages for a tag not registered yet (a peer was faster): kept, up to
  // queue_depth, and delivered once the tag is registered, as MPI keeps unexpected ones.
  std::vector<status_t> parked_;
  std::atomic<size_t> nparked_{0};
  int deliver_parked();
  // The callback registered for `tag` now (false: none), read as register_tag publishes it.
  bool tag_entry(uint64_t tag, weft_engine_tag_entry_t& out) const {
    if (tag >= WEFT_ENGINE_MAX_TAGS) return false;
    out.fn = __atomic_load_n(&tags[tag].fn, __ATOMIC_ACQUIRE);
    if (!out.fn) return false;  // its other fields may be being written
    out.data = tags[tag].data;
    out.max_len = tags[tag].max_len;
    return true;
  }

  util::spinlock drain_lock_;  // one thread drains the FIFOs at a time
  std::atomic<bool> running_{false};
  // Whether the progress thread drives the device now (its attribute, while enabled).
  bool progress_thread_runs() const {
    return attr.progress_thread && running_.load(std::memory_order_relaxed);
  }
  std::thread progress_thread_, comm_thread_;
};

}  // namespace weft::engine
