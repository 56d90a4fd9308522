// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's message path (its header says the design): a send claims a
// cell of the peer's lane, poll drains this device's lanes into the sink, and a sleeper
// arms the bell. Set-up, one-sided operations, large transfers, data split between both
// ends and a peer's death have files of their own (shm_setup, shm_rma, shm_transfer,
// shm_split, shm_failure).
#include "net/shm/shm_backend.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/prefetch.hpp"
#include "util/small_copy.hpp"
#include "util/thread_index.hpp"
#include "util/ticks.hpp"
#include "util/tsan.hpp"

namespace weft::net::shm {

bool shm_device::publish(peer& p, const lane& ln, uint8_t kind, const void* a, size_t alen,
                         const void* b, size_t blen) {
  uint64_t pos = ln.tail->value.load(std::memory_order_relaxed);
  cell_header* c;
  for (;;) {
    c = ln.cell(pos, mask_);
    const int64_t dif = int64_t(c->seq.load(std::memory_order_acquire) - pos);
    if (dif == 0) {
      if (ln.tail->value.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                               std::memory_order_relaxed))
        break;
    } else if (dif < 0) {
      return false;  // full
    } else {
      pos = ln.tail->value.load(std::memory_order_relaxed);
    }
  }
  // The cell two ahead, for the message after next: unless the lane is nearly full the
  // consumer released it long ago, and its line crosses from that core while this cell
  // and the next are written instead of stalling that claim (8-byte active messages lent
  // in place, 1M-message runs in interleaved pairs: median 8.0 -> 11.0 M/s, 9 pairs of 10
  // up; a flag probe of 0.12 us, one cross-core transfer). Only a hint: nothing reads it.
  util::prefetch_for_write(ln.cell(pos + 2, mask_));
  // Whose claim this is, first: if this process dies before it publishes, the consumer's
  // repair() can tell the cell from one a live sender is still filling.
  c->src = uint16_t(ctx_.boot().rank());
  c->lap = uint8_t(pos >> lap_shift_);
#ifdef WEFT_TEST_HOOKS
  test_hook_after_claim();
#endif
  const size_t len = alen + blen;
  c->len = uint32_t(len);
  c->kind = kind;
  char* data =
      len <= inline_capacity ? reinterpret_cast<char*>(c + 1) : ln.body(pos, mask_, geo_.cell_size);
  util::small_copy(data, a, alen);
  util::small_copy(data + alen, b, blen);
  c->seq.store(pos + 1, std::memory_order_release);
  // The claim above was a sequentially consistent read-modify-write of the tail, and a
  // sleeper arms the bell before it rereads every tail: either it sees this claim or this
  // load sees the bell armed. Only the producer that disarms it wakes.
  if (p.bell_->armed.load(std::memory_order_seq_cst)) [[unlikely]]
    ring_bell(p);
  return true;
}

bool shm_device::enqueue_inline(int rank, uint8_t kind, const void* a, size_t alen, const void* b,
                                size_t blen) {
  peer& p = *peers_[size_t(rank)];
  // One thread's messages to one peer share a lane, so they stay in order. No division
  // while there are no more threads than lanes (a divide is tens of cycles).
  const size_t t = util::thread_index(), nlanes = p.nlanes;
  const size_t li = t < nlanes ? t : t % nlanes;
  const lane& ln = p.lanes[li];
  // The peer polls only the lanes marked in its bell (the line this send reads for `armed`
  // anyway), so the first claim in a lane marks it first. A poll that read the mask just
  // before the bit landed finds the cell at its next poll; a sleeper rereads every lane's
  // tail, not the mask, so it never sleeps over the cell.
  const uint64_t bit = uint64_t(1) << li;
  if (!(p.bell_->lanes_used.load(std::memory_order_relaxed) & bit)) [[unlikely]]
    p.bell_->lanes_used.fetch_or(bit, std::memory_order_seq_cst);
  if (!publish(p, ln, kind, a, alen, b, blen)) return false;
  // Acknowledgments this device owes leave at its next poll, or here, after this cell (a
  // program that answers a put's note sends before it polls again).
  if (!acks_.empty()) [[unlikely]]
    send_acks();
  return true;
}

