// SPDX-License-Identifier: BSD-3-Clause
// Layout of one device's segment. Other local ranks write into its inbox; its own put
// channels are written by this rank and drained by the targets. The inbox is split into
// lanes, each a ring of its own: a sending thread uses the lane of its thread index and a
// polling thread starts at its own, so threads sharing one device mostly touch different
// lines instead of all taking turns at one head and one tail. Beside them, the answer lane
// carries only answers to this rank's own operations (is_answer), which nothing holds.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "util/spinlock.hpp"

namespace weft::net::shm {

inline constexpr uint32_t segment_magic = 0x57454654;  // "WEFT"
inline constexpr uint32_t layout_version = 16;

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
  uint64_t nlanes;
  uint64_t cookie;  // the job's (bootstrap::cookie): a peer of another job refuses it
  std::atomic<uint32_t> attached;  // peers that mapped this segment
};

// A device's inbox lanes: a device of one thread's own has base_lanes; no device more than
// max_lanes, the bits of the bell's lanes_used mask.
inline constexpr size_t base_lanes = 4;
inline constexpr size_t max_lanes = 64;

// Inbox lanes of a device when WEFT_SHM_LANES is unset. A shared device (the runtime's
// default device, alloc_device_x's `shared`) gets a lane per hardware thread of this rank's share
// of the node (the next power of two, 4 to 64, the bell's lane mask), so that many threads send
// through it without taking turns at one tail (measured on 16 cores, 16 threads on one
// device: 20 M/s with 4 lanes, 107-118 with 16). Each lane reserves inbox_depth x (cell size
// + 64) bytes of /dev/shm when the device is allocated, so the others, usually a thread's
// own, keep 4. Ranks need not agree: a sender reads its target's lanes from its header.
inline size_t default_lanes(bool shared, size_t hw_threads, size_t local_ranks) {
  const size_t per = std::max<size_t>(hw_threads, 1) / std::max<size_t>(local_ranks, 1);
  size_t n = base_lanes;
  while (shared && n < per && n < max_lanes) n *= 2;
  return n;
}

// The error for a peer's segment `name` whose cookie is not this job's.
[[noreturn]] void fail_foreign_segment(const char* call, int rank, const std::string& name);

// Every message occupies one cell of one cache line: 16 bytes of the ring's own, then the
// message itself when it fits (an inject message: a 16-byte wire header and up to 32 bytes
// of payload), so the ring is one contiguous array of lines that the hardware prefetches.
// A longer message goes whole into the cell's body, a packet-sized slot in a separate array.
struct cell_header {
  std::atomic<uint64_t> seq;
  uint32_t len;
  uint16_t src;  // local rank of the sender, written first after the claim
  uint8_t kind;
  uint8_t lap;  // low bits of the claimed position's lap of the ring, with src: whose claim
};
static_assert(sizeof(cell_header) == 16);
inline constexpr size_t cell_line = 64;
inline constexpr size_t inline_capacity = cell_line - sizeof(cell_header);

enum cell_kind : uint8_t {
  kind_hole = 0,         // claimed by a sender that died before it published: skipped
  kind_message = 1,      // a core message, passed to the sink
  kind_put_start = 2,    // a pipelined put begins in the sender's channel
  kind_notify = 3,       // a put or get done by cross-memory attach: the initiator's note
  kind_get_request = 4,  // read a region of the target and stream it back (pipelined get)
  kind_get_refused = 5,  // the target refused a pipelined get
  kind_put_inline = 6,   // a small notified put: put_inline_msg, then the data
  kind_put_ack = 7,      // the target applied (or refused) a kind_put_inline
  kind_ahead = 8,        // the core's ready-to-send, its data already going into a channel
  // Answers (is_answer), in the answer lane:
  kind_stream_answer = 9,    // a get's data or the core's rendezvous data: short_start_msg
  kind_answer_message = 10,  // a core message answering ours (clear-to-send, refusal)
  kind_data_note = 11,       // the note that ends rendezvous data moved by the initiator
  kind_split_read = 12,      // rendezvous data split: the target reads its half (split_read_msg)
  kind_split_done = 13,      // the target read its half of split data, or could not
  kind_put_small = 14,       // kind_put_inline in a cell line: put_small_msg, then the data
};

// Answers to an operation of the receiving rank: always taken, and in no order with their
// sender's other cells. They travel in the answer lane, never in a lane where refused
// cells are held: held behind those they deadlocked, when a rank whose completion queue
// was full (a held cell being a notification for it) waited for its own put's
// acknowledgment before it popped that queue (mp.ack_past_held), and, once the held cells
// filled a whole lane, when the acknowledgment could not even enter it (mp.ack_full_lane).
inline bool is_answer(uint8_t kind) {
  return kind == kind_put_ack || kind == kind_get_refused || kind == kind_stream_answer ||
         kind == kind_answer_message || kind == kind_data_note || kind == kind_split_read ||
         kind == kind_split_done;
}

