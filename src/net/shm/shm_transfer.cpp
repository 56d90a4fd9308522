// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's large transfers: a channel claimed and announced, the data
// sent ahead of its clear-to-send, the pipelined copies that poll advances at both ends,
// and the choice of the target's stores.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/cma.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/log.hpp"
#include "util/stream_copy.hpp"
#include "util/ticks.hpp"
#include "util/tsan.hpp"

namespace weft::net::shm {

// Claims a channel for `m` and announces it to `rank`; false when no channel is free or the
// peer's queue is full (nothing claimed then).
bool shm_device::start_stream(int rank, put_start_msg& m) {
  m.channel = claim_channel();
  if (m.channel == geo_.nchannels) return false;
  m.piece = uint32_t(piece_for(m.size, geo_.chunk_size, outgoing_.empty()));
  // Only a timed transfer's: the line is the target's (it writes `consumed` there).
  if (m.timed) channel_of(own_channels_, m.channel)->copy_ticks.store(0, std::memory_order_relaxed);
  // A get's data and rendezvous data answer the receiver: the short form, answer lane.
  const bool get = m.kind == stream_get_reply;
  bool sent;
  if (get || (m.kind == stream_data && m.note_len <= sizeof(short_start_msg::note))) {
    short_start_msg r{get ? m.get_ctx : m.remote_addr,
                      m.size,
                      m.channel,
                      m.piece,
                      m.timed,
                      m.stores,
                      uint8_t(m.note_len),
                      uint8_t(m.kind),
                      {}};
    memcpy(r.note, m.note, m.note_len);
    sent = enqueue(rank, kind_stream_answer, &r, sizeof(r), nullptr, 0);
  } else {
    sent = enqueue(rank, kind_put_start, &m, sizeof(m), nullptr, 0);
  }
  if (sent) return true;
  channel_of(own_channels_, m.channel)->busy.store(0, std::memory_order_release);
  return false;
}

bool shm_device::accept_stream(sink& s, int src, const put_start_msg& m) {
  const int me = ctx_.boot().rank();
  char* channels = peers_[size_t(src)]->channels;
  auto* ch = channel_of(channels, m.channel);
  char* dst = reinterpret_cast<char*>(m.remote_addr);
  rkey_t k{m.key, m.generation};
  uint32_t held = 0;
  if (m.kind == stream_get_reply) {
    // The answer to our own get: the destination is the one we asked for.
    pending_get g;
    if (!take_get(src, m.get_ctx, &g) || g.size != m.size) {
      WEFT_LOG(error, "shm: rank %d streams an answer to an unknown get",
               ctx_.boot().job_rank(src));
      ch->verdict.store(verdict_refused, std::memory_order_release);
      return true;
    }
    dst = g.dst;
  } else if (m.kind == stream_data) {  // rendezvous data: only into the buffer offered
    if (!s.expects_data(src, m.remote_addr, m.size, m.note, m.note_len)) {
      WEFT_LOG(error,
               "shm: rank %d streams %llu bytes of rendezvous data to %#llx, which "
               "no receive of its offered: refused",
               ctx_.boot().job_rank(src), static_cast<unsigned long long>(m.size),
               static_cast<unsigned long long>(m.remote_addr));
      ch->verdict.store(verdict_refused, std::memory_order_release);
      return true;
    }
  } else {  // a user's put: only into a registered region
    if (const char* why = ctx_.regions().acquire(me, k, m.remote_addr, m.size, held)) {
      log_refusal("put from a peer", me, k, m.remote_addr, m.size, why);
      ch->verdict.store(verdict_refused, std::memory_order_release);
      return true;
    }
  }
  ch->verdict.store(verdict_accepted, std::memory_order_release);
  if (m.kind == stream_data) WEFT_TSAN_ACQUIRE(dst);  // offered in our clear-to-send
  incoming_put in{src,  ch,        slots_of(channels, m.channel), dst,        m.size, 0,
                  held, m.get_ctx, m.kind == stream_get_reply,    m.note_len, {}};
  memcpy(in.note, m.note, sizeof(in.note));
  in.timed = m.timed != 0;
  in.piece = m.piece;
  in.store =
      m.stores == uint8_t(store_mode::streaming) ? store_mode::streaming : store_mode::cached;
  incoming_.add(in);
  return true;
}

// Rendezvous data moves as WEFT_SHM_PUT says; a user's put by cross-memory attach when
// permitted (WEFT_SHM_RMA), since then it needs no CPU of the target, and is checked against
// the target's region table either way.
bool shm_device::try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr,
                               const void* note, size_t note_len, void* ctx) {
  return stream_out(rank, src, size, remote_addr, rkey_t{}, note, note_len, ctx, stream_data);
}