// Wakes whoever sleeps on a peer's device: futex sleepers and descriptor sleepers.
void shm_device::ring_bell(peer& p) {
  const uint32_t armed = p.bell_->armed.exchange(0, std::memory_order_seq_cst);
  if (armed & bell_futex)
    syscall(SYS_futex, &p.bell_->armed, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  if (armed & bell_fd) bell_sock_.ring(p.bell_at);
}

bool shm_device::enqueue(int rank, uint8_t kind, const void* a, size_t alen, const void* b,
                         size_t blen) {
  if (!is_answer(kind)) return enqueue_inline(rank, kind, a, alen, b, blen);
  peer& p = *peers_[size_t(rank)];
  if (alen + blen > inline_capacity)  // the answer lane has no bodies: a bug of ours
    util::fail("enqueue (shm)", "answer of kind " + std::to_string(kind),
               std::to_string(alen + blen) + " bytes", "longer than a cell line");
  if (!p.bell_->answers_used.load(std::memory_order_relaxed)) [[unlikely]]
    p.bell_->answers_used.store(1, std::memory_order_seq_cst);
  return publish(p, p.answers, kind, a, alen, b, blen);
}

bool shm_device::try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                          size_t len) {
  return enqueue_inline(rank, kind_message, hdr, hdr_len, payload, len);
}

bool shm_device::try_send_answer(int rank, const void* hdr, size_t hdr_len, const void* payload,
                                 size_t len) {
  return enqueue(rank, kind_answer_message, hdr, hdr_len, payload, len);
}

// A channel of this device for one pipelined transfer, or c == nchannels when all are busy.
uint32_t shm_device::claim_channel() {
  uint32_t c = 0;
  for (; c < geo_.nchannels; ++c) {
    uint32_t expect = 0;
    auto* ch = channel_of(own_channels_, c);
    if (ch->busy.load(std::memory_order_relaxed) == 0 &&
        ch->busy.compare_exchange_strong(expect, 1, std::memory_order_acquire))
      break;
  }
  if (c < geo_.nchannels) {
    claimed_at_[c].store(util::ticks(), std::memory_order_relaxed);
    auto* ch = channel_of(own_channels_, c);
    ch->written.store(0, std::memory_order_relaxed);
    ch->consumed.store(0, std::memory_order_relaxed);
    ch->verdict.store(verdict_pending, std::memory_order_relaxed);
  }
  return c;
}

void shm_device::send_note_then(int rank, const void* note, size_t len, local_event::kind_t then,
                                void* ctx, uint8_t kind) {
  notify_msg m{};
  memcpy(m.note, note, len);
  if (enqueue(rank, kind, &m, len, nullptr, 0)) {
    events_.add(local_event{then, rank, ctx, true, 0, {}});
    return;
  }
  local_event e{local_event::notify, rank, ctx, true, uint32_t(len), {}, then, kind};
  memcpy(e.note, note, len);
  events_.add(e);
}

// Inline into drain_lane: one call fewer per message.
[[gnu::always_inline]] inline bool shm_device::handle_cell(sink& s, const cell_header* c,
                                                           const char* body) {
  const char* data = c->len <= inline_capacity ? reinterpret_cast<const char*>(c + 1) : body;
  if (c->kind == kind_message && c->src < peers_.size() && c->len <= max_message_size())
    return s.on_message(c->src, data, c->len);
  return handle_other_cell(s, c, data);
}

