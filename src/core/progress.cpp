// SPDX-License-Identifier: BSD-3-Clause
// The progress engine (LCI paper Figure 1): retry the backlog, poll the backend, match
// arrivals, signal completion objects, continue rendezvous transfers, and turn the
// operations waiting on a dead peer into errors.

#include <cstdlib>
#include <cstring>

#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/hooks.hpp"
#include "core/runtime.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"
#include "util/clock.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/small_copy.hpp"
#include "util/thread_index.hpp"
#include "util/tsan.hpp"

namespace weft::impl {
namespace {

// How often a device with pending work checks that its peers are alive.
constexpr int64_t peer_check_interval_ns = 50 * 1000 * 1000;

const char* type_name(uint8_t t) {
  switch (msg_type(t)) {
    case msg_type::eager_send: return "eager send";
    case msg_type::eager_am: return "eager active message";
    case msg_type::rts_send: return "rendezvous send";
    case msg_type::rts_am: return "rendezvous active message";
    case msg_type::cts: return "clear-to-send";
    case msg_type::nack: return "rendezvous refusal";
  }
  return "unknown";
}

}  // namespace

void device_impl::defer_signal(comp_impl* c, const status_t& s) {
  c->pending.fetch_add(1, std::memory_order_relaxed);
  backlog_push(backlog_work::signal{c, s}, "a completion signal");
}

// Both queues are sized for everything in flight (see their capacities): a full one is a
// bug in Weft, reported as such.
template <typename Queue, typename Item>
void device_impl::push_or_fail(Queue& q, const Item& it, const char* queue, const char* what) {
  if (q.push(it)) return counted_backlog_push();
  util::fail("progress", queue, std::to_string(q.size()) + " items",
             std::string("no room for ") + what +
                 " (only operations in flight add to it past backlog_size, so this is a bug "
                 "in Weft)");
}

void device_impl::backlog_push(const backlog_item& it, const char* what) {
  push_or_fail(backlog, it, "backlog", what);
}

void device_impl::data_backlog_push(const backlog_work::rendezvous_put& r) {
  push_or_fail(data_backlog, r, "data backlog", "rendezvous data");
}

void device_impl::send_control(int rank, const wire_header& h, const void* body, size_t len) {
  if (net->try_send_answer(rank, &h, sizeof(h), body, len)) return;
  backlog_work::control m{rank, uint32_t(len), h, {}};
  memcpy(m.body, body, len);
  backlog_push(m, "a protocol message");
}

// One item of the backlog; true when it is done with.
bool device_impl::run_backlog_item(backlog_item& it) {
  return std::visit([this](auto& work) { return retry_work(work); }, it);
}

bool device_impl::retry_work(backlog_work::post& p) {
  comp_impl* c = comp_of(p.args);
  status_t s;
  try {
    s = post(p.args);
  } catch (const fatal_error&) {  // e.g. the peer died while it waited
    s.error = peer_dead(p.args.rank) ? errorcode_t::error_peer_dead : errorcode_t::error;
    s.rank = p.args.rank;
    s.tag = p.args.tag;
    s.buf = p.args.local_buffer;
    s.size = p.args.size;
    s.user_context = p.args.user_context;
  }
  if (s.error.is_retry()) return false;
  std::free(p.owned);  // sent (an eager send's buffer is reusable once it is out)
  if (c) c->pending.fetch_sub(1, std::memory_order_relaxed);
  if (s.error.is_done()) s.error = errorcode_t::done_backlog;
  if (!s.error.is_posted()) complete(c, s, false);
  return true;
}

bool device_impl::retry_work(backlog_work::signal& g) {
  g.comp->pending.fetch_sub(1, std::memory_order_relaxed);
  if (signal_comp(g.comp, g.status)) return true;
  g.comp->pending.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool device_impl::retry_work(backlog_work::control& m) {
  if (peer_dead(m.rank)) return true;
  return net->try_send_answer(m.rank, &m.header, sizeof(m.header), m.body, m.len);
}

void device_impl::wire_error(int rank, const std::string& what) {
  if (rt.attr.wire_errors_fatal) {
    util::lock_guard<util::spinlock> g(fatal_lock_);
    if (fatal_wire_error_.empty())
      fatal_wire_error_ = "from rank " + std::to_string(rank) + ": " + what;
    has_fatal_wire_error_.store(true, std::memory_order_release);
    return;
  }
  rt.report_wire_error(rank, what);
}

// The periodic check when its time has come (out of line: it reads the clock).
void device_impl::check_if_due() {
  int64_t now = util::coarse_now_ns();
  int64_t due = next_peer_check_ns_.load(std::memory_order_relaxed);
  // One thread claims each check; the others go on.
  if (now >= due && next_peer_check_ns_.compare_exchange_strong(due, now + peer_check_interval_ns,
                                                                std::memory_order_relaxed))
    periodic_check();
}

// A malformed message seen with WEFT_WIRE_ERRORS_FATAL set: reported by this progress call.
void device_impl::raise_wire_error() {
  std::string what;
  {
    util::lock_guard<util::spinlock> g(fatal_lock_);
    what.swap(fatal_wire_error_);
    has_fatal_wire_error_.store(false, std::memory_order_relaxed);
  }
  if (!what.empty())
    util::fail("progress", "incoming message", what, "malformed (WEFT_WIRE_ERRORS_FATAL is set)");
}

error_t device_impl::progress_once() {
  const uint32_t polls = util::next_thread_poll();
  // The empty test inline: drain's frame is large, and an idle poll finds it empty.
  size_t n = backlog.empty()
                 ? 0
                 : backlog.drain([this](backlog_item& it) { return run_backlog_item(it); });
  if (!data_backlog.empty())
    n += data_backlog.drain_in_order(
        [this](backlog_work::rendezvous_put& r) { return retry_work(r); });
  n += net->poll(*this, 32);
  // The periodic check, every 50 ms: looked for at every 16th progress of a thread while
  // operations wait, and at every 1024th otherwise. Each look reads the clock, which at
  // every call was a tenth of a poll's instructions during a stream of large transfers.
  if ((polls & 15) == 0 && ((polls & 1023) == 0 || slab.in_use() || !backlog_empty() ||
                            retried_.load(std::memory_order_relaxed)))
    check_if_due();
  if (has_fatal_wire_error_.load(std::memory_order_acquire)) [[unlikely]]
    raise_wire_error();
  if (n) return errorcode_t::done;
  // Oversubscribed (WEFT_YIELD): what this caller waits for needs another process's turn
  // on the core, so give it now rather than spin out the time slice.
  if (rt.yield_when_idle) give_core_away(polls);
  return errorcode_t::retry;
}

error_t device_impl::progress() {
  progress_scope scope;  // what a completion put off until this call returns runs at its end
  return progress_once();
}

// An active message that its completion object cannot take now (a full queue), or whose
// buffer cannot be had, stays with the backend: the sender sees retry once its queue fills.
bool device_impl::deliver_am(int rank, const wire_header& h, const char* data, size_t size) {
  rcomp_entry* e = rt.rcomp(h.target);
  if (!e || size > eager_limit || !e->comp) {
    refuse_am(rank, h, size);
    return true;
  }
  status_t s;
  const tag_t tag = h.tag();
  // A small message for a completion queue waits in its entry.
  comp_impl* c = e->comp;
  if (size <= cq_inline_max && !e->packet_delivery && c->kind == comp_kind::cq &&
      !e->alloc.allocate) {
    if (!static_cast<cq_impl*>(c)->signal_inline(rank, tag, data, size)) return false;
    counters.add_two(counter_t::received_eager, counter_t::bytes_received, size);
    return true;
  }
  // Lent where it arrived, for the handler's call (register_rcomp made sure of the kind).
  if (e->in_place) {
    store_status(s, errorcode_t::done, rank, tag, const_cast<char*>(data), size, nullptr);
    static_cast<handler_impl*>(c)->signal(s);
    counters.add_two(counter_t::received_eager, counter_t::bytes_received, size);
    return true;
  }
  void* buf = nullptr;
  const bool packet = e->packet_delivery && size <= pool->packet_size();
  if (packet) buf = pool->get();
  if (!buf) buf = e->allocate(size);
  if (!buf) return false;
  util::small_copy(buf, data, size);
  store_status(s, errorcode_t::done, rank, tag, buf, size, nullptr);
  if (signal_comp(c, s)) {
    counters.add_two(counter_t::received_eager, counter_t::bytes_received, size);
    return true;
  }
  if (packet && pool->owns(buf))
    pool->put(buf);
  else
    e->deallocate(buf);
  return false;
}

// False leaves the message with the backend (back-pressure; see net::sink): nothing is
// done before the answer is known.
bool device_impl::on_message(int rank, const void* data, size_t len) {
  // Eager messages first, with nothing else in this frame: the rest (control messages and
  // every error report) is out of line, so the common path saves no registers for it.
  const char* p = static_cast<const char*>(data);
  if (len >= sizeof(wire_header)) {
    wire_header h;
    memcpy(&h, p, sizeof(h));
    if (h.version == wire_version) {
      if (h.type == uint8_t(msg_type::eager_am))
        return deliver_am(rank, h, p + sizeof(h), len - sizeof(h));
      if (h.type == uint8_t(msg_type::eager_send))
        return arrive_send(rank, h, p + sizeof(h), len - sizeof(h));
    }
  }
  return on_other_message(rank, p, len);
}

// Control messages are always taken: each answers an operation of ours that holds a
// request, so they need nothing new. A ready-to-send may wait for a request.
bool device_impl::on_other_message(int rank, const char* p, size_t len) {
  if (len < sizeof(wire_header)) {
    wire_error(rank, "truncated message of " + std::to_string(len) + " bytes (a header has " +
                         std::to_string(sizeof(wire_header)) + ")");
    return true;
  }
  wire_header h;
  memcpy(&h, p, sizeof(h));
  if (h.version != wire_version) {
    wire_error(rank, "wire version " + std::to_string(h.version) + ", this rank speaks " +
                         std::to_string(wire_version));
    return true;
  }
  const char* body = p + sizeof(h);
  const size_t blen = len - sizeof(h);
  auto need = [&](size_t n) {
    if (blen == n) return true;
    wire_error(rank, std::string(type_name(h.type)) + " with a body of " + std::to_string(blen) +
                         " bytes, expected " + std::to_string(n));
    return false;
  };
  switch (msg_type(h.type)) {
    case msg_type::eager_am:
    case msg_type::eager_send: break;  // on_message's own path: not sent here
    case msg_type::rts_send:
    case msg_type::rts_am: {
      if (!need(sizeof(rts_body))) return true;
      rts_body b;
      memcpy(&b, body, sizeof(b));
      return arrive_rts(rank, h, b);
    }
    case msg_type::cts: {
      if (!need(sizeof(cts_body))) return true;
      cts_body b;
      memcpy(&b, body, sizeof(b));
      arrive_cts(rank, b);
      return true;
    }
    case msg_type::nack: {
      if (!need(sizeof(nack_body))) return true;
      nack_body b;
      memcpy(&b, body, sizeof(b));
      arrive_nack(rank, b);
      return true;
    }
  }
  wire_error(rank, "unknown message type " + std::to_string(h.type));
  return true;
}

void device_impl::refuse_am(int rank, const wire_header& h, size_t size) {
  const rcomp_entry* e = rt.rcomp(h.target);
  if (!e || !e->comp)
    wire_error(rank, "active message for unknown remote completion " + std::to_string(h.target));
  else
    wire_error(rank, "eager active message of " + std::to_string(size) +
                         " bytes exceeds the eager limit " + std::to_string(eager_limit));
}

bool device_impl::arrive_send(int rank, const wire_header& h, const char* data, size_t size) {
  matching_engine_impl* e = rt.engine(h.target);
  if (!e || h.policy > uint8_t(matching_policy_t::rank_tag)) {
    wire_error(rank, "send for unknown matching engine " + std::to_string(h.target) +
                         " or policy " + std::to_string(h.policy));
    return true;
  }
  if (size > eager_limit) {
    wire_error(rank, "eager send of " + std::to_string(size) + " bytes exceeds the eager limit " +
                         std::to_string(eager_limit));
    return true;
  }
  const auto policy = matching_policy_t(h.policy);
  const match_key key = e->make_key(rank, h.tag(), policy);
  const uint8_t pol = e->stored_policy(policy);
  if (auto* r = static_cast<request*>(e->take(key, pol, entry_type::recv))) {
    counters.add_two(counter_t::received_eager, counter_t::bytes_received, size);
    size_t n = std::min(r->size, size);
    if (n) memcpy(r->buf, data, n);
    status_t s;
    store_status(s, size > r->size ? errorcode_t::error_truncated : errorcode_t::done, rank,
                 h.tag(), r->buf, n, r->user_context);
    comp_impl* c = r->comp;
    bool counted = r->counted;
    r->dev->slab.free(r);
    complete(c, s, counted);
    return true;
  }
  // Unexpected: kept in a request and a buffer, or, when neither can be had, left with
  // the backend until a receive frees a request. The barrier's messages may use the
  // requests kept for Weft's own traffic.
  request* u = h.target == internal_engine_id ? slab.alloc(this) : slab.alloc_user(this);
  if (!u) return false;
  u->key = key;
  u->policy = pol;
  u->type = entry_type::send;
  u->rank = rank;
  u->tag = h.tag();
  u->msg_size = size;
  u->counted = false;
  u->pool = size <= pool->packet_size() ? pool : nullptr;
  u->buf = u->pool ? pool->get() : nullptr;
  if (!u->buf) {
    u->pool = nullptr;
    u->buf = std::malloc(size ? size : 1);
  }
  if (!u->buf) {
    slab.free(u);
    return false;
  }
  if (size) memcpy(u->buf, data, size);
  u->publish(req_kind::unexpected_eager);
  counters.add_two(counter_t::received_eager, counter_t::bytes_received, size);
  counters.add(counter_t::unexpected);
  if (auto* r = static_cast<request*>(e->insert(u))) r->dev->match_posted(r, u);
  return true;
}

// A send met a receive posted earlier (found by the matching engine's insert).
void device_impl::match_posted(request* r, request* u) {
  recv_side recv{r->buf, r->size, r->comp, r->user_context, r->counted};
  r->dev->slab.free(r);
  match_arrived(recv, u, nullptr);
}

// Why an access that the backend reports failed, failed: the peer is gone, or (alive) the
// region was refused.
errorcode_t device_impl::failure_with(int rank) {
  return peer_dead(rank) || !net->peer_alive(rank) ? errorcode_t::error_peer_dead
                                                   : errorcode_t::error_region;
}

void device_impl::on_put_local_done(void* ctx, bool ok) {
  const uint64_t h = uint64_t(reinterpret_cast<uintptr_t>(ctx));
  // Claimed, since fail_peer may be failing it on another thread; else it failed meanwhile
  // (dead peer).
  if (request* s = slab.lookup(h, req_kind::rdv_send)) {
    if (!s->claim(req_kind::rdv_send)) return;
    finish_request(s, ok ? errorcode_t::done
                      : peer_dead(s->rank) || !net->peer_alive(s->rank)
                          ? errorcode_t::error_peer_dead
                          : errorcode_t::error);
  } else if (request* r = slab.lookup(h, req_kind::rma)) {
    finish_rma(r, ok);
  }
}

void device_impl::on_get_done(void* ctx, bool ok) {
  if (request* r = slab.lookup(uint64_t(reinterpret_cast<uintptr_t>(ctx)), req_kind::rma))
    finish_rma(r, ok);
}

// Done only while the peer lives: one taken for dead has had its operations fail.
void device_impl::finish_rma(request* r, bool ok) {
  if (!r->claim(req_kind::rma)) return;  // failed meanwhile (dead peer)
  finish_request(r, ok && !peer_dead(r->rank) ? errorcode_t::done : failure_with(r->rank));
}

// A user put's or get's notification for a completion object that cannot take it now
// stays with the backend, as an active message does.
bool device_impl::on_remote_notify(int rank, const void* data, size_t len) {
  const uint8_t type = len ? *static_cast<const uint8_t*>(data) : 0;
  if (type == uint8_t(note_type::rendezvous) && len == sizeof(rendezvous_note)) {
    rendezvous_note n;
    memcpy(&n, data, sizeof(n));
    rendezvous_arrived(rank, n);
    return true;
  }
  if ((type == uint8_t(note_type::put) || type == uint8_t(note_type::get)) &&
      len == sizeof(rma_note)) {
    rma_note n;
    memcpy(&n, data, sizeof(n));
    rcomp_entry* e = rt.rcomp(n.rcomp);
    if (!e) {
      wire_error(rank, std::string(type == uint8_t(note_type::put) ? "put" : "get") +
                           " notification for unknown remote completion " +
                           std::to_string(n.rcomp));
      return true;
    }
    status_t s;
    store_status(s, errorcode_t::done, rank, n.tag(), reinterpret_cast<void*>(n.addr), n.size,
                 nullptr);
    return !e->comp || signal_comp(e->comp, s);
  }
  wire_error(rank, "malformed notification of type " + std::to_string(type) + " and length " +
                       std::to_string(len));
  return true;
}

void device_impl::finish_request(request* q, errorcode_t code) {
  status_t st;
  store_status(st, code, q->rank, q->tag, q->buf, q->size, q->user_context);
  // An active message that failed half-way (its sender died, or refused it) reaches its
  // queue as an error with no buffer: what had arrived is freed here, since a program that
  // frees the buffers of the messages it takes would not expect one with an error.
  if (q->am_receive() && st.error.is_error()) {
    q->am_target->deallocate(st.buf);
    st.buf = nullptr;
  }
  comp_impl* c = q->comp;
  bool counted = q->counted;
  // A rendezvous active message lent to its handler: the buffer is Weft's again after it.
  const rcomp_entry* lent = q->am_receive() && q->am_target->in_place ? q->am_target : nullptr;
  q->dev->slab.free(q);
  complete(c, st, counted);
  if (lent && st.buf) lent->deallocate(st.buf);
}

// Peers that died (or, on the network, were silent too long or expelled this rank), what a
// dead peer left half done in the backend, and the launcher.
void device_impl::periodic_check() {
  // Peers are checked while something waits on them (an operation, or a caller retrying),
  // or when the backend has news: an idle device would otherwise warn about every peer
  // that finished before it.
  const bool retried = retried_.load(std::memory_order_relaxed) && retried_.exchange(false);
  if (slab.in_use() || !backlog_empty() || retried || net->peers_changed()) check_peers();
  net->repair();
  if (!rt.boot->launcher_alive())
    util::fail("progress", "launcher", rt.boot->name(),
               "the launcher has died (its connection to this rank closed): this rank is an "
               "orphan and cannot finish; exit");
}

void device_impl::check_peers() {
  for (int r = 0; r < rt.size(); ++r) check_peer(r);
}

bool device_impl::check_peer(int r) {
  if (r == rt.rank()) return true;
  if (peer_dead(r)) return false;
  if (net->peer_alive(r)) return true;
  // Progress's periodic check and test_peer may find the same peer gone at once: the one
  // that claims it fails it (no lock: failing runs completions, which may call back in).
  if (gone_claimed_[size_t(r)].exchange(true)) return false;
  // What the peer sent before it was seen gone is in our queues now: deliver it first,
  // so only operations that can no longer complete fail. Again for every peer found
  // gone, since one that exits while this scan runs has its last messages queued only
  // after an earlier drain (64 ranks leaving a barrier at once failed that way). Bounded,
  // since transfers with the dead peer count as activity but never finish.
  for (int i = 0; i < 256 && net->poll(*this, 1024) > 0; ++i) {
  }
  if (!peer_dead(r)) fail_peer(r);
  return false;
}

// Every operation waiting on `rank` ends with error_peer_dead.
void device_impl::fail_peer(int rank) {
  // Sequentially consistent, as publish_receive's: a receive from `rank` published after
  // the scan below passed it sees the peer dead.
  dead_[size_t(rank)].store(true, std::memory_order_seq_cst);
  counters.add(counter_t::peers_dead);
  WEFT_LOG(warn, "rank %d is gone (%s); failing the operations that wait on it", rank,
           net->why_gone(rank).c_str());
  net->forget_peer(rank);
  for (uint32_t i = 0; i < slab.capacity() && slab.in_use(); ++i) {
    request& q = slab.at(i);
    const req_kind k = q.kind_.load(std::memory_order_seq_cst);
    // Claimed: its completion may be running on another thread.
    if ((k == req_kind::rdv_recv || k == req_kind::rdv_send ||
         (k == req_kind::rma && !net->settles_accesses(rank))) &&
        q.rank == rank && q.claim(k))
      fail_request(&q, rank);
  }
  for (uint32_t id = 0; id < rt.engine_count(); ++id) {
    matching_engine_impl* e = rt.engine(id);
    if (!e) continue;
    // Only the receives posted through this device: another device may still hold, undrained
    // in its own queues, the message a receive of its waits for (a rank's last report on
    // the default device, while a dedicated device saw it gone first: soak.shm_kill lost
    // it). That device fails its receives when it sees the peer gone, after its drain.
    auto mine = [](const match_entry* m, const void* dev) {
      return static_cast<const request*>(m)->dev == dev;
    };
    for (match_entry* m : e->remove_recvs_from(rank, mine, this))
      fail_request(static_cast<request*>(m), rank);
  }
}

// One operation that waited on dead `rank` (claimed, or taken out of a matching engine)
// ends with error_peer_dead; an active message whose data never came is dropped: nobody
// waits for it.
void device_impl::fail_request(request* q, int rank) {
  if (q->am_receive()) {
    if (q->counted) q->comp->pending.fetch_sub(1, std::memory_order_relaxed);
    q->am_target->deallocate(q->buf);
    q->dev->slab.free(q);
    return;
  }
  q->rank = rank;
  finish_request(q, errorcode_t::error_peer_dead);
}

}  // namespace weft::impl