bool shm_device::try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  return stream_out(rank, src, size, remote_addr, k, note, note_len, ctx, stream_put);
}

bool shm_device::stream_out(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                            const void* note, size_t note_len, void* ctx, uint16_t kind) {
  const bool data = kind == stream_data, self = rank == ctx_.boot().rank();
  // A small notified put goes in its cell: the target progresses anyway to see the note,
  // and a cross-memory write would cost a system call (1.5 us) for a few bytes.
  if (kind == stream_put && note_len && !self && size &&
      size + sizeof(put_inline_msg) <= max_message_size())
    return put_inline(rank, src, size, remote_addr, k, note, note_len, ctx);
  if (kind == stream_put && mapped_target(rank, k)) {  // one memcpy: nothing to choose
    direct_access(true, rank, const_cast<void*>(src), size, remote_addr, k, note, note_len, ctx);
    return true;
  }
  // WEFT_SHM_PUT=auto: the peer's chooser picks rendezvous data's mechanism and is told
  // how long it took; WEFT_SHM_RMA=auto: a user's put's too.
  const settings& cfg = ctx_.config();
  const bool chosen = data ? cfg.mode == put_mode::automatic
                           : kind == stream_put && rma_auto_ && ctx_.cma_permitted();
  chooser* timed = chosen && !self && size ? &peers_[size_t(rank)]->choose : nullptr;
  const put_mode mode = timed               ? timed->choose(size)
                        : self || size == 0 ? put_mode::cma
                        : !data             ? rma_mechanism()
                                            : ctx_.config().mode;
  // By cross-memory attach, its time told to the chooser when it chose; copied from both
  // ends when large enough (shm_split.cpp), unless the target is busy (`split` false).
  auto by_cma = [&](bool split) {
    if (timed) timed->start(put_mode::cma, size);
    if (split && data && !self && cfg.split_min && size >= cfg.split_min &&
        note_len == sizeof(split_read_msg::note) &&
        split_write(rank, src, size, remote_addr, note, ctx, timed != nullptr))
      return true;
    const uint64_t t0 = timed ? util::ticks() : 0;
    direct_access(true, rank, const_cast<void*>(src), size, remote_addr, k, note, note_len, ctx,
                  data);
    if (timed) timed->record(put_mode::cma, size, util::ticks() - t0);
    return true;
  };
  if (mode == put_mode::cma) return by_cma(true);
  put_start_msg m{remote_addr, size, k.key, k.generation, 0, 0, uint16_t(note_len), kind, {},
                  0,           0,    0};
  if (note_len) memcpy(m.note, note, note_len);
  peer& p = *peers_[size_t(rank)];
  bool store_timed = false;
  const store_mode store = choose_stores(p, size, store_timed);
  m.timed = timed != nullptr || store_timed;
  m.stores = uint8_t(store);
  if (!start_stream(rank, m)) {
    // No channel, and the oldest held by a target that computes: around them (the header).
    if (m.channel != geo_.nchannels || !timed || !bypass_channels(p, size)) return false;
    bypassed_.fetch_add(1, std::memory_order_relaxed);
    return by_cma(false);  // its target computes: it would not read its half soon
  }
  if (timed) timed->start(mode, size);
  if (store_timed) p.stores.start(store, size);
  outgoing_put o{rank, m.channel, static_cast<const char*>(src), size, 0, ctx, false, {}};
  o.timed = timed != nullptr;
  o.store = store;
  o.store_timed = store_timed;
  o.piece = m.piece;
  outgoing_.add(o);
  return true;
}

bool shm_device::bypass_channels(const peer& p, size_t size) const {
  const uint64_t cma = p.choose.ticks_for(put_mode::cma, size);
  if (!cma) return false;  // no figure yet: wait for a channel
  uint64_t oldest = UINT64_MAX;
  for (uint32_t c = 0; c < geo_.nchannels; ++c)
    oldest = std::min(oldest, claimed_at_[c].load(std::memory_order_relaxed));
  // 16 times: a target that progresses keeps a channel a few copy times when transfers
  // queue behind each other (bench_weft bw, 64 transfers in flight: with 1 time, a third of
  // them went around and 64 KiB moved 11-12 GB/s against 19-21); one that computes keeps it
  // for its task, milliseconds, hundreds of times a copy.
  const uint64_t now = util::ticks();
  return now > oldest && now - oldest > 16 * cma;
}