bool shm_device::handle_other_cell(sink& s, const cell_header* c, const char* data) {
  const int src = c->src;
  const int me = ctx_.boot().rank();
  if (src >= int(peers_.size()) || c->len > max_message_size()) {
    WEFT_LOG(error, "shm: dropped a cell with source %d and length %u (corrupt queue?)", src,
             c->len);
    return true;
  }
  switch (c->kind) {
    case kind_message: break;     // handle_cell's own path: not reached here
    case kind_hole: return true;  // repair() skipped it; it said so then
    case kind_put_start: {
      put_start_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      // A get's data is announced as an answer (kind_stream_answer).
      if (m.channel >= geo_.nchannels || m.note_len > sizeof(m.note) || !piece_ok(m.piece) ||
          m.kind == stream_get_reply)
        break;
      return accept_stream(s, src, m);
    }
    case kind_stream_answer: {
      short_start_msg r;
      if (c->len != sizeof(r)) break;
      memcpy(&r, data, sizeof(r));
      if (r.channel >= geo_.nchannels || !piece_ok(r.piece) || r.note_len > sizeof(r.note) ||
          (r.kind != stream_get_reply && r.kind != stream_data))
        break;
      put_start_msg m{};
      (r.kind == stream_get_reply ? m.get_ctx : m.remote_addr) = r.target;
      m.size = r.size;
      m.channel = r.channel;
      m.note_len = r.note_len;
      m.kind = r.kind;
      memcpy(m.note, r.note, r.note_len);
      m.timed = r.timed;
      m.stores = r.stores;
      m.piece = r.piece;
      return accept_stream(s, src, m);
    }
    case kind_answer_message: return s.on_message(src, data, c->len);
    case kind_ahead: {
      ahead_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.channel >= geo_.nchannels || m.size == 0 || !piece_ok(m.piece) ||
          m.msg_len > sizeof(m.msg))
        break;
      peer& p = *peers_[size_t(src)];
      {
        util::lock_guard<util::spinlock> g(p.ahead_lock);
        if (p.ahead[m.channel].size != 0) break;  // the channel carries data ahead already
        p.ahead[m.channel] = m;
      }
      if (s.on_ahead(src, m.channel, m.msg, m.msg_len)) return true;
      // Not taken now: offered again later, as a message is (unless the core decided).
      util::lock_guard<util::spinlock> g(p.ahead_lock);
      p.ahead[m.channel].size = 0;
      return false;
    }
    case kind_split_read: {
      split_read_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      on_split_read(s, src, m);
      return true;
    }
    case kind_split_done: {
      split_done_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      on_split_done(src, m);
      return true;
    }
    case kind_notify:
    case kind_data_note: {
      if (c->len == 0 || c->len > sizeof(notify_msg)) break;
      return s.on_remote_notify(src, data, c->len);
    }
    case kind_get_request: {
      get_request_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.note_len > sizeof(m.note)) break;
      rkey_t k{m.key, m.generation};
      uint32_t held;  // key 0 names no region: refused below, and the getter told
      if (const char* why = ctx_.regions().acquire(me, k, m.remote_addr, m.size, held)) {
        log_refusal("get by a peer", me, k, m.remote_addr, m.size, why);
        get_refused_msg r{m.ctx};
        if (!enqueue(src, kind_get_refused, &r, sizeof(r), nullptr, 0))
          deferred_.add(deferred{src, true, 0, m});
        return true;
      }
      if (!serve_get(src, m, held)) deferred_.add(deferred{src, false, held, m});
      return true;
    }
    case kind_put_inline: {
      put_inline_msg m;
      if (c->len < sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.note_len == 0 || m.note_len > sizeof(m.note)) break;
      return apply_put_inline(s, src, m.remote_addr, rkey_t{m.key, m.generation}, m.ctx, m.note,
                              m.note_len, data + sizeof(m), c->len - sizeof(m));
    }
    case kind_put_small: {
      put_small_msg m;
      if (c->len < sizeof(m) || c->len - sizeof(m) > put_small_data) break;
      memcpy(&m, data, sizeof(m));
      const uint64_t size = c->len - sizeof(m);
      char note[put_small_note + sizeof(put_extent)];  // the note whole again
      const put_extent e{m.remote_addr, size};
      memcpy(note, m.note_head, put_small_note);
      memcpy(note + put_small_note, &e, sizeof(e));
      return apply_put_inline(s, src, m.remote_addr, rkey_t{m.key, 0}, m.ctx, note, sizeof(note),
                              data + sizeof(m), size);
    }
    case kind_put_ack: {
      put_ack_msg a;
      if (c->len != sizeof(a)) break;
      memcpy(&a, data, sizeof(a));
      if (take_put(src, a.ctx)) s.on_put_local_done(reinterpret_cast<void*>(a.ctx), a.ok != 0);
      return true;
    }
    case kind_get_refused: {
      get_refused_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (take_get(src, m.ctx)) s.on_get_done(reinterpret_cast<void*>(m.ctx), false);
      return true;
    }
    default: break;
  }
  WEFT_LOG(error, "shm: dropped a malformed backend cell of kind %u and length %u from rank %d",
           unsigned(c->kind), c->len, ctx_.boot().job_rank(src));
  return true;
}

