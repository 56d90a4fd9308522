// SPDX-License-Identifier: BSD-3-Clause
// What reaches a UCX device, under its worker lock from the worker's progress: the
// completions of its sends, puts and gets, a peer's endpoint failing, the active messages
// (kept as UCP descriptors until the sink has taken them, offered again when refused), and
// the control messages of remote keys.
#include <algorithm>
#include <cstring>

#include "net/ucx/ucx_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

// Last, in a block of its own: its macros route UCX calls through the table.
#include "net/ucx/ucx_lib.hpp"

namespace weft::net::ucx {
namespace {

// The body of an rkey reply: key, found, base, size, then the packed key.
struct rkey_reply {
  uint64_t key, found, base, size;
};

}  // namespace

void ucx_device::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* o = static_cast<op*>(user_data);
  o->dev->finished(o, status);
  ucp_request_free(request);
}

void ucx_device::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* p = static_cast<peer*>(arg);
  p->dev->declare_dead(p->rank, status);
}

void ucx_device::declare_dead(int rank, ucs_status_t why) {
  if (!peers_[size_t(rank)].dead.exchange(true))
    WEFT_LOG(info, "ucx: the endpoint to rank %d failed: %s", rank, ucs_status_string(why));
}

// A status that says the endpoint itself is gone. UCX may fail the operations on an
// endpoint before it calls the endpoint's error handler: the peer is declared dead first,
// so that they fail as its death (error_peer_dead), not as a generic error.
static bool endpoint_gone(ucs_status_t status) {
  return status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_CONNECTION_RESET ||
         status == UCS_ERR_UNREACHABLE || status == UCS_ERR_NOT_CONNECTED ||
         status == UCS_ERR_REJECTED;
}

void ucx_device::finished(op* o, ucs_status_t status) {
  const bool ok = status == UCS_OK;
  if (!ok && o->kind != op::send)
    WEFT_LOG(warn, "ucx: an operation with rank %d failed: %s", o->rank, ucs_status_string(status));
  if (!ok && endpoint_gone(status)) declare_dead(o->rank, status);
  switch (o->kind) {
    case op::send: free_sends_.push_back(o->buffer); return;  // owned by send_ops_
    case op::flush: push_done(true, o->ctx, ok, o->rank, o->note, o->note_len); break;
    case op::stream: {
      stream_state* w = o->whole;
      w->ok = w->ok && ok;
      if (--w->left == 0) {
        push_done(true, w->ctx, w->ok, w->rank, nullptr, 0);
        streams_.put(w);
      }
      break;
    }
    case op::get: push_done(false, o->ctx, ok, o->rank, o->note, o->note_len); break;
    case op::revoke_flush: {
      auto it = keys_.find({o->rank, o->key});
      if (it != keys_.end() && it->second.rkey) {
        ucp_rkey_destroy(it->second.rkey);
        it->second.rkey = nullptr;
      }
      control_out_.push_back(control{o->rank, kind_revoke_ack, key_and_device_generation(o->key)});
      break;
    }
  }
  o->dev->ops_.put(o);
}

ucs_status_t ucx_device::on_am(void* arg, const void* header, size_t header_len, void* data,
                               size_t len, const ucp_am_recv_param_t* param) {
  am_header h{};
  if (header_len < short_header || header_len > sizeof(h)) {
    WEFT_LOG(error, "ucx: a message with a %zu-byte header, dropped", header_len);
    return UCS_OK;
  }
  memcpy(&h, header, header_len);
  return static_cast<ucx_device*>(arg)->received(h, header_len, data, len, param);
}

