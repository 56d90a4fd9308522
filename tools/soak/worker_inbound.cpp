// SPDX-License-Identifier: BSD-3-Clause
// The receiving half of a weft-soak thread: the posted receives of its send channels,
// active messages and put notifications, each checked and entered in its channel's ledger.
#include <cstdlib>

#include "worker_parts.hpp"

namespace soak {

// Posts the receive for the channel's next message; one that completes at once is checked
// and the next one posted, until one stays posted (or the channel closes).
void worker::post_recv(channel& c) {
  while (c.st == channel::state::unposted) {
    c.size = send_size(J.seed, c.rank, c.thread, J.me, t, c.next, J.opt.max_size);
    c.buf.resize(c.size);
    weft::status_t s;
    try {
      s = weft::post_recv_x(c.rank, c.buf.data(), c.size, send_tag(c.thread, t, c.next), local_cq)
              .device(dev)
              .user_context(&c)();
    } catch (const weft::fatal_error& e) {
      if (!refused(e, c.rank)) throw;
      c.st = channel::state::closed;
      return;
    }
    if (s.error.is_retry()) return;
    c.st = channel::state::posted;
    if (s.error.is_done()) received(c, s);
  }
}

// A receive of the channel ended: check what arrived and post the next one (unless the
// channel is closed: cancelled at the end, or its sender died).
void worker::received(channel& c, const weft::status_t& s) {
  c.st = channel::state::unposted;
  if (s.error.is_cancelled()) {
    c.st = channel::state::closed;
    return;
  }
  if (s.error.is_error()) {
    failed(s, c.rank, "a receive");
    c.st = channel::state::closed;
    return;
  }
  ledger& l = ledgers[idx(kind::send, c.rank, c.thread)];
  const identity id{kind::send, c.rank, c.thread, c.next};
  std::string why;
  if (!l.record(c.next)) {
    ++mine.duplicated;
    J.failure("send seq " + std::to_string(c.next) + " from rank " + std::to_string(c.rank) +
              " arrived twice");
  } else if (s.size != c.size || !check(c.buf.data(), c.size, id, &why)) {
    ++mine.corrupted;
    J.failure("send seq " + std::to_string(c.next) + " from rank " + std::to_string(c.rank) +
              " thread " + std::to_string(c.thread) + ": " +
              (s.size != c.size ? "size " + std::to_string(s.size) : why));
  } else {
    ++mine.verified;
  }
  ++c.next;
}

// The full sequence number whose low bits are `lo`: the one nearest to what the ledger has
// seen (messages of a channel arrive roughly in order; 2^26 apart are never confused).
uint64_t worker::full_seq(const ledger& l, uint64_t lo) const {
  const uint64_t span = uint64_t(1) << lo_bits, base = l.end();
  uint64_t best = (base & ~(span - 1)) | lo;
  for (uint64_t c : {best - span, best + span})
    if (c < (uint64_t(1) << 62) &&
        (c > base ? c - base : base - c) < (best > base ? best - base : base - best))
      best = c;
  return best;
}

// An active message or a put notification in this thread's remote queue.
void worker::arrived(const weft::status_t& s) {
  const char* at = static_cast<const char*>(s.buf);
  const size_t region = J.slot_of(J.n, 0);
  const bool notify = at >= J.inbox && at < J.inbox + region;
  const kind k = notify ? kind::put_notify : kind::am;
  const int r = s.rank, i = int(s.tag >> lo_bits);
  if (r < 0 || r >= J.n || i >= J.opt.threads) {
    ++mine.corrupted;
    J.failure("a message with rank " + std::to_string(r) + " tag " + std::to_string(s.tag));
    if (!notify) free(s.buf);
    return;
  }
  ledger& l = ledgers[idx(k, r, i)];
  uint64_t seq = full_seq(l, s.tag & ((uint64_t(1) << lo_bits) - 1));
  identity claimed;
  if (!notify && read_header(s.buf, s.size, &claimed)) seq = claimed.seq;
  std::string why;
  bool good = true;
  if (notify) {  // the data is checked by the initiator reading it back
    good = at == J.inbox + J.slot_of(r, i) && s.size <= J.opt.max_size;
    why = "a notification for the wrong place";
  } else {
    good = check(s.buf, s.size, identity{k, r, i, seq}, &why);
  }
  const std::string what = std::string(notify ? "notification" : "AM") + " seq " +
                           std::to_string(seq) + " from rank " + std::to_string(r) + " thread " +
                           std::to_string(i);
  if (!l.record(seq)) {
    ++mine.duplicated;
    J.failure(what + " arrived twice");
  } else if (!good) {
    ++mine.corrupted;
    J.failure(what + ": " + why);
  } else {
    ++mine.verified;
  }
  if (!notify) free(s.buf);
}

// Whether every channel into this thread delivered what its sender says it sent.
bool worker::channels_done() {
  for (int r = 0; r < J.n; ++r) {
    if (J.fin_known_dead[size_t(r)]) continue;
    for (int i = 0; i < J.opt.threads; ++i) {
      if (!J.opt.shared && i != t) continue;
      for (kind k : {kind::send, kind::am, kind::put_notify})
        if (ledgers[idx(k, r, i)].distinct() < J.fin[size_t(r)][J.fin_index(k, i, t)]) return false;
    }
  }
  return true;
}

// The end: count what never arrived and what arrived beyond what was sent, then cancel
// the receives still posted and wait for them to end.
void worker::finish_channels() {
  for (int r = 0; r < J.n; ++r) {
    if (J.fin_known_dead[size_t(r)]) continue;
    for (int i = 0; i < J.opt.threads; ++i) {
      if (!J.opt.shared && i != t) continue;
      for (kind k : {kind::send, kind::am, kind::put_notify}) {
        const ledger& l = ledgers[idx(k, r, i)];
        const uint64_t expected = J.fin[size_t(r)][J.fin_index(k, i, t)];
        if (const uint64_t lost = l.missing(expected)) {
          mine.lost += lost;
          J.failure(std::to_string(lost) + " of " + std::to_string(expected) +
                    " messages of kind " + std::to_string(int(k)) + " from rank " +
                    std::to_string(r) + " thread " + std::to_string(i) + " never arrived");
        }
        if (const uint64_t extra = l.beyond(expected)) {
          mine.duplicated += extra;
          J.failure(std::to_string(extra) + " messages from rank " + std::to_string(r) +
                    " beyond the " + std::to_string(expected) + " it sent");
        }
      }
    }
  }
  for (auto& c : inbound)
    if (c->st == channel::state::posted &&
        weft::cancel_recv_x(c->rank, c->buf.data(), send_tag(c->thread, t, c->next), local_cq)
            .device(dev)())
      continue;  // its completion (cancelled) comes through the queue
  const auto until = clock::now() + std::chrono::seconds(10);
  for (;;) {
    bool open = false;
    for (auto& c : inbound) open |= c->st == channel::state::posted;
    if (!open || clock::now() > until) break;
    service(false);
  }
}

}  // namespace soak