// What a stream in a put channel is (put_start_msg::kind).
enum stream_kind : uint16_t {
  stream_put = 0,        // a user's put into the target's region (key, generation): checked
  stream_get_reply = 1,  // the answer to the target's own get (get_ctx)
  stream_data = 2,       // the core's rendezvous data into a buffer the target named
};

struct put_start_msg {
  uint64_t remote_addr;
  uint64_t size;
  uint64_t key, generation;  // stream_put: the target region (key 0 names none: refused)
  uint64_t get_ctx;          // stream_get_reply: this put answers our get with that context
  uint32_t channel;
  uint16_t note_len;
  uint16_t kind;  // stream_kind
  char note[40];
  uint8_t timed;   // the target times its copy loop into the channel (copy_ticks)
  uint8_t stores;  // store_mode: how the target writes the data into its destination
  uint32_t piece;  // bytes of the transfer per slot (at most chunk_size): see piece_for
};

// Data sent ahead (device::try_send_ahead): a rendezvous message's data, streamed into the
// sender's channel before the target has matched it; `msg` is the core's ready-to-send.
// The target takes it into a buffer of its choice later (accept_ahead) or refuses it.
struct ahead_msg {
  uint64_t size;
  uint32_t channel;
  uint32_t piece;  // as put_start_msg::piece
  uint8_t timed;
  uint8_t stores;
  uint16_t msg_len;
  uint32_t pad;
  char msg[48];
};

// A stream that answers the receiver (kind_stream_answer): the data of its own pipelined
// get (the destination is its own: take_get) or rendezvous data after its clear-to-send,
// announced in a form that fits a cell line, so that it goes in the answer lane.
struct short_start_msg {
  uint64_t target;  // stream_get_reply: the requester's get context; stream_data: the buffer
  uint64_t size;
  uint32_t channel;
  uint32_t piece;
  uint8_t timed;
  uint8_t stores;
  uint8_t note_len;  // at most sizeof(note); rendezvous data with a longer one: put_start_msg
  uint8_t kind;      // stream_get_reply or stream_data
  char note[20];
};
static_assert(sizeof(short_start_msg) <= inline_capacity);

// Rendezvous data moved by cross-memory attach from both ends (shm_split.cpp): the source
// writes [0, split_point(size)) into the target's buffer while the target reads the rest
// from the source's. `note` is the core's, as the data note will carry it (the target checks
// its buffer against it); `ctx` comes back in the split_done_msg.
struct split_read_msg {
  uint64_t src;  // the data in the source process
  uint64_t dst;  // the target's buffer, as its clear-to-send named it
  uint64_t size;
  uint64_t ctx;
  char note[16];
};
static_assert(sizeof(split_read_msg) <= inline_capacity);

// The target's answer to a split_read_msg.
enum : uint32_t { split_refused = 0, split_read = 1, split_unread = 2 };
struct split_done_msg {
  uint64_t ctx;
  uint32_t verdict;  // split_refused: no such buffer; split_unread: the source copies it all
  uint32_t pad;
  uint64_t ticks;  // the target's read, in util::ticks, for the source's chooser
};

// Where a split transfer's halves meet: half-way, rounded up to a multiple of 4 KiB (whole
// pages of page-aligned buffers for each copy).
inline uint64_t split_point(uint64_t size) {
  return std::min<uint64_t>(size, (size / 2 + 4095) / 4096 * 4096);
}

struct notify_msg {
  char note[40];
};

struct get_request_msg {
  uint64_t remote_addr;  // in the target
  uint64_t size;
  uint64_t key, generation;
  uint64_t dst;  // in the requester
  uint64_t ctx;
  uint32_t note_len;
  uint32_t pad;
  char note[40];
};

inline constexpr size_t put_small_note = 16;  // the note's bytes before the put's extent
// How the core's note of a put ends: the region's bytes written, which put_small_msg leaves
// out and the target puts back.
struct put_extent {
  uint64_t addr;
  uint64_t size;
};

// A notified put small enough to travel in its cell: the target checks the region, copies
// the data in and delivers the note in its progress, then acknowledges; no system call.
struct put_inline_msg {
  uint64_t remote_addr;
  uint64_t key, generation;
  uint64_t ctx;  // the initiator's, returned in the acknowledgment
  uint32_t note_len;
  uint32_t pad;
  char note[40];
};

// A notified put of a few bytes in the cell's line: put_inline_msg's 80 bytes put 8 bytes of
// data in the lane's body array, a line apart (0.1-0.2 us more a message). Its note is
// the core's, less the 16 bytes at its end when those are the put's own address and size
// (the target puts them back); its key's generation is 0 (every shm name's; a mixed job's
// network keys may have one, and take the longer form).
struct put_small_msg {
  uint64_t remote_addr;
  uint64_t ctx;
  uint64_t key;
  char note_head[put_small_note];
};
inline constexpr size_t put_small_data = inline_capacity - sizeof(put_small_msg);

