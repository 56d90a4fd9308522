// The progress engine (LCI paper Figure 1): retry the backlog, poll the backend, match
// arrivals, signal completion objects, continue rendezvous transfers, and turn the
// operations waiting on a dead peer into errors.
#include <time.h>

#include <cstdlib>
#include <cstring>

#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/small_copy.hpp"

namespace weft::detail {
namespace {

int64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

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

device_impl::device_impl(runtime_impl& r, int idx, packet_pool_impl* p, size_t inbox_depth)
    : rt(r),
      index(idx),
      inbox_depth(inbox_depth),
      pool(p),
      slab(uint32_t(r.attr.max_requests)),
      eager_limit(r.attr.eager_size),
      dead_(new std::atomic<bool>[size_t(r.size())]) {
  for (int i = 0; i < r.size(); ++i) dead_[size_t(i)].store(false);
  net::device_config cfg{r.attr.packet_size, inbox_depth};
  net = r.net->alloc_device(idx, cfg);
}

device_impl::~device_impl() {
  // Unexpected messages nobody received: release their buffers.
  for (uint32_t i = 0; i < slab.capacity() && slab.in_use(); ++i) {
    request& q = slab.at(i);
    if (q.kind() == req_kind::unexpected_eager) {
      if (q.pool)
        q.pool->put(q.buf);
      else
        std::free(q.buf);
    }
  }
}

size_t device_impl::pending_operations() {
  size_t n = backlog.size();
  if (!slab.in_use()) return n;
  for (uint32_t i = 0; i < slab.capacity(); ++i) {
    req_kind k = slab.at(i).kind();
    if (k == req_kind::posted_recv || k == req_kind::rdv_send || k == req_kind::rdv_recv ||
        k == req_kind::rma)
      ++n;
  }
  return n;
}

void device_impl::defer_signal(comp_impl* c, const status_t& s) {
  c->pending.fetch_add(1, std::memory_order_relaxed);
  backlog.push([c, s]() {
    c->pending.fetch_sub(1, std::memory_order_relaxed);
    if (signal_comp(c, s)) return true;
    c->pending.fetch_add(1, std::memory_order_relaxed);
    return false;
  });
}

void device_impl::send_control(int rank, const wire_header& h, const void* body, size_t len) {
  if (net->try_send(rank, &h, sizeof(h), body, len)) return;
  struct msg {
    wire_header h;
    char body[48];
  } m{h, {}};
  memcpy(m.body, body, len);
  backlog.push([this, rank, m, len]() {
    if (peer_dead(rank)) return true;
    return net->try_send(rank, &m.h, sizeof(m.h), m.body, len);
  });
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

error_t device_impl::progress() {
  size_t n = backlog.drain();
  n += net->poll(*this, 32);
  if (slab.in_use() || !backlog.empty()) {
    int64_t now = coarse_now_ns();
    int64_t due = next_peer_check_ns_.load(std::memory_order_relaxed);
    // One thread claims each check; the others go on.
    if (now >= due && next_peer_check_ns_.compare_exchange_strong(due, now + peer_check_interval_ns,
                                                                  std::memory_order_relaxed))
      check_peers();
  }
  if (has_fatal_wire_error_.load(std::memory_order_acquire)) {
    std::string what;
    {
      util::lock_guard<util::spinlock> g(fatal_lock_);
      what.swap(fatal_wire_error_);
      has_fatal_wire_error_.store(false, std::memory_order_relaxed);
    }
    if (!what.empty())
      util::fail("progress", "incoming message", what, "malformed (WEFT_WIRE_ERRORS_FATAL is set)");
  }
  return n ? errorcode_t::done : errorcode_t::retry;
}

void device_impl::on_message(int rank, const void* data, size_t len) {
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
  on_other_message(rank, p, len);
}

void device_impl::on_other_message(int rank, const char* p, size_t len) {
  if (len < sizeof(wire_header)) {
    wire_error(rank, "truncated message of " + std::to_string(len) + " bytes (a header has " +
                         std::to_string(sizeof(wire_header)) + ")");
    return;
  }
  wire_header h;
  memcpy(&h, p, sizeof(h));
  if (h.version != wire_version) {
    wire_error(rank, "wire version " + std::to_string(h.version) + ", this rank speaks " +
                         std::to_string(wire_version));
    return;
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
      if (!need(sizeof(rts_body))) return;
      rts_body b;
      memcpy(&b, body, sizeof(b));
      arrive_rts(rank, h, b);
      return;
    }
    case msg_type::cts: {
      if (!need(sizeof(cts_body))) return;
      cts_body b;
      memcpy(&b, body, sizeof(b));
      request* s = slab.lookup(b.sreq, req_kind::rdv_send);
      if (!s || s->rank != rank) {
        wire_error(rank, "clear-to-send for unknown send request " + std::to_string(b.sreq));
        return;
      }
      if (b.accept > s->size) {
        wire_error(rank, "clear-to-send accepts " + std::to_string(b.accept) + " bytes of a " +
                             std::to_string(s->size) + "-byte message");
        return;
      }
      uint64_t sh = b.sreq, rreq = b.rreq, raddr = b.raddr;
      size_t accept = b.accept;
      void* ctx = reinterpret_cast<void*>(uintptr_t(sh));
      rendezvous_note note{uint8_t(note_type::rendezvous), {}, rreq};
      if (!net->try_put(rank, s->buf, accept, raddr, {}, &note, sizeof(note), ctx)) {
        backlog.push([this, rank, sh, note, raddr, accept, ctx]() {
          request* q = slab.lookup(sh, req_kind::rdv_send);
          if (!q) return true;  // failed meanwhile (dead peer)
          return net->try_put(rank, q->buf, accept, raddr, {}, &note, sizeof(note), ctx);
        });
      }
      return;
    }
    case msg_type::nack: {
      if (!need(sizeof(nack_body))) return;
      nack_body b;
      memcpy(&b, body, sizeof(b));
      request* s = slab.lookup(b.sreq, req_kind::rdv_send);
      if (!s || s->rank != rank || b.errorcode < uint32_t(errorcode_t::error)) {
        wire_error(rank, "refusal for unknown send request " + std::to_string(b.sreq));
        return;
      }
      finish_request(s, errorcode_t(b.errorcode));
      return;
    }
  }
  wire_error(rank, "unknown message type " + std::to_string(h.type));
}

void device_impl::refuse_am(int rank, const wire_header& h, size_t size) {
  if (!rt.rcomp(h.target))
    wire_error(rank, "active message for unknown remote completion " + std::to_string(h.target));
  else if (size > eager_limit)
    wire_error(rank, "eager active message of " + std::to_string(size) +
                         " bytes exceeds the eager limit " + std::to_string(eager_limit));
  else
    wire_error(rank, "out of memory for an active message of " + std::to_string(size) + " bytes");
}

void device_impl::deliver_am(int rank, const wire_header& h, const char* data, size_t size) {
  rcomp_entry* e = rt.rcomp(h.target);
  if (!e || size > eager_limit) return refuse_am(rank, h, size);
  status_t s;
  s.error = errorcode_t::done;
  s.rank = rank;
  s.tag = h.tag;
  s.size = size;
  // A small message for a completion queue waits in its entry; a full queue takes the
  // malloc path below, whose status the backlog can hold.
  if (size <= cq_inline_max && !e->packet_delivery && e->comp && e->comp->kind == comp_kind::cq &&
      static_cast<cq_impl*>(e->comp)->signal_inline(s, data, size))
    return;
  void* buf = nullptr;
  if (e->packet_delivery && size <= pool->packet_size()) buf = pool->get();
  if (!buf) buf = std::malloc(size ? size : 1);
  if (!buf) return refuse_am(rank, h, size);
  util::small_copy(buf, data, size);
  s.buf = buf;
  complete(e->comp, s, false);
}

void device_impl::arrive_send(int rank, const wire_header& h, const char* data, size_t size) {
  matching_engine_impl* e = rt.engine(h.target);
  if (!e || h.policy > uint8_t(matching_policy_t::rank_tag)) {
    wire_error(rank, "send for unknown matching engine " + std::to_string(h.target) +
                         " or policy " + std::to_string(h.policy));
    return;
  }
  if (size > eager_limit) {
    wire_error(rank, "eager send of " + std::to_string(size) + " bytes exceeds the eager limit " +
                         std::to_string(eager_limit));
    return;
  }
  const auto policy = matching_policy_t(h.policy);
  const uint64_t key = e->make_key(rank, h.tag, policy);
  const uint8_t pol = e->stored_policy(policy);
  if (auto* r = static_cast<request*>(e->take(key, pol, entry_type::recv))) {
    size_t n = std::min(r->size, size);
    if (n) memcpy(r->buf, data, n);
    status_t s;
    s.error = size > r->size ? errorcode_t::error_truncated : errorcode_t::done;
    s.rank = rank;
    s.tag = h.tag;
    s.buf = r->buf;
    s.size = n;
    s.user_context = r->user_context;
    comp_impl* c = r->comp;
    bool counted = r->counted;
    r->dev->slab.free(r);
    complete(c, s, counted);
    return;
  }
  request* u = slab.alloc(this);
  if (!u) {
    wire_error(rank, "no request left to hold an unexpected send (WEFT_MAX_REQUESTS)");
    return;
  }
  u->key = key;
  u->policy = pol;
  u->type = entry_type::send;
  u->rank = rank;
  u->tag = h.tag;
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
    wire_error(rank, "out of memory for an unexpected send of " + std::to_string(size) + " bytes");
    return;
  }
  if (size) memcpy(u->buf, data, size);
  u->publish(req_kind::unexpected_eager);
  if (auto* r = static_cast<request*>(e->insert(u))) r->dev->match_arrived(r, u, nullptr);
}

void device_impl::arrive_rts(int rank, const wire_header& h, const rts_body& b) {
  auto refuse = [&](errorcode_t code, const std::string& why) {
    wire_error(rank, why);
    wire_header n{};
    n.version = wire_version;
    n.type = uint8_t(msg_type::nack);
    nack_body nb{b.sreq, uint32_t(code), 0};
    send_control(rank, n, &nb, sizeof(nb));
  };
  if (b.size > max_msg_size) {
    refuse(errorcode_t::error,
           "rendezvous of " + std::to_string(b.size) + " bytes is over the limit");
    return;
  }
  if (msg_type(h.type) == msg_type::rts_am) {
    rcomp_entry* e = rt.rcomp(h.target);
    if (!e) {
      refuse(errorcode_t::error,
             "active message for unknown remote completion " + std::to_string(h.target));
      return;
    }
    void* buf = std::malloc(b.size);
    request* r = buf ? slab.alloc(this) : nullptr;
    if (!r) {
      std::free(buf);
      refuse(errorcode_t::error_nomem, "cannot take a rendezvous active message of " +
                                           std::to_string(b.size) + " bytes (out of memory)");
      return;
    }
    r->is_am = true;
    r->rank = rank;
    r->tag = h.tag;
    r->buf = buf;
    r->size = b.size;
    r->msg_size = b.size;
    r->comp = e->comp;
    r->user_context = nullptr;
    r->counted = false;
    r->peer_req = b.sreq;
    wire_header c{};
    c.version = wire_version;
    c.type = uint8_t(msg_type::cts);
    cts_body cb{b.sreq, slab.handle(r), reinterpret_cast<uint64_t>(buf), b.size};
    r->publish(req_kind::rdv_recv);  // last touch before the clear-to-send goes out
    send_control(rank, c, &cb, sizeof(cb));
    return;
  }
  matching_engine_impl* e = rt.engine(h.target);
  if (!e || h.policy > uint8_t(matching_policy_t::rank_tag)) {
    refuse(errorcode_t::error, "send for unknown matching engine " + std::to_string(h.target));
    return;
  }
  const auto policy = matching_policy_t(h.policy);
  request* u = slab.alloc(this);
  if (!u) {
    refuse(errorcode_t::error_nomem, "no request left for a rendezvous send (WEFT_MAX_REQUESTS)");
    return;
  }
  u->key = e->make_key(rank, h.tag, policy);
  u->policy = e->stored_policy(policy);
  u->type = entry_type::send;
  u->rank = rank;
  u->tag = h.tag;
  u->msg_size = b.size;
  u->peer_req = b.sreq;
  u->counted = false;
  u->publish(req_kind::unexpected_rts);
  if (auto* r = static_cast<request*>(e->insert(u))) r->dev->match_arrived(r, u, nullptr);
}

void device_impl::on_put_local_done(void* ctx, bool ok) {
  const uint64_t h = uint64_t(reinterpret_cast<uintptr_t>(ctx));
  if (request* s = slab.lookup(h, req_kind::rdv_send))
    finish_request(s, ok ? errorcode_t::done : errorcode_t::error);
  else if (request* r = slab.lookup(h, req_kind::rma))
    finish_request(r, ok ? errorcode_t::done : errorcode_t::error_region);
  // else it failed meanwhile (dead peer)
}

void device_impl::on_get_done(void* ctx, bool ok) {
  if (request* r = slab.lookup(uint64_t(reinterpret_cast<uintptr_t>(ctx)), req_kind::rma))
    finish_request(r, ok ? errorcode_t::done : errorcode_t::error_region);
}

void device_impl::on_remote_notify(int rank, const void* data, size_t len) {
  const uint8_t type = len ? *static_cast<const uint8_t*>(data) : 0;
  if (type == uint8_t(note_type::rendezvous) && len == sizeof(rendezvous_note)) {
    rendezvous_note n;
    memcpy(&n, data, sizeof(n));
    request* r = slab.lookup(n.rreq, req_kind::rdv_recv);
    if (!r || r->rank != rank) {
      wire_error(rank, "data for unknown receive request " + std::to_string(n.rreq));
      return;
    }
    finish_request(r, r->msg_size > r->size ? errorcode_t::error_truncated : errorcode_t::done);
    return;
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
      return;
    }
    status_t s;
    s.error = errorcode_t::done;
    s.rank = rank;
    s.tag = n.tag;
    s.buf = reinterpret_cast<void*>(n.addr);
    s.size = n.size;
    complete(e->comp, s, false);
    return;
  }
  wire_error(rank, "malformed notification of type " + std::to_string(type) + " and length " +
                       std::to_string(len));
}