ucs_status_t ucx_device::received(const am_header& h, size_t header_len, void* data, size_t len,
                                  const ucp_am_recv_param_t* param) {
  if (h.cookie != cookie_) {
    // From a process of another job that holds this worker's address by mistake: dropped
    // unread; the first is a warning.
    const bool first = foreign_.fetch_add(1, std::memory_order_relaxed) == 0;
    WEFT_LOG_AT(first ? util::log_level::warn : util::log_level::debug,
                "ucx device %d: a message of %zu bytes from another job (its cookie is not "
                "this job's; it claims to be from rank %u), dropped%s",
                index_, len, h.src, first ? "; later ones are logged at debug level" : "");
    return UCS_OK;
  }
  // Weft sends everything eager; a rendezvous descriptor can only come from a stranger.
  const bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  if (h.src >= uint32_t(npeers_) || rndv) {
    WEFT_LOG(error, "ucx: a malformed message (sender %u, kind %u), dropped", h.src,
             unsigned(h.kind));
    return UCS_OK;
  }
  if (closing_) return UCS_OK;
  const int src = int(h.src);
  switch (h.kind) {
    case kind_message:
    case kind_answer: {
      event e;
      e.kind = event::message;
      e.rank = src;
      e.data = data;
      e.len = len;
      e.release = true;  // persistent data: released once the sink has seen it
      e.credited = h.credited != 0;
      e.answer = h.kind == kind_answer;
      events_.push_back(e);
      return UCS_INPROGRESS;
    }
    case kind_notify:
      if (len > max_note_size) break;
      push_notify(src, data, len, h.credited != 0);
      return UCS_OK;
    case kind_stream: {
      if (header_len != sizeof(am_header) || h.note_len > max_note_size) break;
      if (len) memcpy(reinterpret_cast<void*>(h.dst), data, len);
      // Rendezvous data answers our clear-to-send: its note passes held messages.
      if (h.note_len) push_notify(src, h.note, h.note_len, false, true);
      return UCS_OK;
    }
    case kind_credit: {
      uint32_t n;
      if (len != sizeof(n)) break;
      memcpy(&n, data, sizeof(n));
      credits_out_->grant(src, n);
      return UCS_OK;
    }
    case kind_hello: ++hellos_; return UCS_OK;
    case kind_rkey_request:  // key and the asker's device_generation
    case kind_revoke_ack:
      if (len != 16) break;
      control_in_.push_back(control{src, h.kind, std::string(static_cast<char*>(data), len)});
      return UCS_OK;
    case kind_revoke:  // key
      if (len != 8) break;
      control_in_.push_back(control{src, h.kind, std::string(static_cast<char*>(data), len)});
      return UCS_OK;
    case kind_rkey_reply:  // the reply, then the packed key
      if (len < sizeof(rkey_reply)) break;
      control_in_.push_back(control{src, h.kind, std::string(static_cast<char*>(data), len)});
      return UCS_OK;
  }
  WEFT_LOG(error, "ucx: a malformed message (kind %u, %zu bytes) from rank %d, dropped",
           unsigned(h.kind), len, src);
  return UCS_OK;
}

// Requests for keys, replies, revocations and their acknowledgments; then whatever is
// waiting to be sent. Under worker_lock_, outside UCP's callbacks.
void ucx_device::handle_control() {
  std::vector<control> in;
  in.swap(control_in_);
  // Every body was checked for its kind's size on arrival (received).
  for (control& c : in) {
    uint64_t key = 0;
    memcpy(&key, c.body.data(), 8);
    switch (c.kind) {
      case kind_rkey_request: {
        rkey_reply r{key, 0, 0, 0};
        std::string packed;
        r.found = ctx_.lookup_for_peer(key, asker(c), packed, r.base, r.size);
        control_out_.push_back(control{
            c.rank, kind_rkey_reply, std::string(reinterpret_cast<char*>(&r), sizeof(r)) + packed});
        break;
      }
      case kind_rkey_reply: {
        rkey_reply r;
        memcpy(&r, c.body.data(), sizeof(r));
        auto it = keys_.find({c.rank, key});
        if (it == keys_.end() || it->second.state != remote_key::fetching) break;
        remote_key& rk = it->second;
        rk.state = remote_key::refused;
        if (!r.found) break;
        ucs_status_t st =
            ucp_ep_rkey_unpack(peers_[size_t(c.rank)].ep, c.body.data() + sizeof(r), &rk.rkey);
        if (st != UCS_OK) {
          WEFT_LOG(warn, "ucx: the key of rank %d's region %lu does not unpack: %s", c.rank,
                   (unsigned long)key, ucs_status_string(st));
          break;
        }
        rk.state = remote_key::ready;
        rk.base = r.base;
        rk.size = r.size;
        break;
      }
      case kind_revoke: {
        remote_key& rk = keys_[{c.rank, key}];
        rk.state = remote_key::refused;
        // Accesses already issued with the key finish before the owner hears back.
        op* o = ops_.get();
        o->kind = op::revoke_flush;
        o->dev = this;
        o->rank = c.rank;
        o->key = key;
        ucp_request_param_t rp = with_callback(o);
        rp.cb.send = &ucx_device::on_send_done;
        ucs_status_ptr_t req = ucp_ep_flush_nbx(peers_[size_t(c.rank)].ep, &rp);
        if (!UCS_PTR_IS_PTR(req)) finished(o, UCS_OK);
        break;
      }
      case kind_revoke_ack: ctx_.revoke_acknowledged(key, asker(c)); break;
    }
  }
  size_t sent = 0;
  for (; sent < control_out_.size(); ++sent) {
    control& c = control_out_[sent];
    if (!send_locked(c.rank, c.kind, c.body.data(), c.body.size(), nullptr, 0)) break;
  }
  control_out_.erase(control_out_.begin(), control_out_.begin() + long(sent));
}