struct put_ack_msg {
  uint64_t ctx;
  uint32_t ok;
  uint32_t pad;
};

struct get_refused_msg {
  uint64_t ctx;
};

struct alignas(util::cache_line) ring_index {
  std::atomic<uint64_t> value;
};

// The futex word consumers sleep on in wait_for_message: 1 while someone may be asleep.
// Producers read it after every claim; it is written only when someone goes to sleep and by
// the one producer that wakes them, so it stays shared in every producer's cache and a
// burst of messages costs one wake-up system call, not one per message.
// Who sleeps on a device: bits of bell::armed, set by sleepers, cleared by the producer that
// wakes them.
enum : uint32_t { bell_futex = 1, bell_fd = 2 };
struct alignas(util::cache_line) bell {
  std::atomic<uint32_t> armed;
  // Lanes that have carried a cell (bit l: lane l), set by the first sender to claim in a
  // lane, before its claim: a poll skips the rest. Most programs send to a peer from one
  // thread, and checking an empty lane cost a poll as much as checking the one in use.
  // Beside `armed`, which every send reads anyway: both change about never.
  std::atomic<uint64_t> lanes_used;
  // Nonzero once the answer lane has carried a cell (set as lanes_used is).
  std::atomic<uint32_t> answers_used;
};

// A channel streams one put at a time in chunk-sized slots (single producer: the owner;
// single consumer: the target).
enum : uint32_t { verdict_pending = 0, verdict_accepted = 1, verdict_refused = 2 };

struct alignas(util::cache_line) channel_header {
  std::atomic<uint32_t> busy;
  // Set by the target once it has checked the region: a put is complete only when every
  // chunk is staged and the target accepted it; refused means nothing was written.
  std::atomic<uint32_t> verdict;
  alignas(util::cache_line) std::atomic<uint64_t> written;
  alignas(util::cache_line) std::atomic<uint64_t> consumed;
  // A timed transfer (put_start_msg::timed): the target's copy loop, in util::ticks, stored
  // before the last `consumed` that releases it (chooser.hpp).
  std::atomic<uint64_t> copy_ticks;
};

struct geometry {
  size_t cell_size, ncells, nchannels, chunk_size, nslots, nlanes;

  static size_t align(size_t n, size_t a) { return (n + a - 1) / a * a; }
  size_t bell_offset() const { return align(sizeof(segment_header), util::cache_line); }
  size_t lanes_offset() const { return align(bell_offset() + sizeof(bell), 4096); }
  // A lane: head, tail (each its own line), then the cells on a page boundary, then the
  // bodies (cell_size bytes each) on the next.
  size_t cells_bytes() const { return align(cell_line * ncells, 4096); }
  size_t lane_stride() const { return 4096 + cells_bytes() + align(cell_size * ncells, 4096); }
  size_t head_offset(size_t lane) const { return lanes_offset() + lane_stride() * lane; }
  size_t tail_offset(size_t lane) const { return head_offset(lane) + sizeof(ring_index); }
  size_t cells_offset(size_t lane) const { return head_offset(lane) + 4096; }
  size_t bodies_offset(size_t lane) const { return cells_offset(lane) + cells_bytes(); }
  // The answer lane (is_answer): head, tail, then its cells; no bodies, answers fit a line.
  size_t answers_offset() const { return lanes_offset() + lane_stride() * nlanes; }
  size_t channels_offset() const { return answers_offset() + 4096 + cells_bytes(); }
  size_t channel_stride() const {
    return align(sizeof(channel_header), 4096) + chunk_size * nslots;
  }
  size_t total() const { return channels_offset() + channel_stride() * nchannels; }
};

// How many bytes of a transfer of `size` go in each slot of `slot` bytes. A transfer alone
// in flight from its device goes in quarters (whole pages, from a page to a slot), so that
// the target's copy overlaps the source's instead of starting once it has ended: one
// transfer at a time, 64 KiB moved 33.2-34.3 GB/s in quarters against 29.5-30.0 in one
// slot, 32 KiB 26.8-27.2 against 23.0-23.6 (fast phase, interleaved). With others in
// flight the copies overlap across transfers already, and each piece costs a handover of
// `written` and `consumed` between the cores: 16 at a time in quarters moved 8.6 against
// 12.0 GB/s at 16 KiB and 18 against 22 at 64 KiB in a slow phase, so those fill whole
// slots (2026-11-26, `bench_weft bw --window 1` and `--window 16`).
inline size_t piece_for(size_t size, size_t slot, bool alone) {
  constexpr size_t page = 4096;
  if (!alone || slot < page) return slot;
  return std::clamp(geometry::align((size + 3) / 4, page), page, slot);
}

}  // namespace weft::net::shm
