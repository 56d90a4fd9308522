// SPDX-License-Identifier: BSD-3-Clause
// The posting half of a weft-soak thread: choosing, posting and completing operations.
#include <cstring>

#include "worker_parts.hpp"

namespace soak {

worker::worker(job& j, int thread)
    : J(j),
      t(thread),
      dev(j.devices[j.opt.shared ? 0 : size_t(thread)]),
      remote_cq(j.remote_cqs[size_t(thread)]),
      R(mix(j.seed, uint64_t(j.me) << 8 | uint64_t(thread))) {
  local_cq = weft::alloc_cq();
  const size_t n = size_t(J.n), T = size_t(J.opt.threads);
  ledgers.resize(size_t(nkinds) * n * T);
  sent.assign(size_t(nkinds) * n * T, 0);
  slot_busy.assign(n, 0);
  for (int w = 0; w < J.opt.window; ++w) ops.push_back(std::make_unique<op>());
  for (int r = 0; r < J.n; ++r)
    for (int i = 0; i < J.opt.threads; ++i)
      if (J.opt.shared || i == t) inbound.push_back(std::make_unique<channel>(r, i));
}

worker::~worker() {
  weft::free_comp(&local_cq);
}

size_t worker::idx(kind k, int rank, int thread) const {
  return (size_t(k) * size_t(J.n) + size_t(rank)) * size_t(J.opt.threads) + size_t(thread);
}

void worker::sent_to(int rank, std::vector<uint64_t>& fin) const {
  for (kind k : {kind::send, kind::am, kind::put_notify})
    for (int j = 0; j < J.opt.threads; ++j) fin[J.fin_index(k, t, j)] = sent[idx(k, rank, j)];
}

// ---- choosing and posting -------------------------------------------------------------
void worker::choose(op& o) {
  std::vector<int> live;
  for (int r = 0; r < J.n; ++r)
    if (!J.is_dead(r)) live.push_back(r);
  o.rank = live.empty() ? J.me : live[R.below(live.size())];
  o.thread = J.opt.shared ? int(R.below(uint64_t(J.opt.threads))) : t;
  o.get = o.back = false;
  o.copies = 1;
  o.fault = inject::none;
  const double u = R.unit();
  o.k = u < 0.3 ? kind::send : u < 0.6 ? kind::am : u < 0.7 ? kind::put : kind::put_notify;
  if (u >= 0.85) o.get = true;
  if ((o.k == kind::put || o.k == kind::put_notify) && !o.get && slot_busy[size_t(o.rank)])
    o.k = kind::am;
  const size_t max = J.opt.max_size;
  if (o.get) {
    o.size = std::max<size_t>(1, draw_size(R, max));
    o.disp = R.below(max - o.size + 1);
    o.buf.assign(o.size, 0);
    return;
  }
  if (o.k == kind::put || o.k == kind::put_notify) {
    slot_busy[size_t(o.rank)] = 1;
    o.size = std::max<size_t>(1, draw_size(R, max));
    o.disp = J.slot_of(J.me, t);
  }
  uint64_t& count = sent[idx(o.k, o.rank, o.thread)];
  o.seq = (o.k == kind::put) ? 0 : count++;  // plain puts are checked by reading back
  if (o.k == kind::send) o.size = send_size(J.seed, J.me, t, o.rank, o.thread, o.seq, max);
  if (o.k == kind::am) o.size = draw_size(R, max);
  inject_into(o);
  o.buf.resize(o.size);
  stamp(o.buf.data(), o.size, identity{o.k, J.me, t, o.seq});
  if (o.fault == inject::corrupt) o.buf[o.size - 1] ^= 0x20;  // a bit flipped after stamping
  if (o.fault == inject::dup) o.copies = 2;
}

// Rank 0's thread 0, a third of the way in: one active message dropped (counted as sent,
// never posted), posted twice, or corrupted after stamping. The checks must catch it.
void worker::inject_into(op& o) {
  if (J.opt.bug == inject::none || injected || J.me != 0 || t != 0 || o.get ||
      J.elapsed() < J.opt.seconds / 3 || o.k != kind::am)
    return;
  injected = true;
  o.size = 256;
  o.fault = J.opt.bug;
  fprintf(stderr, "soak: rank 0 thread 0 injects a %s into AM seq %llu to rank %d thread %d\n",
          name(J.opt.bug), static_cast<unsigned long long>(o.seq), o.rank, o.thread);
}

bool worker::start_op(op& o) {
  choose(o);
  ++mine.operations;
  if (o.fault == inject::drop) {  // counted as sent, never posted
    o.st = op::state::free;
    return false;
  }
  post(o);
  return true;
}

void worker::post(op& o) {
  const peer_regions& p = J.peers[size_t(o.rank)];
  weft::status_t s;
  try {
    if (o.get || o.back) {
      std::vector<char>& into = o.back ? o.back_buf : o.buf;
      s = weft::post_get_x(o.rank, into.data(), o.size, local_cq, o.disp,
                           o.back ? p.inbox : p.pattern)
              .device(dev)
              .user_context(&o)();
    } else if (o.k == kind::send) {
      s = weft::post_send_x(o.rank, o.buf.data(), o.size, send_tag(t, o.thread, o.seq), local_cq)
              .device(dev)
              .user_context(&o)();
    } else if (o.k == kind::am) {
      s = weft::post_am_x(o.rank, o.buf.data(), o.size, local_cq, J.rcomps[size_t(o.thread)])
              .tag(short_tag(t, o.seq))
              .device(dev)
              .user_context(&o)();
    } else {
      auto x = weft::post_put_x(o.rank, o.buf.data(), o.size, local_cq, o.disp, p.inbox);
      if (o.k == kind::put_notify)
        x.remote_comp(J.rcomps[size_t(o.thread)]).tag(short_tag(t, o.seq));
      s = x.device(dev).user_context(&o)();
    }
  } catch (const weft::fatal_error& e) {
    if (!refused(e, o.rank)) throw;
    if (!o.get) slot_busy[size_t(o.rank)] = 0;
    o.st = op::state::free;
    return;
  }
  if (s.error.is_retry()) {
    o.st = op::state::unposted;
    return;
  }
  o.st = op::state::posted;
  if (s.error.is_done()) complete(o, s);
}

// ---- completions ------------------------------------------------------------------------
void worker::complete(op& o, const weft::status_t& s) {
  const bool put = !o.get && (o.k == kind::put || o.k == kind::put_notify);
  if (s.error.is_error()) {
    failed(s, o.rank, o.back ? "get (reading a put back)" : o.get ? "get" : "operation");
    if (put) slot_busy[size_t(o.rank)] = 0;
    o.st = op::state::free;
    return;
  }
  if (o.copies > 1) {  // the injected duplicate: the same message once more
    --o.copies;
    post(o);
    return;
  }
  mine.bytes += o.size;  // each transfer once, where it completes: a put, then its read-back
  if (put && !o.back) {  // visible at the target now: read it back
    o.back = true;
    o.back_buf.assign(o.size, 0);
    post(o);
    return;
  }
  if (o.back) {
    slot_busy[size_t(o.rank)] = 0;
    if (memcmp(o.back_buf.data(), o.buf.data(), o.size) == 0) {
      ++mine.verified;
    } else {
      ++mine.corrupted;
      J.failure("a put of " + std::to_string(o.size) + " bytes to rank " + std::to_string(o.rank) +
                " read back different");
    }
  } else if (o.get) {
    if (check_pattern(o.buf.data(), o.size, o.rank, o.disp)) {
      ++mine.verified;
    } else {
      ++mine.corrupted;
      J.failure("a get of " + std::to_string(o.size) + " bytes from rank " +
                std::to_string(o.rank) + " at " + std::to_string(o.disp) + " read wrong bytes");
    }
  }
  o.st = op::state::free;
}

// An error status: expected when it names the dead rank with error_peer_dead.
bool worker::failed(const weft::status_t& s, int rank, const char* what) {
  const int who = s.rank >= 0 ? s.rank : rank;
  if (s.error.errorcode == weft::errorcode_t::error_peer_dead && J.expected_death(who)) {
    J.mark_dead(who);
    ++mine.dead_errors;
    return true;
  }
  ++mine.errors;
  J.failure(std::string(what) + " with rank " + std::to_string(rank) + " ended with " +
            s.error.get_str() + " naming rank " + std::to_string(s.rank));
  return false;
}

// A post refused naming `rank`, which Weft knows dead: expected for the victim; for any
// other rank an error that fails the run (the rank is avoided from then on). False for a
// refusal of another kind (a bug in the soak itself: rethrown).
bool worker::refused(const weft::fatal_error& e, int rank) {
  if (e.argument() != "rank" || e.value() != std::to_string(rank)) return false;
  J.mark_dead(rank);
  if (J.expected_death(rank)) {
    ++mine.dead_refused;
  } else {
    ++mine.errors;
    J.failure(std::string("a post refused: ") + e.what());
  }
  return true;
}

}  // namespace soak