template <class Take>
size_t shm_device::claim_runs(const lane& ln, size_t max, Take&& take) {
  // Cells are claimed in runs: the ready cells' sequence words are read with plain loads
  // (so their misses overlap) and one compare-and-swap on the head takes them all, instead
  // of one locked instruction, and one exposed miss, per message.
  constexpr size_t run_max = 16;
  size_t n = 0;
  uint64_t pos = ln.head->value.load(std::memory_order_relaxed);
  while (n < max) {
    const size_t limit = std::min(run_max, max - n);
    size_t k = 0;
    while (k < limit && ln.cell(pos + k, mask_)->seq.load(std::memory_order_acquire) == pos + k + 1)
      ++k;
    if (k == 0) {
      const uint64_t seq = ln.cell(pos, mask_)->seq.load(std::memory_order_relaxed);
      if (int64_t(seq - (pos + 1)) < 0) break;               // empty
      pos = ln.head->value.load(std::memory_order_relaxed);  // another consumer took it
      continue;
    }
    if (!ln.head->value.compare_exchange_weak(pos, pos + k, std::memory_order_relaxed)) continue;
    for (size_t i = 0; i < k; ++i) {
      if (!take(pos + i, pos + k)) return n + i;
      ln.cell(pos + i, mask_)->seq.store(pos + i + geo_.ncells, std::memory_order_release);
    }
    n += k;
    pos += k;
  }
  return n;
}

size_t shm_device::drain_lane(sink& s, const lane& ln, lane_hold& hold, size_t max) {
  // With refused cells held, the lane is drained under its lock, sender by sender in order.
  if (hold.active.load(std::memory_order_acquire)) return drain_holding(s, ln, hold, max);
  return claim_runs(ln, max, [&](uint64_t pos, uint64_t run_end) {
    if (handle_cell(s, ln.cell(pos, mask_), ln.body(pos, mask_, geo_.cell_size))) return true;
    hold_run(hold, ln, pos, run_end);  // the rest of the run is offered again soon
    return false;
  });
}

size_t shm_device::drain_answers(sink& s, size_t max) {
  return claim_runs(own_answers_, max, [&](uint64_t pos, uint64_t) {
    const cell_header* c = own_answers_.cell(pos, mask_);
    if ((is_answer(c->kind) || c->kind == kind_hole) && c->len <= inline_capacity) {
      if (!handle_other_cell(s, c, reinterpret_cast<const char*>(c + 1)))
        WEFT_LOG(error, "shm: an answer of kind %u was refused", unsigned(c->kind));
    } else {
      WEFT_LOG(error, "shm: dropped a cell of kind %u and length %u in the answer lane",
               unsigned(c->kind), c->len);
    }
    return true;  // answers are always taken: this lane never holds a cell
  });
}

