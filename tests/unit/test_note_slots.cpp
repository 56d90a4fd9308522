// SPDX-License-Identifier: BSD-3-Clause
// The ofi backend's notification slots (remote CQ data), driven directly: the orders in
// which a definition and the writes naming it can arrive, reuse, eviction and bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "net/ofi/note_slots.hpp"

using namespace weft::net::ofi;

namespace {

// Stands for the definition message: sent, or refused by a full send queue.
const auto sent = [](const note_sender::use&) { return true; };
const auto refused = [](const note_sender::use&) { return false; };

struct note {
  uint32_t tag;
  uint64_t addr;
};

// The definition message `u` stands for, as the initiator sends it.
std::vector<char> definition(const note_sender::use& u, const note& n) {
  note_definition d{uint8_t(u.slot), uint8_t(sizeof(n)), {}, u.generation};
  std::vector<char> body(sizeof(d) + sizeof(n));
  memcpy(body.data(), &d, sizeof(d));
  memcpy(body.data() + sizeof(d), &n, sizeof(n));
  return body;
}

note_receiver::result arrive(note_receiver& r, uint64_t data, note* out = nullptr) {
  cq_note c;
  EXPECT_TRUE(decode_cq_note(data, 4, c));
  const void* p;
  size_t len;
  auto res = r.lookup(c, p, len);
  if (res == note_receiver::result::deliver && out) {
    EXPECT_EQ(len, sizeof(note));
    memcpy(out, p, sizeof(note));
  }
  return res;
}

}  // namespace

TEST(NoteSlots, EncodingKeepsRankSlotAndGeneration) {
  cq_note c;
  ASSERT_TRUE(decode_cq_note(encode_cq_note(3, 201, 77777), 4, c));
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.slot, 201u);
  EXPECT_EQ(c.generation, 77777u);
  EXPECT_FALSE(decode_cq_note(encode_cq_note(4, 1, 1), 4, c));  // rank beyond the job
  EXPECT_FALSE(decode_cq_note(0x1234, 4, c));                   // not ours
  EXPECT_FALSE(decode_cq_note(encode_cq_note(0, 1, 0), 4, c));  // generation 0: never defined
}

TEST(NoteSlots, SecondUseOfANotificationNeedsNoDefinition) {
  note_sender s(4);
  note n{7, 0x1000};
  note_sender::use a, b;
  ASSERT_TRUE(s.acquire(1, &n, sizeof(n), a, sent));
  EXPECT_TRUE(a.define);
  ASSERT_TRUE(s.acquire(1, &n, sizeof(n), b, sent));  // in flight together: same slot, same gen
  EXPECT_FALSE(b.define);
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_EQ(a.generation, b.generation);
  s.release(1, a.slot);
  s.release(1, b.slot);
  note_sender::use c;
  ASSERT_TRUE(s.acquire(2, &n, sizeof(n), c, sent));  // another peer has its own table
  EXPECT_TRUE(c.define);
}

TEST(NoteSlots, ACollidingNotificationWaitsForTheSlotToDrain) {
  note_sender s(2);
  note first{1, 0x2000};
  note_sender::use u;
  ASSERT_TRUE(s.acquire(1, &first, sizeof(first), u, sent));
  // Find another notification hashing to the same slot.
  note other{0, 0x2000};
  note_sender::use probe;
  for (uint32_t t = 2;; ++t) {
    other.tag = t;
    note_sender scratch(2);
    ASSERT_TRUE(scratch.acquire(1, &other, sizeof(other), probe, sent));
    if (probe.slot == u.slot) break;
  }
  note_sender::use v;
  EXPECT_FALSE(s.acquire(1, &other, sizeof(other), v, sent));  // a write of `first` is in flight
  s.release(1, u.slot);
  ASSERT_TRUE(s.acquire(1, &other, sizeof(other), v, sent));  // drained: redefined
  EXPECT_TRUE(v.define);
  EXPECT_EQ(v.slot, u.slot);
  EXPECT_EQ(v.generation, u.generation + 1);
}

