// SPDX-License-Identifier: BSD-3-Clause
// What weft-soak sends and how it checks what arrives. Every payload is a function of its
// identity (kind, source rank, source thread, sequence number): a receiver that knows the
// identity regenerates the bytes and compares, so a lost byte, a stray write or a message
// delivered to the wrong place is caught however small the payload. A payload of at least
// 32 bytes also starts with a header naming the identity and a checksum of the rest, so
// that an active message (whose sequence number is not implied by a posted receive) is
// identified, and a report can say whose message arrived where.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace soak {

enum class kind : uint8_t { send = 1, am = 2, put = 3, put_notify = 4 };
inline constexpr int nkinds = 5;  // indexable by kind

struct identity {
  kind k = kind::send;
  int rank = 0;    // the source
  int thread = 0;  // the source's thread
  uint64_t seq = 0;
};

inline constexpr size_t header_size = 32;

// Writes the payload of `id` into buf[0, size).
void stamp(void* buf, size_t size, const identity& id);

// Whether buf[0, size) is the payload of `id`; when not, `why` says what differs.
bool check(const void* buf, size_t size, const identity& id, std::string* why);

// For a payload of at least header_size bytes: the identity its header claims, or false
// when the header is not one (bad magic or checksum of the header itself).
bool read_header(const void* buf, size_t size, identity* id);

// The bytes a rank exposes for gets: word k of rank r's pattern region is pattern_word(r, k).
uint64_t pattern_word(int rank, uint64_t k);
void fill_pattern(void* buf, size_t size, int rank);
// Whether buf[0, size) equals rank `rank`'s pattern region from byte `offset` on.
bool check_pattern(const void* buf, size_t size, int rank, uint64_t offset);

// A small fast generator (splitmix64): the soak's randomness and its payload bytes.
struct rng {
  uint64_t s;
  explicit rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  double unit() { return double(next() >> 11) / double(uint64_t(1) << 53); }
};

uint64_t mix(uint64_t a, uint64_t b);

// A size in [0, max], biased small: half the draws at most 64 bytes, 1 in 100 above 1 MiB.
size_t draw_size(rng& r, size_t max);

}  // namespace soak