// Keeps the claimed cells [from, to) of a lane, the first of them refused by the sink. A
// cell released out of order is safe in this ring: each has its own sequence word, and a
// producer stops at the first cell not yet released.
void shm_device::hold_run(lane_hold& hold, const lane& ln, uint64_t from, uint64_t to) {
  util::lock_guard<util::spinlock> g(hold.lock);
  for (uint64_t pos = from; pos < to; ++pos) {
    const uint16_t src = ln.cell(pos, mask_)->src;
    hold.cells.insert(std::upper_bound(hold.cells.begin(), hold.cells.end(), pos), pos);
    if (src < hold.from.size()) ++hold.from[src];
  }
  hold.active.store(true, std::memory_order_release);
}

bool shm_device::offer_cell(sink& s, const lane& ln, lane_hold& hold, uint64_t pos) {
  cell_header* c = ln.cell(pos, mask_);
  const uint16_t src = c->src;
  const bool known = src < hold.from.size();
  if ((!known || !hold.from[src]) && handle_cell(s, c, ln.body(pos, mask_, geo_.cell_size))) {
    c->seq.store(pos + geo_.ncells, std::memory_order_release);
    return true;
  }
  hold.cells.push_back(pos);
  if (known) ++hold.from[src];
  return false;
}

// Offers the held cells again, oldest first (a sender's cells after one the sink still
// refuses wait), then claims new cells, holding those whose sender has cells held.
size_t shm_device::drain_holding(sink& s, const lane& ln, lane_hold& hold, size_t max) {
  if (!hold.lock.try_lock()) return 0;
  util::lock_guard<util::spinlock> g(hold.lock, util::adopt_lock);
  size_t n = 0, kept = 0;
  std::fill(hold.refused.begin(), hold.refused.end(), 0);
  for (uint64_t pos : hold.cells) {
    cell_header* c = ln.cell(pos, mask_);
    const uint16_t src = c->src;
    const bool known = src < hold.refused.size();
    if (n < max && (!known || !hold.refused[src]) &&
        handle_cell(s, c, ln.body(pos, mask_, geo_.cell_size))) {
      c->seq.store(pos + geo_.ncells, std::memory_order_release);
      if (known) --hold.from[src];
      ++n;
      continue;
    }
    if (known) hold.refused[src] = 1;
    hold.cells[kept++] = pos;
  }
  hold.cells.resize(kept);
  // New cells: one at a time under the lock (this path is the slow one anyway).
  uint64_t pos = ln.head->value.load(std::memory_order_relaxed);
  while (n < max) {
    const uint64_t seq = ln.cell(pos, mask_)->seq.load(std::memory_order_acquire);
    if (seq != pos + 1) {
      if (int64_t(seq - (pos + 1)) < 0) break;               // empty
      pos = ln.head->value.load(std::memory_order_relaxed);  // another consumer took it
      continue;
    }
    if (!ln.head->value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) continue;
    if (offer_cell(s, ln, hold, pos)) ++n;
    ++pos;
  }
  if (hold.cells.empty()) hold.active.store(false, std::memory_order_release);
  return n;
}

// Several lanes in use. A thread drains its own lane first and the others only with
// budget left: taking the messages of a thread that is itself polling costs more than they
// are worth (measured: two loopback threads on one device reach 1.0x one thread when every
// poll shares its budget across lanes, 1.9x when it does not). Every 64th poll starts at
// the next lane instead, so a lane whose own thread never polls still drains while others
// are busy.
size_t shm_device::poll_lanes(sink& s, uint64_t used, size_t max) {
  size_t first = util::thread_index();
  if (uint32_t polls = util::thread_polls(); (polls & 63) == 0) first += polls >> 6;
  if (first >= geo_.nlanes) first %= geo_.nlanes;  // no divide with no more threads than lanes
  // Only the lanes marked used, in order from `first` round to it: the marked ones at or
  // above it, then those below (an idle poll of one used lane is a few instructions, where
  // visiting every lane with a modulo each was 48).
  const uint64_t from_first = ~uint64_t(0) << first;
  size_t n = 0;
  for (uint64_t part : {used & from_first, used & ~from_first})
    for (; part && n < max; part &= part - 1) {
      const size_t l = size_t(__builtin_ctzll(part));
      if (lane_idle(own_lanes_[l], holds_[l])) continue;  // no call for an empty lane
      n += drain_lane(s, own_lanes_[l], holds_[l], max - n);
    }
  return n;
}