// Rendezvous data ahead of its ready-to-send, when it would move by the pipelined copy
// anyway (WEFT_SHM_PUT, or the chooser's pick): the source fills its channel while the
// ready-to-send travels, and the target starts copying the moment it matches the message,
// without the clear-to-send and the announcement that the classic path waits for.
bool shm_device::try_send_ahead(int rank, const void* hdr, size_t hdr_len, const void* payload,
                                size_t len, const void* src, size_t size, void* ctx) {
  const settings& cfg = ctx_.config();
  // Below stream_min only: there the classic path's three messages are a tenth or more
  // of a transfer's time (9000 B to 64 KiB one at a time: +8-20% ahead), at 256 KiB and
  // above a few percent, where the target's stores are chosen by timing each transfer's
  // copy loops and a copy begun before the target accepted would enter those figures.
  if (!cfg.ahead || rank == ctx_.boot().rank() || size == 0 || size >= stream_min ||
      hdr_len + len > sizeof(ahead_msg::msg))
    return false;
  peer& p = *peers_[size_t(rank)];
  chooser* timed = cfg.mode == put_mode::automatic ? &p.choose : nullptr;
  if ((timed ? timed->choose(size) : cfg.mode) != put_mode::pipeline) return false;
  // Counted before the channel is claimed: data ahead that nobody receives yet holds its
  // channel until then.
  if (unaccepted_.fetch_add(1, std::memory_order_acq_rel) + 1 >= geo_.nchannels) {
    unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  ahead_msg m{};
  m.size = size;
  m.channel = claim_channel();
  if (m.channel == geo_.nchannels) {
    unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  m.piece = uint32_t(piece_for(size, geo_.chunk_size, outgoing_.empty()));
  bool store_timed = false;
  const store_mode store = choose_stores(p, size, store_timed);
  m.timed = timed != nullptr || store_timed;
  m.stores = uint8_t(store);
  m.msg_len = uint16_t(hdr_len + len);
  memcpy(m.msg, hdr, hdr_len);
  if (len) memcpy(m.msg + hdr_len, payload, len);
  if (m.timed) channel_of(own_channels_, m.channel)->copy_ticks.store(0, std::memory_order_relaxed);
  // In the list before the announcement goes: the target's refusal, and the cancel_ahead
  // it brings, may come back on another thread before this one returns.
  outgoing_put o{rank, m.channel, static_cast<const char*>(src), size, 0, ctx, false, {}};
  o.timed = timed != nullptr;
  o.store = store;
  o.store_timed = store_timed;
  o.piece = m.piece;
  o.ahead = true;
  outgoing_.add(o);
  if (!enqueue(rank, kind_ahead, &m, sizeof(m), nullptr, 0)) {
    cancel_ahead(rank, ctx);  // the peer's queue is full: nothing went
    return false;
  }
  if (timed) timed->start(put_mode::pipeline, size);
  if (store_timed) p.stores.start(store, size);
  return true;
}

// The target refused our data ahead (its refusal message is here): the channel is ours again.
void shm_device::cancel_ahead(int rank, void* ctx) {
  outgoing_.remove_if([&](const outgoing_put& o) {
    if (!o.ahead || o.rank != rank || o.ctx != ctx) return false;
    channel_of(own_channels_, o.channel)->busy.store(0, std::memory_order_release);
    if (!o.accepted) unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    return true;
  });
}

// The target's side of data sent ahead: its announcement, kept until the core decides.
bool shm_device::accept_ahead(int rank, uint32_t id, void* dst, size_t size, size_t accept,
                              const void* note, size_t note_len) {
  peer& p = *peers_[size_t(rank)];
  ahead_msg m;
  if (!take_announcement(p, id, &m)) return false;  // its source died
  // Its two announcements disagree (a corrupt peer), or the note cannot be carried: refused.
  if (m.size != size || note_len > max_note_size) {
    channel_of(p.channels, id)->verdict.store(verdict_refused, std::memory_order_release);
    return false;
  }
  auto* ch = channel_of(p.channels, id);
  ch->verdict.store(verdict_accepted, std::memory_order_release);
  incoming_put in{rank,
                  ch,
                  slots_of(p.channels, id),
                  static_cast<char*>(dst),
                  m.size,
                  0,
                  0,
                  0,
                  false,
                  uint32_t(note_len),
                  {}};
  if (note_len) memcpy(in.note, note, note_len);
  in.timed = m.timed != 0;
  in.piece = m.piece;
  in.keep = std::min<size_t>(accept, m.size);
  in.store =
      m.stores == uint8_t(store_mode::streaming) ? store_mode::streaming : store_mode::cached;
  incoming_.add(in);
  return true;
}

void shm_device::refuse_ahead(int rank, uint32_t id) {
  peer& p = *peers_[size_t(rank)];
  if (take_announcement(p, id, nullptr))
    channel_of(p.channels, id)->verdict.store(verdict_refused, std::memory_order_release);
}

bool shm_device::take_announcement(peer& p, uint32_t id, ahead_msg* out) {
  util::lock_guard<util::spinlock> g(p.ahead_lock);
  if (id >= p.ahead.size() || p.ahead[id].size == 0) return false;
  if (out) *out = p.ahead[id];
  p.ahead[id].size = 0;
  return true;
}

// How the target of a pipelined transfer to `p` will store it (WEFT_SHM_STORES); `timed`
// says whether the transfer's time goes to p's store_chooser. Chosen here, at the source,
// because only the source sees both copy loops (its own and, in copy_ticks, the target's):
// streaming stores can speed the target's loop and slow the source's, and the transfer
// goes at the pace of the slower one.
store_mode shm_device::choose_stores(peer& p, size_t size, bool& timed) {
  const settings& cfg = ctx_.config();
  timed = false;
  if (!cfg.stores_auto) return cfg.stores;
  if (size < stream_min) return store_mode::cached;
  timed = true;
  return p.stores.choose(size);
}

// One piece into the destination. Streaming stores are weakly ordered: the fence keeps
// them ahead of the `consumed` store that hands the slot back and, at the last piece, of
// the notification that completes the receive.
void shm_device::copy_in(store_mode m, char* dst, const char* src, size_t n) {
  if (m == store_mode::streaming) {
    util::stream_copy(dst, src, n);
    util::stream_fence();
  } else {
    memcpy(dst, src, n);
  }
}

// The transfers and events of poll: pipelined puts and gets in both directions, gets whose
// serving was deferred, and local events for the sink.
size_t shm_device::advance_work(sink& s) {
  size_t n = 0;
  const int me = ctx_.boot().rank();
  const size_t slot = geo_.chunk_size, nslots = geo_.nslots;
  n += outgoing_.advance([&](outgoing_put& o) {
    // A get served and streamed whose notification our sink refused: offer it again.
    if (o.finished) return s.on_remote_notify(o.rank, o.note, o.note_len);
    auto* ch = channel_of(own_channels_, o.channel);
    char* slots = slots_of(own_channels_, o.channel);
    const uint32_t verdict = ch->verdict.load(std::memory_order_acquire);
    if (o.ahead && !o.accepted && verdict != verdict_pending) {
      o.accepted = true;  // decided: no longer holds a channel for a message not yet matched
      unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (verdict == verdict_refused) {
      if (o.ahead) return false;  // ended by the refusal message (cancel_ahead)
      ch->busy.store(0, std::memory_order_release);
      if (o.get_reply)
        ctx_.regions().release(me, o.held);
      else
        s.on_put_local_done(o.ctx, false);
      return true;
    }
    const uint64_t total = npieces(o.size, o.piece);
    auto room = [&] {
      return o.next_chunk < total &&
             o.next_chunk - ch->consumed.load(std::memory_order_acquire) < nslots;
    };
    // Timed only when it copies: a poll that finds no room reads no clock (two time-stamp
    // reads per waiting transfer per poll were a third of this function's time).
    const bool timing = o.timed || o.store_timed;
    if (room()) {
      const uint64_t t0 = timing ? util::ticks() : 0;
      do {
        const size_t off = o.next_chunk * o.piece;
        memcpy(slots + (o.next_chunk % nslots) * slot, o.src + off,
               std::min(o.piece, o.size - off));
        ++o.next_chunk;
        ch->written.store(o.next_chunk, std::memory_order_release);
      } while (room());
      if (timing) o.ticks += util::ticks() - t0;
    }
    // Done once the target has accepted the region and copied every byte out: a put is
    // complete at its source only when its data is visible at the target.
    if (o.next_chunk < total || verdict != verdict_accepted ||
        ch->consumed.load(std::memory_order_acquire) < total)
      return false;
    ch->busy.store(0, std::memory_order_release);
    bytes_pipelined_.fetch_add(o.size, std::memory_order_relaxed);
    if (timing) {  // the two copy loops ran side by side: the longer one is the time
      const uint64_t took = std::max(o.ticks, ch->copy_ticks.load(std::memory_order_relaxed));
      peer& p = *peers_[size_t(o.rank)];
      if (o.timed) p.choose.record(put_mode::pipeline, o.size, took);
      if (o.store_timed) p.stores.record(o.store, o.size, took);
    }
    if (!o.get_reply) {
      s.on_put_local_done(o.ctx, true);
      return true;
    }
    ctx_.regions().release(me, o.held);
    o.finished = true;
    return !o.note_len || s.on_remote_notify(o.rank, o.note, o.note_len);
  });

  n += incoming_.advance([&](incoming_put& in) {
    // The data is in but our sink refused the notification: offer it again.
    if (in.copied) return s.on_remote_notify(in.rank, in.note, in.note_len);
    const uint64_t total = npieces(in.size, in.piece);
    const uint64_t w = in.channel->written.load(std::memory_order_acquire);
    if (in.consumed < w) {  // timed only when it copies, as above
      const uint64_t t0 = in.timed ? util::ticks() : 0;
      const size_t end = std::min(in.size, in.keep);  // data ahead: past a shorter buffer
      do {
#ifdef WEFT_TEST_HOOKS
        if (ctx_.config().test_delay_us) usleep(useconds_t(ctx_.config().test_delay_us));
#endif
        const size_t off = in.consumed * in.piece;
        if (off < end)  // what lies past `end` is dropped
          copy_in(in.store, in.dst + off, in.slots + (in.consumed % nslots) * slot,
                  std::min(in.piece, end - off));
        if (++in.consumed == total && in.timed)  // before the store that releases it
          in.channel->copy_ticks.store(in.ticks + (util::ticks() - t0), std::memory_order_relaxed);
        in.channel->consumed.store(in.consumed, std::memory_order_release);
      } while (in.consumed < w);
      if (in.timed) in.ticks += util::ticks() - t0;
    }
    if (in.consumed < total) return false;
    if (in.store == store_mode::streaming)
      bytes_streamed_.fetch_add(in.size, std::memory_order_relaxed);
    ctx_.regions().release(me, in.held);
    // The channel stays busy: its owner frees it once it has seen the transfer complete.
    // Freed here, the owner could claim it for a new transfer first and lose the old one.
    if (in.get_reply) {
      s.on_get_done(reinterpret_cast<void*>(in.get_ctx), true);
      return true;
    }
    in.copied = true;
    return !in.note_len || s.on_remote_notify(in.rank, in.note, in.note_len);
  });

  n += deferred_.advance([&](deferred& d) {
    if (!d.refuse) return serve_get(d.rank, d.req, d.held);
    get_refused_msg r{d.req.ctx};
    return enqueue(d.rank, kind_get_refused, &r, sizeof(r), nullptr, 0);
  });

  n += events_.advance([&](local_event& e) {
    switch (e.kind) {
      case local_event::put_done: s.on_put_local_done(e.ctx, e.ok); return true;
      case local_event::get_done: s.on_get_done(e.ctx, e.ok); return true;
      case local_event::split_done:  // on_split_read's answer, its bytes in the note
        return enqueue(e.rank, kind_split_done, e.note, e.note_len, nullptr, 0);
      case local_event::notify: {
        notify_msg m{};
        memcpy(m.note, e.note, e.note_len);
        if (!enqueue(e.rank, e.note_kind, &m, e.note_len, nullptr, 0)) return false;
        if (e.then == local_event::put_done) s.on_put_local_done(e.ctx, true);
        if (e.then == local_event::get_done) s.on_get_done(e.ctx, true);
        return true;
      }
    }
    return true;
  });
  return n;
}

}  // namespace weft::net::shm
