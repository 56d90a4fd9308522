// Layout of one device's segment. Other local ranks write into its inbox; its own put
// channels are written by this rank and drained by the targets.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util/spinlock.hpp"

namespace weft::net::shm {

inline constexpr uint32_t segment_magic = 0x57454654;  // "WEFT"
inline constexpr uint32_t layout_version = 2;

struct alignas(util::cache_line) segment_header {
  uint32_t magic;
  uint32_t layout;
  uint32_t rank;
  int32_t pid;
  uint64_t cell_size;
  uint64_t ncells;
  uint64_t nchannels;
  uint64_t chunk_size;
  uint64_t nslots;
  std::atomic<uint32_t> attached;  // peers that mapped this segment
};

// Every message occupies one cell; the first 16 bytes are the ring's own.
struct cell_header {
  std::atomic<uint64_t> seq;
  uint32_t len;
  uint16_t src;  // local rank of the sender
  uint8_t kind;
  uint8_t pad;
};
static_assert(sizeof(cell_header) == 16);

enum cell_kind : uint8_t {
  kind_message = 1,    // a core message, passed to the sink
  kind_put_start = 2,  // a pipelined put begins in the sender's channel
  kind_put_done = 3,   // a put written by cross-memory attach is complete
};

struct put_start_msg {
  uint64_t remote_addr;
  uint64_t size;
  uint64_t imm;
  uint32_t channel;
  uint32_t notify;
};

struct put_done_msg {
  uint64_t imm;
};

struct alignas(util::cache_line) ring_index {
  std::atomic<uint64_t> value;
  // Tail only: consumers asleep in wait_for_message, and the futex word they sleep on.
  // In the tail's line, which a producer's compare-and-swap owns anyway.
  std::atomic<uint32_t> sleepers;
  std::atomic<uint32_t> doorbell;
};

// A channel streams one put at a time in chunk-sized slots (single producer: the owner;
// single consumer: the target).
struct alignas(util::cache_line) channel_header {
  std::atomic<uint32_t> busy;
  alignas(util::cache_line) std::atomic<uint64_t> written;
  alignas(util::cache_line) std::atomic<uint64_t> consumed;
};

struct geometry {
  size_t cell_size, ncells, nchannels, chunk_size, nslots;

  static size_t align(size_t n, size_t a) { return (n + a - 1) / a * a; }
  size_t head_offset() const { return align(sizeof(segment_header), 4096); }
  size_t tail_offset() const { return head_offset() + sizeof(ring_index); }
  size_t cells_offset() const { return align(tail_offset() + sizeof(ring_index), 4096); }
  size_t channels_offset() const { return align(cells_offset() + cell_size * ncells, 4096); }
  size_t channel_stride() const {
    return align(sizeof(channel_header), 4096) + chunk_size * nslots;
  }
  size_t total() const { return channels_offset() + channel_stride() * nchannels; }
};

}  // namespace weft::net::shm