size_t shm_device::poll(sink& s, size_t max) {
  if (!acks_.empty()) [[unlikely]]
    send_acks();
  const uint64_t used = own_bell_->lanes_used.load(std::memory_order_acquire);
  size_t n = 0;
  // Answers first: they complete this rank's own operations. Same line as lanes_used.
  if (own_bell_->answers_used.load(std::memory_order_acquire) &&
      !lane_idle(own_answers_, answers_hold_)) [[unlikely]]
    n = drain_answers(s, max);
  if (used & (used - 1)) [[unlikely]] {
    n += poll_lanes(s, used, max - n);  // drain_answers took at most max
  } else if (used) {                    // one lane in use (one sending thread): the usual case
    const size_t l = size_t(__builtin_ctzll(used));
    if (!lane_idle(own_lanes_[l], holds_[l]) && n < max)
      n += drain_lane(s, own_lanes_[l], holds_[l], max - n);
  }
  // Transfers and local events in hand, out of line: an idle poll tests four counts.
  if (!outgoing_.empty() || !incoming_.empty() || !deferred_.empty() || !events_.empty())
      [[unlikely]]
    n += advance_work(s);
  return n;
}

// Arms the bell for a sleeper of kind `bit` (bell_futex, bell_fd) and says whether it may
// sleep: not with work in hand or anything claimed in a lane (published or not yet).
// Several threads may sleep on one device: each arms the bell (a read-modify-write, so it
// is ordered against the producers' claims), and the waking producer wakes them all.
uint32_t shm_device::arm_bell(uint32_t bit) {
  if (!outgoing_.empty() || !incoming_.empty() || !events_.empty() || !acks_.empty())
    return 0;  // work in hand
  const uint32_t armed = own_bell_->armed.fetch_or(bit, std::memory_order_seq_cst) | bit;
  auto busy = [](const lane& ln) {
    return ln.tail->value.load(std::memory_order_seq_cst) !=
           ln.head->value.load(std::memory_order_seq_cst);
  };
  if (busy(own_answers_)) return 0;
  for (const lane& ln : own_lanes_)
    if (busy(ln)) return 0;
  return armed;
}

bool shm_device::wait_for_message(uint32_t timeout_us) {
  const uint32_t armed = arm_bell(bell_futex);
  if (!armed) return false;
  timespec ts{time_t(timeout_us / 1000000), long(timeout_us % 1000000) * 1000};
  syscall(SYS_futex, &own_bell_->armed, FUTEX_WAIT, armed, &ts, nullptr, 0);
  return true;
}

bool shm_device::arm_wake() {
  return bell_sock_.fd() >= 0 && arm_bell(bell_fd) != 0;
}

uint64_t shm_device::count(counter_t c) const {
  if (c == counter_t::bytes_pipelined) return bytes_pipelined_.load(std::memory_order_relaxed);
  if (c == counter_t::bytes_streamed) return bytes_streamed_.load(std::memory_order_relaxed);
  if (c == counter_t::channels_bypassed) return bypassed_.load(std::memory_order_relaxed);
  if (c == counter_t::bytes_mapped) return bytes_mapped_.load(std::memory_order_relaxed);
  if (c == counter_t::bytes_cross_memory)
    return bytes_cross_memory_.load(std::memory_order_relaxed);
  if (c == counter_t::bytes_split_read) return split_read_.load(std::memory_order_relaxed);
  if (c == counter_t::puts_small) return puts_small_.load(std::memory_order_relaxed);
  return 0;
}

}  // namespace weft::net::shm
