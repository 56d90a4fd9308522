// SPDX-License-Identifier: BSD-3-Clause
// Requests: the state of an operation that outlives its post call. They live in a
// fixed-capacity slab per device and travel on the wire as handles (index and generation),
// so a stale or forged handle from a peer is recognised instead of dereferenced.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "match/matching_engine.hpp"
#include "util/index_stack.hpp"
#include "weft/types.hpp"

namespace weft::impl {

class device_impl;
class comp_impl;
class packet_pool_impl;
struct rcomp_entry;

enum class req_kind : uint8_t {
  free_,
  posted_recv,       // in a matching engine, waiting for a send
  unexpected_eager,  // a send that arrived first, data kept in `buf`
  unexpected_rts,    // a rendezvous send that arrived first
  rdv_send,          // waiting for clear-to-send, then for the put to finish
  rdv_recv,          // waiting for the sender's put
  rma,               // a put or get of ours, waiting for the backend
  finishing,         // claimed by the one thread that finishes it (request::claim)
};

inline constexpr uint32_t no_ahead = UINT32_MAX;

struct request : match_entry {
  std::atomic<uint32_t> gen{0};
  // Set last, with release, once every other field is filled: a thread that finds the
  // request by its kind (lookup) sees the fields.
  void publish(req_kind k) { kind_.store(k, std::memory_order_release); }
  req_kind kind() const { return kind_.load(std::memory_order_acquire); }
  // For a request two threads may each decide to finish (its completion, and the failure
  // of its peer on another thread; a receive whose peer dies while a match hands it its
  // ready-to-send): true for the one that takes it from `from`.
  bool claim(req_kind from) {
    if (!kind_.compare_exchange_strong(from, req_kind::finishing, std::memory_order_acq_rel))
      return false;
    claimed_from = from;  // only the winner writes it, and reads it
    return true;
  }
  // An active message's receive (its buffer Weft's to free when it fails), claimed or not.
  bool am_receive() const {
    const req_kind k = kind();
    return is_am && (k == req_kind::rdv_recv ||
                     (k == req_kind::finishing && claimed_from == req_kind::rdv_recv));
  }
  std::atomic<req_kind> kind_{req_kind::free_};
  req_kind claimed_from = req_kind::free_;
  bool is_am = false;
  bool counted = false;  // the completion object counts it as pending
  bool buffer_is_packet = false;
  uint32_t index = 0;
  tag_t tag = 0;
  void* buf = nullptr;
  size_t size = 0;      // the local buffer's size
  size_t msg_size = 0;  // the message's size
  comp_impl* comp = nullptr;
  void* user_context = nullptr;
  uint64_t peer_req = 0;
  // rdv_send: its data goes ahead of its ready-to-send (net::device::try_send_ahead).
  // unexpected_rts, rdv_recv: the backend's id of the data sent ahead, or no_ahead.
  bool sent_ahead = false;
  uint32_t ahead = no_ahead;
  packet_pool_impl* pool = nullptr;        // unexpected data held in a packet of this pool
  const rcomp_entry* am_target = nullptr;  // rdv_recv active message: its buffer's allocator
  device_impl* dev = nullptr;
};

class request_slab {
 public:
  explicit request_slab(uint32_t capacity)
      : reqs_(new request[capacity]),
        free_(capacity),
        capacity_(capacity),
        reserve_(std::max<uint32_t>(4, std::min<uint32_t>(64, capacity / 8))) {
    for (uint32_t i = 0; i < capacity; ++i) reqs_[i].index = i;
  }

  // For the program's own messages and receives: leaves the last requests to Weft's own
  // traffic (the barrier's messages and receives), so that a table filled with unexpected
  // messages nobody receives yet cannot keep a barrier from completing. Approximate under
  // concurrency (a relaxed count), which only moves the reserve by a request or two.
  request* alloc_user(device_impl* dev) {
    if (in_use_.load(std::memory_order_relaxed) + reserve_ >= capacity_) return nullptr;
    return alloc(dev);
  }
  request* alloc(device_impl* dev) {
    uint32_t i = free_.pop();
    if (i == util::index_stack::empty) return nullptr;
    in_use_.fetch_add(1, std::memory_order_relaxed);
    request* r = &reqs_[i];
    r->dev = dev;
    return r;
  }
  void free(request* r) {
    r->publish(req_kind::free_);
    r->gen.fetch_add(1, std::memory_order_release);
    in_use_.fetch_sub(1, std::memory_order_relaxed);
    free_.push(r->index);
  }
  uint64_t handle(const request* r) const {
    return (uint64_t(r->gen.load(std::memory_order_relaxed)) << 32) | r->index;
  }
  // nullptr unless the handle names a live request of this kind.
  request* lookup(uint64_t h, req_kind kind) {
    uint32_t i = uint32_t(h);
    if (i >= capacity_) return nullptr;
    request* r = &reqs_[i];
    if (r->gen.load(std::memory_order_acquire) != uint32_t(h >> 32) || r->kind() != kind)
      return nullptr;
    return r;
  }
  size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  uint32_t capacity() const { return capacity_; }
  request& at(uint32_t i) { return reqs_[i]; }

 private:
  std::unique_ptr<request[]> reqs_;
  util::index_stack free_;
  uint32_t capacity_;
  uint32_t reserve_;
  std::atomic<size_t> in_use_{0};
};

}  // namespace weft::impl
