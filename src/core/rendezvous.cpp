// SPDX-License-Identifier: BSD-3-Clause
// The rendezvous protocol, whole: a message above the eager size goes as a ready-to-send
// (RTS) naming its size and the sender's request; the receiver, once a receive matches
// (or at once for an active message, into a buffer it allocates), answers clear-to-send
// (CTS) with the address to write; the sender writes the data there with a note naming
// the receive request, and both ends complete when the backend says the write is done.
// A refusal (NACK) fails the send with the receiver's error code.
#include <cstdlib>
#include <cstring>

#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"
#include "match/matching_engine.hpp"
#include "util/log.hpp"
#include "util/tsan.hpp"

namespace weft::impl {

status_t device_impl::post_rendezvous(const comm_args& a, const wire_header& h) {
  if (!a.internal && backlog_over()) return retry_or_backlog(a, errorcode_t::retry_backlog);
  request* r = alloc_outgoing(a, h.type == uint8_t(msg_type::rts_am));
  if (!r) return retry_or_backlog(a, errorcode_t::retry_nomem);
  comp_impl* c = r->comp;
  rts_body b{a.size, slab.handle(r)};
  if (c) c->pending.fetch_add(1, std::memory_order_relaxed);
  // Published last: once the ready-to-send is out, another thread may finish and reuse r.
  // Over shared memory the data may go at once, ahead of the clear-to-send; else (no
  // channel, too much data ahead that nobody has received yet, another mechanism) the
  // classic way.
  // A false from publish_out or take_back: the peer's death claimed r meanwhile, and its
  // failure is on the way to the completion object (the post counts as posted).
  r->sent_ahead = true;
  if (!publish_out(r, req_kind::rdv_send, a)) return immediate(a, errorcode_t::posted);
  if (net->try_send_ahead(a.rank, &h, sizeof(h), &b, sizeof(b), a.local_buffer, a.size,
                          reinterpret_cast<void*>(uintptr_t(b.sreq)))) {
    counters.add_two(counter_t::sent_rendezvous, counter_t::bytes_sent, a.size);
    counters.add(counter_t::sent_ahead);
    return immediate(a, errorcode_t::posted);
  }
  if (!r->claim(req_kind::rdv_send)) return immediate(a, errorcode_t::posted);
  r->sent_ahead = false;
  if (!publish_out(r, req_kind::rdv_send, a)) return immediate(a, errorcode_t::posted);
  if (!net->try_send(a.rank, &h, sizeof(h), &b, sizeof(b))) {
    if (!take_back(r, req_kind::rdv_send)) return immediate(a, errorcode_t::posted);
    return retry_or_backlog(a, errorcode_t::retry_nomem);
  }
  counters.add_two(counter_t::sent_rendezvous, counter_t::bytes_sent, a.size);
  return immediate(a, errorcode_t::posted);
}

// Tells `rank` that its rendezvous send `sreq` fails with `code` (the refusal message).
void device_impl::send_refusal(int rank, uint64_t sreq, errorcode_t code) {
  wire_header n{};
  n.version = wire_version;
  n.type = uint8_t(msg_type::nack);
  nack_body nb{sreq, uint32_t(code), 0};
  send_control(rank, n, &nb, sizeof(nb));
}

// A ready-to-send whose data the backend moves already (sent ahead, over shared memory).
bool device_impl::on_ahead(int rank, uint32_t id, const void* data, size_t len) {
  wire_header h;
  rts_body b;
  if (len == sizeof(h) + sizeof(b)) {
    memcpy(&h, data, sizeof(h));
    memcpy(&b, static_cast<const char*>(data) + sizeof(h), sizeof(b));
    if (h.version == wire_version &&
        (h.type == uint8_t(msg_type::rts_send) || h.type == uint8_t(msg_type::rts_am)))
      return arrive_rts(rank, h, b, id);
  }
  net->refuse_ahead(rank, id);
  wire_error(rank, "data sent ahead with a message of " + std::to_string(len) +
                       " bytes that is not a ready-to-send");
  return true;
}

void device_impl::take_ahead(request* r, uint32_t id) {
  const int rank = r->rank;
  const uint64_t sreq = r->peer_req;
  void* buf = r->buf;
  const size_t size = r->msg_size, keep = r->size;
  rendezvous_note note{uint8_t(note_type::rendezvous), {}, slab.handle(r)};
  if (!publish_receive(r, rank)) return;  // before the data can complete it
  WEFT_TSAN_RELEASE(buf);
  if (net->accept_ahead(rank, id, buf, size, keep, &note, sizeof(note))) {
    counters.add(counter_t::received_ahead);
    return;
  }
  // The source died meanwhile: the receive fails with it (fail_peer), as one whose
  // clear-to-send went to a dead peer does.
  if (peer_dead(rank) || !net->peer_alive(rank)) {
    WEFT_LOG(warn, "rank %d: data sent ahead by rank %d is gone before its receive took it",
             rt.rank(), rank);
    return;
  }
  // Alive, and its data ahead disagrees with its ready-to-send (the backend refused it):
  // both ends fail, the sender through the refusal message.
  wire_error(rank, "data sent ahead of " + std::to_string(size) +
                       " bytes that its backend announced otherwise: refused");
  send_refusal(rank, sreq, errorcode_t::error);
  if (r->claim(req_kind::rdv_recv)) finish_request(r, errorcode_t::error);
}

// Publishes `r` as a receive from `rank`; false when that peer is dead, and then r fails
// here, at once, since its data can never come. A peer found dead meanwhile may have had
// its operations failed before r was published (a receive that matched its unexpected
// ready-to-send, or one arriving as it died). Both stores and both loads here and in
// fail_peer are sequentially consistent: either its scan finds r, or this sees the peer
// dead (or both, and the claim lets one of them finish r).
bool device_impl::publish_receive(request* r, int rank) {
  r->kind_.store(req_kind::rdv_recv, std::memory_order_seq_cst);
  if (!dead_[size_t(rank)].load(std::memory_order_seq_cst)) return true;
  if (r->claim(req_kind::rdv_recv)) fail_request(r, rank);
  return false;
}

bool device_impl::arrive_rts(int rank, const wire_header& h, const rts_body& b, uint32_t id) {
  auto refuse = [&](errorcode_t code, const std::string& why) {
    // The data ahead first: the refusal message, which stops it at the source, after.
    if (id != no_ahead) net->refuse_ahead(rank, id);
    wire_error(rank, why);
    send_refusal(rank, b.sreq, code);
  };
  if (b.size > max_msg_size) {
    refuse(errorcode_t::error,
           "rendezvous of " + std::to_string(b.size) + " bytes is over the limit");
    return true;
  }
  // No request left: the ready-to-send waits with the backend until one is free.
  if (msg_type(h.type) == msg_type::rts_am) {
    rcomp_entry* e = rt.rcomp(h.target);
    if (!e) {
      refuse(errorcode_t::error,
             "active message for unknown remote completion " + std::to_string(h.target));
      return true;
    }
    request* r = slab.alloc_user(this);
    if (!r) return false;
    // The buffer can be any size: when it cannot be had, the sender learns at once.
    void* buf = e->allocate(b.size);
    if (!buf) {
      slab.free(r);
      refuse(errorcode_t::error_nomem, "cannot take a rendezvous active message of " +
                                           std::to_string(b.size) + " bytes (out of memory)");
      return true;
    }
    r->is_am = true;
    r->am_target = e;
    r->rank = rank;
    r->tag = h.tag();
    r->buf = buf;
    r->size = b.size;
    r->msg_size = b.size;
    r->comp = e->comp;
    r->user_context = nullptr;
    // Counted on the completion object, as a local operation is: free_comp refuses to free
    // it while the message is on its way.
    r->counted = r->comp != nullptr;
    if (r->counted) r->comp->pending.fetch_add(1, std::memory_order_relaxed);
    r->peer_req = b.sreq;
    r->ahead = id;
    if (id != no_ahead) {
      take_ahead(r, id);
      return true;
    }
    wire_header c{};
    c.version = wire_version;
    c.type = uint8_t(msg_type::cts);
    cts_body cb{b.sreq, slab.handle(r), reinterpret_cast<uint64_t>(buf), b.size};
    // Last touch before the clear-to-send goes out.
    if (!publish_receive(r, rank)) return true;
    WEFT_TSAN_RELEASE(buf);
    send_control(rank, c, &cb, sizeof(cb));
    counters.add(counter_t::handshakes);
    return true;
  }
  matching_engine_impl* e = rt.engine(h.target);
  if (!e || h.policy > uint8_t(matching_policy_t::rank_tag)) {
    refuse(errorcode_t::error, "send for unknown matching engine " + std::to_string(h.target));
    return true;
  }
  const auto policy = matching_policy_t(h.policy);
  request* u = slab.alloc_user(this);
  if (!u) return false;
  u->key = e->make_key(rank, h.tag(), policy);
  u->policy = e->stored_policy(policy);
  u->type = entry_type::send;
  u->rank = rank;
  u->tag = h.tag();
  u->msg_size = b.size;
  u->peer_req = b.sreq;
  u->counted = false;
  u->ahead = id;
  u->publish(req_kind::unexpected_rts);
  counters.add(counter_t::unexpected);
  if (auto* r = static_cast<request*>(e->insert(u))) r->dev->match_posted(r, u);
  return true;
}

// A receive met a ready-to-send: the unexpected entry `u` becomes the receive (it lives on
// the device the sender talks to) and the clear-to-send goes out.
void device_impl::accept_rendezvous(const recv_side& recv, request* u) {
  comp_impl* comp = recv.comp;
  const bool counted = recv.counted;
  u->buf = recv.buf;
  u->size = std::min(recv.size, u->msg_size);
  u->comp = comp;
  u->user_context = recv.user_context;
  u->counted = comp != nullptr;
  u->is_am = false;
  if (u->counted) comp->pending.fetch_add(1, std::memory_order_relaxed);
  if (counted) comp->pending.fetch_sub(1, std::memory_order_relaxed);
  if (u->ahead != no_ahead) {  // its data is on its way: into this buffer
    u->dev->take_ahead(u, u->ahead);
    return;
  }
  wire_header h{};
  h.version = wire_version;
  h.type = uint8_t(msg_type::cts);
  cts_body b{u->peer_req, u->dev->slab.handle(u), reinterpret_cast<uint64_t>(u->buf), u->size};
  device_impl* via = u->dev;
  const int peer = u->rank;
  // Last touch: after the clear-to-send, u may complete. A dead sender fails it now.
  if (!via->publish_receive(u, peer)) return;
  WEFT_TSAN_RELEASE(reinterpret_cast<void*>(b.raddr));
  via->send_control(peer, h, &b, sizeof(b));
  via->counters.add(counter_t::handshakes);
}

// The receiver is ready: the data goes, with a note naming its receive request.
void device_impl::arrive_cts(int rank, const cts_body& b) {
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
  const uint64_t sh = b.sreq, raddr = b.raddr;
  const size_t accept = b.accept;
  void* ctx = reinterpret_cast<void*>(uintptr_t(sh));
  rendezvous_note note{uint8_t(note_type::rendezvous), {}, b.rreq};
  // Behind transfers already waiting, in order: they wait for the same channels.
  if (!data_backlog.empty() ||
      !net->try_send_data(rank, s->buf, accept, raddr, &note, sizeof(note), ctx))
    data_backlog_push(backlog_work::rendezvous_put{rank, sh, raddr, accept, note});
}

// The receiver refused the message (no memory, unknown target): the send fails with its code.
void device_impl::arrive_nack(int rank, const nack_body& b) {
  request* s = slab.lookup(b.sreq, req_kind::rdv_send);
  if (!s || s->rank != rank || b.errorcode < uint32_t(errorcode_t::error)) {
    wire_error(rank, "refusal for unknown send request " + std::to_string(b.sreq));
    return;
  }
  if (!s->claim(req_kind::rdv_send)) return;  // failed meanwhile (dead peer)
  // Data sent ahead may still be on its way into the channel: stop it first.
  if (s->sent_ahead) net->cancel_ahead(rank, reinterpret_cast<void*>(uintptr_t(b.sreq)));
  finish_request(s, errorcode_t(b.errorcode));
}

bool device_impl::retry_work(backlog_work::rendezvous_put& r) {
  request* q = slab.lookup(r.send_handle, req_kind::rdv_send);
  if (!q) return true;  // failed meanwhile (dead peer)
  void* ctx = reinterpret_cast<void*>(uintptr_t(r.send_handle));
  return net->try_send_data(r.rank, q->buf, r.accept, r.raddr, &r.note, sizeof(r.note), ctx);
}

bool device_impl::expects_data(int rank, uint64_t addr, size_t size, const void* note, size_t len) {
  if (len != sizeof(rendezvous_note) ||
      *static_cast<const uint8_t*>(note) != uint8_t(note_type::rendezvous))
    return false;
  rendezvous_note n;
  memcpy(&n, note, sizeof(n));
  const request* r = slab.lookup(n.rreq, req_kind::rdv_recv);
  return r && r->rank == rank && reinterpret_cast<uint64_t>(r->buf) == addr && size <= r->size;
}

// A rendezvous message's data is in place: its receive completes.
void device_impl::rendezvous_arrived(int rank, const rendezvous_note& n) {
  request* r = slab.lookup(n.rreq, req_kind::rdv_recv);
  if (!r || r->rank != rank) {
    wire_error(rank, "data for unknown receive request " + std::to_string(n.rreq));
    return;
  }
  if (!r->claim(req_kind::rdv_recv)) return;  // failed meanwhile: its sender died
  // Whichever thread of ours copied data into the buffer released it (util/tsan.hpp).
  WEFT_TSAN_ACQUIRE(r->buf);
  counters.add_two(counter_t::received_rendezvous, counter_t::bytes_received, r->size);
  finish_request(r, r->msg_size > r->size ? errorcode_t::error_truncated : errorcode_t::done);
}

}  // namespace weft::impl