TEST(NoteSlots, AWriteBeforeItsDefinitionIsParkedAndReleasedByIt) {
  note_sender s(4);
  note_receiver r(4);
  note n{42, 0xabc0};
  note_sender::use u;
  ASSERT_TRUE(s.acquire(2, &n, sizeof(n), u, sent));
  const uint64_t data = encode_cq_note(2, u.slot, u.generation);
  EXPECT_EQ(arrive(r, data), note_receiver::result::parked);
  EXPECT_EQ(arrive(r, data), note_receiver::result::parked);
  auto body = definition(u, n);
  const void* p;
  size_t len, released;
  ASSERT_TRUE(r.define(2, body.data(), body.size(), p, len, released));
  EXPECT_EQ(released, 2u);
  ASSERT_EQ(len, sizeof(n));
  EXPECT_EQ(memcmp(p, &n, sizeof(n)), 0);
  note got{};
  EXPECT_EQ(arrive(r, data, &got), note_receiver::result::deliver);  // later writes: at once
  EXPECT_EQ(got.tag, 42u);
  EXPECT_EQ(got.addr, 0xabc0u);
}

TEST(NoteSlots, ANewGenerationWaitsAndAnOldOneIsRefused) {
  note_receiver r(4);
  note a{1, 0x10}, b{2, 0x20};
  note_sender::use g1{5, 1, true}, g2{5, 2, true};
  const void* p;
  size_t len, released;
  auto d1 = definition(g1, a);
  ASSERT_TRUE(r.define(0, d1.data(), d1.size(), p, len, released));
  EXPECT_EQ(released, 0u);
  // The slot's next generation written before its definition: waits, though slot 5 is known.
  EXPECT_EQ(arrive(r, encode_cq_note(0, 5, 2)), note_receiver::result::parked);
  auto d2 = definition(g2, b);
  ASSERT_TRUE(r.define(0, d2.data(), d2.size(), p, len, released));
  EXPECT_EQ(released, 1u);
  note got{};
  memcpy(&got, p, sizeof(got));
  EXPECT_EQ(got.tag, 2u);
  EXPECT_EQ(arrive(r, encode_cq_note(0, 5, 1)), note_receiver::result::stale);
}

TEST(NoteSlots, MalformedDefinitionsAreRefused) {
  note_receiver r(2);
  note n{1, 2};
  note_sender::use u{3, 1, true};
  auto body = definition(u, n);
  const void* p;
  size_t len, released;
  EXPECT_FALSE(r.define(1, body.data(), body.size() - 1, p, len, released));  // truncated
  EXPECT_FALSE(r.define(1, body.data(), 3, p, len, released));                // no header
  note_definition d;
  memcpy(&d, body.data(), sizeof(d));
  d.len = 200;  // beyond max_note_size
  memcpy(body.data(), &d, sizeof(d));
  EXPECT_FALSE(r.define(1, body.data(), body.size(), p, len, released));
  d.len = uint8_t(sizeof(n));
  d.generation = 0;
  memcpy(body.data(), &d, sizeof(d));
  EXPECT_FALSE(r.define(1, body.data(), body.size(), p, len, released));
}

TEST(NoteSlots, AnUnsentDefinitionIsMadeAgain) {
  note_sender s(2);
  note n{9, 0x90};
  note_sender::use u, v, w;
  EXPECT_FALSE(s.acquire(1, &n, sizeof(n), u, refused));  // notified by message instead
  EXPECT_TRUE(u.define);
  // Nobody may use the slot as if it were defined: the next use defines it again, and the
  // slot has no write in flight (a colliding note could take it).
  int definitions = 0;
  ASSERT_TRUE(s.acquire(1, &n, sizeof(n), v, [&](const note_sender::use&) {
    ++definitions;
    return true;
  }));
  EXPECT_EQ(definitions, 1);
  EXPECT_TRUE(v.define);
  EXPECT_EQ(v.slot, u.slot);
  EXPECT_GT(v.generation, u.generation);
  ASSERT_TRUE(s.acquire(1, &n, sizeof(n), w, [&](const note_sender::use&) {
    ++definitions;
    return true;
  }));
  EXPECT_EQ(definitions, 1);  // defined once
  EXPECT_FALSE(w.define);
}
