// SPDX-License-Identifier: BSD-3-Clause
#include "net/ofi/note_slots.hpp"

#include <algorithm>

namespace weft::net::ofi {
namespace {

constexpr uint64_t check_byte = 0xA5;
constexpr uint32_t generation_mask = (1u << 24) - 1;

uint32_t slot_of(const void* note, size_t len) {
  // FNV-1a over the notification: the tag and the address vary most.
  uint32_t h = 2166136261u;
  const auto* p = static_cast<const unsigned char*>(note);
  for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 16777619u;
  return (h ^ (h >> 8) ^ (h >> 16) ^ (h >> 24)) % note_slot_count;
}

}  // namespace

uint64_t encode_cq_note(int rank, uint32_t slot, uint32_t generation) {
  return check_byte << 56 | uint64_t(uint32_t(rank)) << 32 | uint64_t(slot) << 24 |
         (generation & generation_mask);
}

bool decode_cq_note(uint64_t data, int ranks, cq_note& out) {
  if (data >> 56 != check_byte) return false;
  out.rank = int((data >> 32) & 0xffffff);
  out.slot = uint32_t((data >> 24) & 0xff);
  out.generation = uint32_t(data & generation_mask);
  return out.rank < ranks && out.generation != 0;
}

// ---- initiator ----------------------------------------------------------------------------
note_sender::note_sender(int ranks) : peers_(size_t(ranks)) {}

bool note_sender::acquire(int rank, const void* note, size_t len, use& u, void* send_ctx,
                          bool (*send)(void*, const use&)) {
  const uint32_t slot = slot_of(note, len);
  util::lock_guard<util::spinlock> g(lock_);
  auto& p = peers_[size_t(rank)];
  if (!p) p = std::make_unique<peer>();
  slot_state& s = p->slots[slot];
  u.slot = slot;
  if (s.generation != 0 && s.len == len && memcmp(s.note, note, len) == 0) {
    ++s.in_flight;
    u.generation = s.generation;
    u.define = false;
    return true;
  }
  if (s.in_flight != 0) return false;
  s.generation = (s.generation & generation_mask) == generation_mask ? 1 : s.generation + 1;
  u.generation = s.generation;
  u.define = true;
  if (!send(send_ctx, u)) {
    s.len = 0;  // matches no notification: the next use defines it again (a newer generation)
    return false;
  }
  s.len = uint32_t(len);
  memcpy(s.note, note, len);
  s.in_flight = 1;
  return true;
}

void note_sender::release(int rank, uint32_t slot) {
  util::lock_guard<util::spinlock> g(lock_);
  --peers_[size_t(rank)]->slots[slot].in_flight;
}

// ---- target -------------------------------------------------------------------------------
note_receiver::note_receiver(int ranks) : peers_(size_t(ranks)) {}

note_receiver::peer& note_receiver::at(int rank) {
  auto& p = peers_[size_t(rank)];
  if (!p) p = std::make_unique<peer>();
  return *p;
}

note_receiver::result note_receiver::lookup(const cq_note& n, const void*& note, size_t& len) {
  peer& p = at(n.rank);
  const slot_state& s = p.slots[n.slot];
  if (s.generation == n.generation) {
    note = s.note;
    len = s.len;
    return result::deliver;
  }
  // Definitions arrive in order, and a slot is redefined only once its writes are queued
  // here: a generation behind the slot's is a protocol error, one ahead waits for its own.
  const uint32_t behind = (s.generation - n.generation) & generation_mask;
  if (s.generation != 0 && behind != 0 && behind < (1u << 23)) return result::stale;
  p.parked.push_back(n);
  return result::parked;
}

bool note_receiver::define(int rank, const void* body, size_t blen, const void*& note, size_t& len,
                           size_t& released) {
  note_definition d;
  if (blen < sizeof(d)) return false;
  memcpy(&d, body, sizeof(d));
  if (d.len > max_note_size || blen != sizeof(d) + d.len || d.generation == 0 ||
      d.generation > generation_mask)
    return false;
  peer& p = at(rank);
  slot_state& s = p.slots[d.slot];
  s.generation = d.generation;
  s.len = d.len;
  memcpy(s.note, static_cast<const char*>(body) + sizeof(d), d.len);
  note = s.note;
  len = s.len;
  const size_t before = p.parked.size();
  std::erase_if(p.parked,
                [&](const cq_note& n) { return n.slot == d.slot && n.generation == d.generation; });
  released = before - p.parked.size();
  return true;
}

void note_receiver::forget(int rank) {
  peers_[size_t(rank)].reset();
}

}  // namespace weft::net::ofi
