// SPDX-License-Identifier: BSD-3-Clause
// Credit-based flow control for the network backends (ofi, ucx). A provider keeps what
// arrives for a receive buffer that is not posted (libfabric's rxm grows its own pool, UCX
// its descriptors), so a receiver that holds messages back cannot stop its senders by
// itself: 100 000 unexpected messages took 1.5 GB in tcp;ofi_rxm. So each device may have
// at most `window` messages the sink may refuse (messages and notifications) in flight to
// each peer's device; the receiver grants them back in batches, once its sink has taken
// them. A sender out of credits answers retry: what a peer holds back, and what the
// provider keeps for it, is bounded by window messages per peer. Shared memory needs none
// of this: its inbox is the bound.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "util/spinlock.hpp"

namespace weft::net {

class send_credits {
 public:
  send_credits(size_t npeers, int32_t window) : c_(new slot[npeers]) {
    for (size_t i = 0; i < npeers; ++i) c_[i].n.store(window, std::memory_order_relaxed);
  }
  // One credit for a message to `rank`; false when none is left (retry later).
  bool take(int rank) {
    auto& n = c_[size_t(rank)].n;
    if (n.load(std::memory_order_relaxed) <= 0) return false;
    if (n.fetch_sub(1, std::memory_order_acquire) > 0) return true;
    n.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // A credit for an answer (an operation of the peer's waits for it, and the peer always
  // takes it), taken even when none is left: the count may go below zero, by at most the
  // peer's operations in flight with this rank, and the peer's grants bring it back.
  void overdraw(int rank) { c_[size_t(rank)].n.fetch_sub(1, std::memory_order_acquire); }
  // A message that took a credit and then could not be sent.
  void give_back(int rank) { c_[size_t(rank)].n.fetch_add(1, std::memory_order_relaxed); }
  // The receiver's grant.
  void grant(int rank, uint32_t count) {
    c_[size_t(rank)].n.fetch_add(int32_t(count), std::memory_order_release);
  }

 private:
  struct alignas(util::cache_line) slot {
    std::atomic<int32_t> n;
  };
  std::unique_ptr<slot[]> c_;
};

// The receiving side, touched by the poller only.
class recv_credits {
 public:
  recv_credits(size_t npeers, int32_t window)
      : taken_(new uint32_t[npeers]()), batch_(window > 1 ? uint32_t(window / 2) : 1) {}
  // The sink took a message from `rank`: the credits to grant back now, or 0.
  uint32_t taken(int rank) {
    uint32_t& t = taken_[size_t(rank)];
    if (++t < batch_) return 0;
    const uint32_t n = t;
    t = 0;
    return n;
  }

 private:
  std::unique_ptr<uint32_t[]> taken_;
  const uint32_t batch_;
};

}  // namespace weft::net
