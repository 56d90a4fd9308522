// SPDX-License-Identifier: BSD-3-Clause
// Notifications of puts through remote CQ data. A provider carries 8 bytes of immediate
// data with a write, but a Weft notification is up to max_note_size bytes (remote
// completion, tag, address, size). So each pair of devices shares a small table of
// notifications: the initiator defines a slot once with a message, and every later put
// with the same notification is one write whose CQ data names the slot. Iterative codes
// (a halo written into the same place with the same tag every step) take the one-write
// path from the second step on.
//
// CQ data: | check 0xA5 (8) | rank of the initiator (24) | slot (8) | generation (24) |
// A slot is redefined (next generation) only once no write using it is in flight, so its
// old writes' CQ entries are queued at the target before the new definition is sent and
// the target never sees an old generation after a new one. A write whose definition has
// not arrived yet (messages and writes are not ordered against each other) is parked
// until it does.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "net/backend.hpp"
#include "util/spinlock.hpp"

namespace weft::net::ofi {

inline constexpr uint32_t note_slot_count = 256;
inline constexpr uint64_t max_cq_data_ranks = 1u << 24;

struct note_definition {  // the body of a kind_note_define message, note bytes follow
  uint8_t slot;
  uint8_t len;
  uint8_t pad[2];
  uint32_t generation;
};

struct cq_note {
  int rank;
  uint32_t slot, generation;
};

uint64_t encode_cq_note(int rank, uint32_t slot, uint32_t generation);
// False when `data` is not one of ours (the check byte or the rank is wrong).
bool decode_cq_note(uint64_t data, int ranks, cq_note& out);

// The initiator's half: which notifications each peer has, and the writes in flight per slot.
class note_sender {
 public:
  explicit note_sender(int ranks);
  struct use {
    uint32_t slot = 0, generation = 0;
    bool define = false;  // this write's slot was defined for it
  };
  // A slot for this notification to `rank`, or false: the slot it hashes to is in use by
  // another notification with writes in flight, or the definition a new slot needs could
  // not be sent (the caller notifies by message instead). A definition is sent through
  // `send_definition(u)` while the slot is locked, so no other thread writes naming the slot
  // before its definition is on its way. On true the slot counts one more write in flight.
  template <typename Send>
  bool acquire(int rank, const void* note, size_t len, use& u, Send&& send_definition) {
    using fn = std::remove_reference_t<Send>;
    void* ctx = const_cast<void*>(static_cast<const void*>(&send_definition));
    return acquire(rank, note, len, u, ctx,
                   [](void* f, const use& x) -> bool { return (*static_cast<fn*>(f))(x); });
  }
  void release(int rank, uint32_t slot);  // a write acquire counted has completed

 private:
  bool acquire(int rank, const void* note, size_t len, use& u, void* send_ctx,
               bool (*send)(void*, const use&));
  struct slot_state {
    uint32_t generation = 0;  // 0: never defined
    uint32_t in_flight = 0;
    uint32_t len = 0;
    char note[max_note_size];
  };
  struct peer {
    std::array<slot_state, note_slot_count> slots{};
  };
  util::spinlock lock_;
  std::vector<std::unique_ptr<peer>> peers_;  // allocated at the first notified put
};

// The target's half: the definitions received, and writes waiting for theirs.
class note_receiver {
 public:
  explicit note_receiver(int ranks);
  enum class result { deliver, parked, stale };
  // A write's CQ data: the notification to deliver, parked until its definition arrives,
  // or naming a generation older than the slot's (a protocol error).
  result lookup(const cq_note& n, const void*& note, size_t& len);
  // A definition arrived: `released` parked writes wait for its note, to be delivered once
  // each. False: malformed.
  bool define(int rank, const void* body, size_t blen, const void*& note, size_t& len,
              size_t& released);
  void forget(int rank);  // a dead peer

 private:
  struct slot_state {
    uint32_t generation = 0;
    uint32_t len = 0;
    char note[max_note_size];
  };
  struct peer {
    std::array<slot_state, note_slot_count> slots{};
    std::vector<cq_note> parked;
  };
  peer& at(int rank);
  std::vector<std::unique_ptr<peer>> peers_;  // polled under the device's poll lock only
};

}  // namespace weft::net::ofi