// Notifications of finished puts and gets, in order.
void ucx_device::send_notes() {
  size_t sent = 0;
  for (; sent < notes_out_.size(); ++sent) {
    outgoing_note& n = notes_out_[sent];
    if (!send_locked(n.rank, kind_notify, n.note, n.len, nullptr, 0)) break;
    event e;
    e.kind = n.write ? event::put_done : event::get_done;
    e.ctx = n.ctx;
    events_.push_back(e);
  }
  notes_out_.erase(notes_out_.begin(), notes_out_.begin() + long(sent));
}

void ucx_device::taken_from(int rank) {
  if (const uint32_t n = credits_in_->taken(rank)) grants_.emplace_back(rank, n);
}

bool ucx_device::offer(sink& s, const event& e) {
  switch (e.kind) {
    case event::message: return s.on_message(e.rank, e.data, e.len);
    case event::notify: return s.on_remote_notify(e.rank, e.note, e.note_len);
    case event::put_done: s.on_put_local_done(e.ctx, e.ok); return true;
    case event::get_done: s.on_get_done(e.ctx, e.ok); return true;
  }
  return true;
}

size_t ucx_device::poll(sink& s, size_t) {
  if (!poll_lock_.try_lock()) return 0;
  size_t n = 0;
  // What the sink refused before goes first, a peer's entries in order; what it takes now
  // is released below.
  std::fill(blocked_.begin(), blocked_.end(), 0);
  if (!held_.empty()) {
    std::deque<event> kept;
    for (event& e : held_) {
      if (blocked_[size_t(e.rank)] || !offer(s, e)) {
        blocked_[size_t(e.rank)] = 1;
        kept.push_back(e);
        continue;
      }
      --held_from_[size_t(e.rank)];
      delivering_.push_back(e);  // for its release below
      delivering_.back().delivered = true;
      if (e.credited) taken_from(e.rank);
    }
    held_.swap(kept);
  }
  {
    util::lock_guard<util::spinlock> g(worker_lock_);
    if (held_.size() < held_cap_) n += ucp_worker_progress(worker_);
    if (!control_in_.empty() || !control_out_.empty()) handle_control();
    if (!notes_out_.empty()) send_notes();
    for (event& e : events_) delivering_.push_back(e);
    events_.clear();
  }
  bool release = false;
  for (event& e : delivering_) {
    if (!e.delivered) {
      // Local completions always go; a message or notification only behind nothing held.
      const bool may_wait = (e.kind == event::message || e.kind == event::notify) && !e.answer;
      if ((may_wait && held_from_[size_t(e.rank)]) || !offer(s, e)) {
        held_.push_back(e);  // keeps the descriptor
        ++held_from_[size_t(e.rank)];
        e.release = false;
      } else if (e.credited) {
        taken_from(e.rank);
      }
    }
    release |= e.release;
  }
  if (release || !grants_.empty()) {
    util::lock_guard<util::spinlock> g(worker_lock_);
    for (event& e : delivering_)
      if (e.release) ucp_am_data_release(worker_, e.data);
    for (auto [rank, count] : grants_)
      control_out_.push_back(
          control{rank, kind_credit, std::string(reinterpret_cast<char*>(&count), sizeof(count))});
    grants_.clear();
  }
  n += delivering_.size();
  delivering_.clear();
  poll_lock_.unlock();
  return n;
}

// Sleeps on the worker's event fd once ucp_worker_arm says nothing is pending; a worker
// without one (a transport that cannot arm) sleeps up to 50 us at a time instead.

}  // namespace weft::net::ucx
