// SPDX-License-Identifier: BSD-3-Clause
// The one wire header format. Every message starts with it; the receiver checks the
// version, the type and the length before it reads anything else.
#pragma once

#include <cstdint>

#include "util/wide_store.hpp"
#include "weft/types.hpp"

namespace weft::impl {

// 2: 64-bit tags (the high half in what was reserved).
inline constexpr uint8_t wire_version = 2;

enum class msg_type : uint8_t {
  eager_send = 1,  // payload follows the header
  eager_am = 2,
  rts_send = 3,  // rendezvous: ready to send (rts_body)
  rts_am = 4,
  cts = 5,   // clear to send: write into this buffer (cts_body)
  nack = 6,  // the target refused a rendezvous (nack_body)
};

struct wire_header {
  uint8_t version;
  uint8_t type;
  uint8_t policy;  // matching policy of a send
  uint8_t flags;
  uint32_t tag_lo;
  uint32_t target;  // remote completion handle (am) or matching engine id (send)
  uint32_t tag_hi;
  // The 64-bit tag in two halves: the header stays 16 bytes.
  void set_tag(tag_t t) {
    tag_lo = uint32_t(t);
    tag_hi = uint32_t(t >> 32);
  }
  tag_t tag() const { return tag_t(tag_hi) << 32 | tag_lo; }
};
static_assert(sizeof(wire_header) == 16);

// The header's two words, from its fields (in registers, not through memory): what
// util::store16 writes in one store (see util/wide_store.hpp).
struct header_words {
  uint64_t lo, hi;
};
inline header_words words_of(const wire_header& h) {
  const uint32_t head = uint32_t(h.version) | uint32_t(h.type) << 8 | uint32_t(h.policy) << 16 |
                        uint32_t(h.flags) << 24;
  return {util::pair_word(head, h.tag_lo), util::pair_word(h.target, h.tag_hi)};
}

// The header of an eager message: an active message to remote completion `target`, or a
// send to matching engine `target` under `policy` (post_out and post_short both build it
// here; post_large turns its type into the rendezvous one).
inline wire_header eager_header(msg_type type, uint32_t target, tag_t tag, uint8_t policy = 0) {
  wire_header h{};
  h.version = wire_version;
  h.type = uint8_t(type);
  h.policy = policy;
  h.target = target;
  h.set_tag(tag);
  return h;
}

struct rts_body {
  uint64_t size;
  uint64_t sreq;  // sender's request handle
};

struct cts_body {
  uint64_t sreq;
  uint64_t rreq;
  uint64_t raddr;
  uint64_t accept;  // bytes the receiver takes (less than size: truncated)
};

// Notifications ride with a backend put or get and reach the target's sink once the data
// is there (put) or has been read (get). At most net::max_note_size bytes.
enum class note_type : uint8_t {
  rendezvous = 1,  // a rendezvous put finished: complete receive request `rreq`
  put = 2,         // a user put with a remote completion
  get = 3,         // a user get with a remote completion
};

struct rendezvous_note {
  uint8_t type;
  uint8_t pad[7];
  uint64_t rreq;
};

struct rma_note {
  uint8_t type;
  uint8_t pad[3];
  uint32_t rcomp;
  uint32_t tag_lo;
  uint32_t tag_hi;
  void set_tag(tag_t t) {
    tag_lo = uint32_t(t);
    tag_hi = uint32_t(t >> 32);
  }
  tag_t tag() const { return tag_t(tag_hi) << 32 | tag_lo; }
  uint64_t addr;  // the region's bytes written or read, in the target
  uint64_t size;
};

struct nack_body {
  uint64_t sreq;
  uint32_t errorcode;
  uint32_t reserved;
};

}  // namespace weft::impl
