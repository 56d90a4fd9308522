// SPDX-License-Identifier: BSD-3-Clause
// Posting: argument checks, then protocol choice by size (inject / eager in one message,
// rendezvous above the eager limit) and the hand-off to the backend.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"
#include "util/fail.hpp"
#include "util/settings.hpp"
#include "util/tsan.hpp"

namespace weft::impl {
namespace {

bool policy_has_rank(matching_policy_t p) {
  return p == matching_policy_t::rank_tag || p == matching_policy_t::rank_only;
}

}  // namespace

void device_impl::refuse_post(const comm_args& a) {
  const char* call = a.call_name;
  if (uint8_t(a.direction) > uint8_t(direction_t::IN))
    util::fail(call, "direction", std::to_string(int(a.direction)), "must be OUT (0) or IN (1)");
  if (a.nbuffers && !a.buffers)
    util::fail(call, "buffers", "nullptr",
               "a list of " + std::to_string(a.nbuffers) + " entries needs an array");
  if (a.nremote_buffers && !a.remote_buffers)
    util::fail(call, "remote_buffers", "nullptr",
               "a list of " + std::to_string(a.nremote_buffers) + " entries needs an array");
  if (a.rank < 0 || a.rank >= rt.size())
    util::fail(call, "rank", std::to_string(a.rank),
               "out of range [0, " + std::to_string(rt.size()) + ")");
  if (!a.local_buffer && a.size)
    util::fail(call, "local_buffer", "nullptr", "null buffer with size " + std::to_string(a.size));
  if (a.size > max_msg_size)
    util::fail(call, "size", std::to_string(a.size),
               "exceeds the maximum message size " + std::to_string(max_msg_size));
  if (comp_of(a) && comp_of(a)->kind == comp_kind::graph)
    util::fail(call, "local_comp", "a graph",
               "add the operation to the graph with graph_add_node_op");
  if (comp_of(a) && comp_of(a)->kind == comp_kind::cont_request)
    util::fail(call, "local_comp", "a continuation request",
               "pass a continuation of it (alloc_cont_x), or watch it with watch_cont_request");
  if (uint8_t(a.matching_policy) > uint8_t(matching_policy_t::rank_tag))
    util::fail(call, "matching_policy", std::to_string(int(a.matching_policy)), "unknown policy");
  if (a.direction == direction_t::IN && a.remote_comp != rcomp_null)
    util::fail(call, "remote_comp", std::to_string(a.remote_comp),
               "direction IN with a remote completion but no remote buffer is not a valid "
               "operation (Table 1)");
  if (a.remote_comp != rcomp_null && a.remote_comp >= rt.rcomp_count())
    util::fail(
        call, "remote_comp", std::to_string(a.remote_comp),
        "unknown remote completion handle (" + std::to_string(rt.rcomp_count()) + " registered)");
  if (peer_dead(a.rank)) util::fail(call, "rank", std::to_string(a.rank), net->why_gone(a.rank));
  if (!a.allow_retry && !comp_of(a) && !a.internal)
    util::fail(call, "local_comp", "empty",
               "with allow_retry(false) the operation may wait in the backlog and use the buffer "
               "after the call returns; without a completion object nobody learns when it is "
               "done (only eager sends and active messages are copied for that)");
  util::fail(call, "arguments", "?", "refused without a reason (a check in post is missing here)");
}

// Above the eager size: the rendezvous protocol. Out of line, with its error reports, so
// that the eager path keeps a small frame.
status_t device_impl::post_large(const comm_args& a, wire_header& h) {
  if (a.buffer_is_packet)
    util::fail(a.call_name, "size", std::to_string(a.size),
               "a packet buffer holds at most " + std::to_string(eager_limit) + " bytes");
  if (!a.allow_posted)
    util::fail(a.call_name, "allow_posted", "false",
               "size " + std::to_string(a.size) +
                   " needs the rendezvous protocol, which "
                   "cannot complete immediately");
  h.type = uint8_t(h.type == uint8_t(msg_type::eager_am) ? msg_type::rts_am : msg_type::rts_send);
  return post_rendezvous(a, h);
}

// A two-sided send's header (out of line: the matching engine may need looking up).
wire_header device_impl::address_send(const comm_args& a) {
  auto* e = a.matching_engine.p ? a.matching_engine.p : rt.engine_or_fail(a.call_name);
  return eager_header(msg_type::eager_send, e->id(), a.tag, uint8_t(a.matching_policy));
}

// What a packet buffer goes back to once its message left.
void device_impl::return_packet(const comm_args& a) {
  auto* p = a.packet_pool.p ? a.packet_pool.p : rt.pool_owning(a.local_buffer);
  if (p) p->put(a.local_buffer);
}

status_t device_impl::post_out(const comm_args& a) {
  if (a.remote_comp != rcomp_null && a.remote_comp >= rt.rcomp_count()) [[unlikely]]
    refuse_post(a);
  wire_header h = a.remote_comp != rcomp_null
                      ? eager_header(msg_type::eager_am, a.remote_comp, a.tag)
                      : address_send(a);
  if (a.size > eager_limit) [[unlikely]]
    return post_large(a, h);
  // Completed at once but signalled (allow_done false): a full queue's signal would wait
  // in the backlog, so the backlog's bound applies.
  if (!a.allow_done && !a.internal && backlog_over()) [[unlikely]]
    return retry_or_backlog(a, errorcode_t::retry_backlog);
  if (!send_eager(a.rank, h, a.local_buffer, a.size)) [[unlikely]]
    return retry_or_backlog(a, errorcode_t::retry_nomem);
  if (a.buffer_is_packet) return_packet(a);
  if (a.allow_done) [[likely]]
    return immediate(a, errorcode_t::done);
  complete(comp_of(a), immediate(a, errorcode_t::done), false);
  return immediate(a, errorcode_t::posted);
}

status_t device_impl::post(const comm_args& a) {
  // Every check in one test; the report, which needs strings, is out of line.
  if (a.rank < 0 || a.rank >= rt.size() || (!a.local_buffer && a.size) || a.size > max_msg_size ||
      (comp_of(a) && comp_of(a)->kind >= comp_kind::graph) ||
      uint8_t(a.matching_policy) > uint8_t(matching_policy_t::rank_tag) ||
      uint8_t(a.direction) > uint8_t(direction_t::IN) || (a.nbuffers && !a.buffers) ||
      (a.nremote_buffers && !a.remote_buffers) ||
      (!a.allow_retry && !comp_of(a) && !a.internal && !copied_if_backlogged(a)))
    refuse_post(a);
  if (a.buffers || a.remote_buffers) return post_list(a);
  if (a.has_remote_buffer) return post_rma(a);
  if (a.direction == direction_t::IN) {
    if (a.remote_comp != rcomp_null) refuse_post(a);
    return post_in(a);
  }
  if (peer_dead(a.rank)) refuse_post(a);
  return post_out(a);
}

// A send or active message of at most the eager size, from a plain buffer: copied when it
// goes to the backlog without a completion object (the caller cannot learn when it left).
bool device_impl::copied_if_backlogged(const comm_args& a) const {
  return a.direction == direction_t::OUT && !a.has_remote_buffer && !a.buffers &&
         !a.remote_buffers && a.size <= eager_limit;
}

// A post that cannot go now: retry, or with allow_retry(false) into the backlog. A user's
// post finds the backlog closed at backlog_size and gets retry_backlog even then (the
// documented bound); Weft's own posts go in up to the hard capacity.
status_t device_impl::retry_or_backlog(const comm_args& a, errorcode_t code) {
  // A caller retrying waits on the peer as much as a pending operation does: the periodic
  // check looks at the peers then too (a dead peer's full queue, or a key its dead owner
  // will never send, would otherwise be retried for ever).
  if (a.allow_retry || (!a.internal && backlog_over())) {
    note_retry();
    return immediate(a, a.allow_retry ? code : errorcode_t::retry_backlog);
  }
  if (!retried_.load(std::memory_order_relaxed)) retried_.store(true, std::memory_order_relaxed);
  backlog_work::post p{a, nullptr};
  p.args.allow_retry = true;
  p.args.allow_done = true;
  p.args.internal = true;  // its place in the backlog is already taken
  comp_impl* c = comp_of(a);
  if (!c && !a.buffer_is_packet && a.size) {  // nobody will learn when it left: copy it
    p.owned = util::allocating(a.call_name, "size", a.size, [&] {
      void* b = std::malloc(a.size);
      if (!b) throw std::bad_alloc();
      return b;
    });
    memcpy(p.owned, a.local_buffer, a.size);
    p.args.local_buffer = p.owned;
  }
  if (c) c->pending.fetch_add(1, std::memory_order_relaxed);
  if (!backlog.push(p)) {
    if (c) c->pending.fetch_sub(1, std::memory_order_relaxed);
    std::free(p.owned);
    counters.add(counter_t::retries);
    return immediate(a, errorcode_t::retry_backlog);
  }
  counted_backlog_push();
  return immediate(a, errorcode_t::posted_backlog);
}

// Publishes `r`, an outgoing request of kind `k` to `a.rank`, before the backend sees it:
// the outgoing side of publish_receive's race with fail_peer (both sequentially
// consistent: either its scan finds r, or this sees the peer dead). A death seen here
// refuses the post at the call, as one seen before it; false when the scan claimed r
// first, and then r's failure is on the way.
bool device_impl::publish_out(request* r, req_kind k, const comm_args& a) {
  r->kind_.store(k, std::memory_order_seq_cst);
  if (!dead_[size_t(a.rank)].load(std::memory_order_seq_cst)) return true;
  if (!take_back(r, k)) return false;
  refuse_post(a);
}

// Takes back `r`, published as `k`, when its backend refused it. False when the death of
// its peer claimed it first (fail_peer's scan), which finishes it with error_peer_dead:
// freeing it here as well would complete the operation twice (mp.send_race_death saw
// the extra completion).
bool device_impl::take_back(request* r, req_kind k) {
#ifdef WEFT_TEST_HOOKS
  static const size_t delay_us = *util::get_size(util::setting::test_refused_post_delay);
  if (delay_us) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
#endif
  if (!r->claim(k)) return false;
  if (r->counted) r->comp->pending.fetch_sub(1, std::memory_order_relaxed);
  slab.free(r);
  return true;
}

// A request for an outgoing operation that waits on the peer, filled from the post.
request* device_impl::alloc_outgoing(const comm_args& a, bool is_am) {
  request* r = slab.alloc_user(this);
  if (!r) return nullptr;
  r->rank = a.rank;
  r->tag = a.tag;
  r->buf = a.local_buffer;
  r->size = a.size;
  r->comp = comp_of(a);
  r->user_context = a.user_context;
  r->is_am = is_am;
  r->counted = r->comp != nullptr;
  return r;
}

// An access of `size` bytes at offset `disp` of the peer's region `m`: a handle from
// get_rmr, inside the region, and still registered where the backend can tell (shm: the
// owner's region table). Whoever touches the memory checks again. `arg` names the handle
// in errors, `disp_arg` the offset.
void device_impl::check_remote_access(const char* call, std::string_view arg,
                                      std::string_view disp_arg, int rank, const rmr_t& m,
                                      uint64_t disp, size_t size) {
  if (m.is_empty()) util::fail(call, std::string(arg), "empty", "not a handle from get_rmr");
  if (disp > m.size || size > m.size - disp)
    util::fail(call, std::string(disp_arg), std::to_string(disp),
               "an access of " + std::to_string(size) + " bytes there overruns the region of " +
                   std::to_string(m.size) + " bytes");
  if (const char* why =
          net->check_remote(rank, m.base + disp, size, net::rkey_t{m.key, m.generation}))
    util::fail(call, std::string(arg),
               "region " + std::to_string(m.key) + " generation " + std::to_string(m.generation) +
                   " of rank " + std::to_string(rank),
               why);
}

// What every put or get needs besides its remote access: a known remote completion, a
// plain local buffer, a live peer, and a completion that may come later.
void device_impl::check_one_sided(const comm_args& a) {
  const char* call = a.call_name;
  if (a.remote_comp != rcomp_null && a.remote_comp >= rt.rcomp_count())
    util::fail(
        call, "remote_comp", std::to_string(a.remote_comp),
        "unknown remote completion handle (" + std::to_string(rt.rcomp_count()) + " registered)");
  if (a.buffer_is_packet)
    util::fail(call, "buffer_is_packet", "true", "one-sided operations take plain buffers");
  if (peer_dead(a.rank)) util::fail(call, "rank", std::to_string(a.rank), net->why_gone(a.rank));
  if (!a.allow_posted)
    util::fail(call, "allow_posted", "false", "a put or get completes asynchronously");
}

// Put or get (Table 1 rows with a remote buffer).
status_t device_impl::post_rma(const comm_args& a) {
  const rmr_t& m = a.remote_buffer;
  const bool put = a.direction == direction_t::OUT;
  check_remote_access(a.call_name, "remote_buffer", "remote_disp", a.rank, m, a.remote_disp,
                      a.size);
  check_one_sided(a);
  const uint64_t addr = m.base + a.remote_disp;
  const net::rkey_t key{m.key, m.generation};
  if (!a.internal && backlog_over()) return retry_or_backlog(a, errorcode_t::retry_backlog);
  request* r = alloc_outgoing(a, false);
  if (!r) return retry_or_backlog(a, errorcode_t::retry_nomem);
  comp_impl* c = r->comp;
  rma_note note{};
  size_t note_len = 0;
  if (a.remote_comp != rcomp_null) {
    note.type = uint8_t(put ? note_type::put : note_type::get);
    note.rcomp = a.remote_comp;
    note.set_tag(a.tag);
    note.addr = a.note_whole ? a.note_addr : addr;
    note.size = a.note_whole ? a.note_size : a.size;
    note_len = sizeof(note);
  }
  void* ctx = reinterpret_cast<void*>(uintptr_t(slab.handle(r)));
  if (c) c->pending.fetch_add(1, std::memory_order_relaxed);
  // Last touch: the backend may complete it from now on. A false: the peer's death claimed
  // it meanwhile (its failure is on the way; the post counts as posted).
  if (!publish_out(r, req_kind::rma, a)) return immediate(a, errorcode_t::posted);
  const bool ok = put ? net->try_put(a.rank, a.local_buffer, a.size, addr, key,
                                     note_len ? &note : nullptr, note_len, ctx)
                      : net->try_get(a.rank, a.local_buffer, a.size, addr, key,
                                     note_len ? &note : nullptr, note_len, ctx);
  if (!ok) {
    if (!take_back(r, req_kind::rma)) return immediate(a, errorcode_t::posted);
    return retry_or_backlog(a, errorcode_t::retry_nomem);
  }
  counters.add_two(put ? counter_t::puts : counter_t::gets, counter_t::bytes_rma, a.size);
  return immediate(a, errorcode_t::posted);
}

// A receive that matches a message already here always succeeds: it needs no request of
// its own (the message's becomes the receive's), so a table full of unexpected messages
// cannot keep their receives out.
status_t device_impl::post_in(const comm_args& a) {
  auto* e = a.matching_engine.p ? a.matching_engine.p : rt.engine_or_fail(a.call_name);
  const match_key key = e->make_key(a.rank, a.tag, a.matching_policy);
  const uint8_t pol = e->stored_policy(a.matching_policy);
  const recv_side mine{a.local_buffer, a.size, comp_of(a), a.user_context, false};
  // A receive from a peer known dead takes what it sent before it died, and is otherwise
  // refused: posted, it would wait for ever (its receives were failed when it died).
  if (policy_has_rank(a.matching_policy) && peer_dead(a.rank)) {
    if (auto* m = static_cast<request*>(e->take(key, pol, entry_type::send)))
      return match_arrived(mine, m, &a);
    refuse_post(a);
  }
  if (!a.allow_posted) {
    auto* m = static_cast<request*>(e->take(key, pol, entry_type::send));
    if (!m) return immediate(a, errorcode_t::retry);
    return match_arrived(mine, m, &a);
  }
  const bool closed = !a.internal && backlog_over();
  // The barrier's receives (Weft's own engine) may use the requests kept for it.
  request* r = closed                          ? nullptr
               : e->id() == internal_engine_id ? slab.alloc(this)
                                               : slab.alloc_user(this);
  if (!r) {
    if (auto* m = static_cast<request*>(e->take(key, pol, entry_type::send)))
      return match_arrived(mine, m, &a);
    return retry_or_backlog(a, closed ? errorcode_t::retry_backlog : errorcode_t::retry_nomem);
  }
  r->key = key;
  r->policy = pol;
  r->type = entry_type::recv;
  r->rank = policy_has_rank(a.matching_policy) ? a.rank : -1;
  r->tag = a.tag;
  r->buf = a.local_buffer;
  r->size = a.size;
  r->comp = comp_of(a);
  r->user_context = a.user_context;
  r->counted = r->comp != nullptr;
  if (r->counted) r->comp->pending.fetch_add(1, std::memory_order_relaxed);
#ifdef WEFT_TEST_HOOKS
  static const size_t delay_us = *util::get_size(util::setting::test_recv_insert_delay);
  if (delay_us && r->rank >= 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
#endif
  r->publish(req_kind::posted_recv);
  auto* m = static_cast<request*>(e->insert(r));
  if (!m) {
    if (policy_has_rank(a.matching_policy) && peer_dead(a.rank)) fail_late_receive(e, key, pol, r);
    return immediate(a, errorcode_t::posted);
  }
  if (r->counted) r->comp->pending.fetch_sub(1, std::memory_order_relaxed);
  slab.free(r);
  return match_arrived(mine, m, &a);
}

// A receive from a peer that died between the post's first check and its insert: the
// death's scan (fail_peer) may have passed its bucket first and would leave it waiting for
// ever. The bucket's lock orders the two, so the post sees the flag the death set before
// that scan. Whoever takes it out of the engine (this, or the scan) fails it.
void device_impl::fail_late_receive(matching_engine_impl* e, const match_key& key, uint8_t pol,
                                    request* r) {
  auto* m = e->remove_if(key, pol, entry_type::recv, [r](match_entry* x) { return x == r; });
  if (m) fail_request(static_cast<request*>(m), r->rank);
}

// A receive met a send that arrived first (poster != nullptr: inside the receive's post
// call) or a send met a posted receive (poster == nullptr: inside progress; the receive's
// request is already freed).
status_t device_impl::match_arrived(const recv_side& recv, request* u, const comm_args* poster) {
  status_t s;
  s.rank = u->rank;
  s.tag = u->tag;
  s.buf = recv.buf;
  s.user_context = recv.user_context;
  comp_impl* comp = recv.comp;
  const bool counted = recv.counted;
  if (u->kind() == req_kind::unexpected_eager) {
    size_t n = std::min(recv.size, u->msg_size);
    if (n) memcpy(recv.buf, u->buf, n);
    s.size = n;
    s.error = u->msg_size > recv.size ? errorcode_t::error_truncated : errorcode_t::done;
    if (u->pool)
      u->pool->put(u->buf);
    else
      std::free(u->buf);
    u->dev->slab.free(u);
    if (poster && poster->allow_done && s.error.is_done()) return s;
    complete(comp, s, counted);
    status_t p = s;
    p.error = errorcode_t::posted;
    return p;
  }
  // Rendezvous: the request that waits for the data must live on the device the sender
  // talks to, so the unexpected entry becomes the receive.
  accept_rendezvous(recv, u);
  s.error = errorcode_t::posted;
  return s;
}

bool device_impl::cancel(const comm_args& a) {
  auto* e = a.matching_engine.p ? a.matching_engine.p : rt.engine_or_fail(a.call_name);
  const match_key key = e->make_key(a.rank, a.tag, a.matching_policy);
  auto* m =
      e->remove_if(key, e->stored_policy(a.matching_policy), entry_type::recv, [&](match_entry* x) {
        auto* r = static_cast<request*>(x);
        return r->buf == a.local_buffer && r->comp == comp_of(a);
      });
  if (!m) return false;
  auto* r = static_cast<request*>(m);
  status_t s;
  s.error = errorcode_t::cancelled;
  s.rank = a.rank;
  s.tag = a.tag;
  s.buf = r->buf;
  s.user_context = r->user_context;
  comp_impl* c = r->comp;
  bool counted = r->counted;
  r->dev->slab.free(r);
  complete(c, s, counted);
  return true;
}

}  // namespace weft::impl