void device_impl::finish_request(request* q, errorcode_t code) {
  status_t st;
  st.error = code;
  st.rank = q->rank;
  st.tag = q->tag;
  st.buf = q->buf;
  st.size = q->size;
  st.user_context = q->user_context;
  comp_impl* c = q->comp;
  bool counted = q->counted;
  q->dev->slab.free(q);
  complete(c, st, counted);
}

void device_impl::check_peers() {
  bool drained = false;
  for (int r = 0; r < rt.size(); ++r) {
    if (r == rt.rank() || peer_dead(r)) continue;
    if (net->peer_alive(r)) continue;
    // What the peer sent before it died is still in our queue: deliver it first, so only
    // operations that can no longer complete fail. Bounded, since transfers from the dead
    // peer count as activity but never finish.
    for (int i = 0; !drained && i < 64 && net->poll(*this, 1024) > 0; ++i) {
    }
    drained = true;
    if (!peer_dead(r)) fail_peer(r);
  }
}

// Every operation waiting on `rank` ends with error_peer_dead.
void device_impl::fail_peer(int rank) {
  dead_[size_t(rank)].store(true, std::memory_order_relaxed);
  WEFT_LOG(warn, "rank %d is gone (%s); failing the operations that wait on it", rank,
           net->why_gone(rank).c_str());
  net->forget_peer(rank);
  auto fail = [&](request* q) {
    if (q->is_am && q->kind() == req_kind::rdv_recv) {
      // An active message that never arrived: nobody waits for it, drop its buffer.
      std::free(q->buf);
      q->dev->slab.free(q);
      return;
    }
    q->rank = rank;
    finish_request(q, errorcode_t::error_peer_dead);
  };
  for (uint32_t i = 0; i < slab.capacity() && slab.in_use(); ++i) {
    request& q = slab.at(i);
    const req_kind k = q.kind();
    if ((k == req_kind::rdv_send || k == req_kind::rdv_recv || k == req_kind::rma) &&
        q.rank == rank)
      fail(&q);
  }
  for (uint32_t id = 0; id < rt.engine_count(); ++id) {
    matching_engine_impl* e = rt.engine(id);
    if (!e) continue;
    for (match_entry* m : e->remove_recvs_from(rank)) fail(static_cast<request*>(m));
  }
}

}  // namespace weft::detail
