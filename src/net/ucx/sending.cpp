// SPDX-License-Identifier: BSD-3-Clause
// What a UCX device sends: messages and answers as active messages from its own send
// buffers, the control messages of remote keys (asked for, released, revoked), and puts
// and gets with the peer's unpacked key, each put followed by a flush (and its note).
#include <algorithm>
#include <cstring>

#include "net/ucx/ucx_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

// Last, in a block of its own: its macros route UCX calls through the table.
#include "net/ucx/ucx_lib.hpp"

namespace weft::net::ucx {

bool ucx_device::send_locked(int rank, uint8_t kind, const void* a, size_t alen, const void* b,
                             size_t blen) {
  peer& p = peers_[size_t(rank)];
  if (p.dead.load(std::memory_order_relaxed)) return true;  // dropped: the core fails its ops
  if (free_sends_.empty()) return false;
  const bool credited = kind == kind_message || kind == kind_notify || kind == kind_answer;
  if (kind == kind_answer)
    credits_out_->overdraw(rank);
  else if (credited && !credits_out_->take(rank))
    return false;
  const uint32_t i = free_sends_.back();
  free_sends_.pop_back();
  char* buf = &send_mem_[size_t(i) * (short_header + cell_size_)];
  am_header h{uint32_t(me_), kind, 0, uint8_t(credited), 0, cookie_, 0, {}};
  memcpy(buf, &h, short_header);
  if (alen) memcpy(buf + short_header, a, alen);
  if (blen) memcpy(buf + short_header + alen, b, blen);
  op& o = send_ops_[i];
  o.kind = op::send;
  o.dev = this;
  o.rank = rank;
  o.buffer = i;
  ucp_request_param_t rp = with_callback(&o);
  rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;  // whole in the handler, in order with the others
  rp.cb.send = &ucx_device::on_send_done;
  ucs_status_ptr_t req =
      ucp_am_send_nbx(p.ep, 0, buf, short_header, buf + short_header, alen + blen, &rp);
  if (UCS_PTR_IS_PTR(req)) return true;  // the buffer returns in on_send_done
  free_sends_.push_back(i);
  if (UCS_PTR_IS_ERR(req)) declare_dead(rank, UCS_PTR_STATUS(req));
  return true;
}

bool ucx_device::try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                          size_t len) {
  util::lock_guard<util::spinlock> g(worker_lock_);
  return send_locked(rank, kind_message, hdr, hdr_len, payload, len);
}

bool ucx_device::try_send_answer(int rank, const void* hdr, size_t hdr_len, const void* payload,
                                 size_t len) {
  util::lock_guard<util::spinlock> g(worker_lock_);
  return send_locked(rank, kind_answer, hdr, hdr_len, payload, len);
}

std::string ucx_device::key_and_device_generation(uint64_t key) const {
  std::string body(16, '\0');
  memcpy(body.data(), &key, 8);
  memcpy(body.data() + 8, &device_generation_, 8);
  return body;
}

// The device that sent `c` (a request or an acknowledgment: key, then device_generation).
key_asker ucx_device::asker(const control& c) const {
  uint64_t device_generation = 0;
  memcpy(&device_generation, c.body.data() + 8, 8);
  return key_asker{c.rank, index_, device_generation};
}

void ucx_device::release_remote_keys() {
  util::lock_guard<util::spinlock> g(worker_lock_);
  for (auto& [who, k] : keys_)
    if (k.state != remote_key::refused)  // refused: acknowledged already, or never held
      control_out_.push_back(
          control{who.first, kind_revoke_ack, key_and_device_generation(who.second)});
  // Sent before the endpoints close (which flushes them); a second at most, since a peer
  // may be gone.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!control_out_.empty() && std::chrono::steady_clock::now() < until) {
    handle_control();
    ucp_worker_progress(worker_);
  }
}

void ucx_device::queue_revoke(int rank, uint64_t key) {
  util::lock_guard<util::spinlock> g(worker_lock_);
  control_out_.push_back(control{rank, kind_revoke, std::string(reinterpret_cast<char*>(&key), 8)});
}

// ---- one-sided ----------------------------------------------------------------------------

const char* ucx_device::resolve(int rank, rkey_t k, uint64_t addr, size_t size, remote_key** out) {
  // The key alone names a registration here (get_rkey gives generation 0): another
  // generation is a forged or corrupted handle.
  if (k.generation != 0) return "the handle's generation is not its region's";
  if (k.key == 0) return "key 0 names no registered region";
  auto [it, fresh] = keys_.try_emplace({rank, k.key});
  if (fresh) {
    control_out_.push_back(control{rank, kind_rkey_request, key_and_device_generation(k.key)});
    return nullptr;
  }
  remote_key& rk = it->second;
  switch (rk.state) {
    case remote_key::fetching: return nullptr;
    case remote_key::refused: return "the region has been deregistered";
    case remote_key::ready: break;
  }
  if (addr < rk.base || size > rk.size || addr - rk.base > rk.size - size)
    return "the access lies outside the region";
  if (out) *out = &rk;
  return "";
}

const char* ucx_device::check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t k) {
  if (k.key == 0) return "key 0 names no registered region";
  util::lock_guard<util::spinlock> g(worker_lock_);
  const char* why = resolve(rank, k, remote_addr, size, nullptr);  // starts the fetch early
  return why && *why ? why : nullptr;
}

void ucx_device::push_done(bool write, void* ctx, bool ok, int rank, const void* note,
                           size_t note_len) {
  if (ok && note_len) {  // done once the note is sent (send_notes)
    outgoing_note n{rank, uint32_t(note_len), {}, ctx, write};
    memcpy(n.note, note, note_len);
    notes_out_.push_back(n);
    return;
  }
  event e;
  e.kind = write ? event::put_done : event::get_done;
  e.ctx = ctx;
  e.ok = ok;
  events_.push_back(e);
}

void ucx_device::push_notify(int rank, const void* note, size_t len, bool credited, bool answer) {
  event e;
  e.kind = event::notify;
  e.rank = rank;
  e.credited = credited;
  e.answer = answer;
  e.note_len = uint32_t(len);
  memcpy(e.note, note, len);
  events_.push_back(e);
}

bool ucx_device::rma(bool write, int rank, void* local, size_t size, uint64_t addr, rkey_t k,
                     const void* note, size_t note_len, void* ctx) {
  util::lock_guard<util::spinlock> g(worker_lock_);
  remote_key* rk = nullptr;
  const char* why = resolve(rank, k, addr, size, &rk);
  if (!why) return false;  // the key is on its way: the core retries
  if (*why) {
    WEFT_LOG(debug, "ucx: %s of %zu bytes at rank %d refused: %s", write ? "put" : "get", size,
             rank, why);
    push_done(write, ctx, false, rank, nullptr, 0);
    return true;
  }
  if (write && note_len) {
    // A put with a notification travels as the rendezvous data does (the key was checked
    // above): put, flush and notify cost a round trip per put over tcp (76 us at 64 KiB in
    // bench_put_notify across the namespace hosts), eager fragments none, and the
    // notification rides on the last one. The revocation of the key stays ordered after it,
    // as a revoke acknowledgement is an active message on the same endpoint.
    stream_locked(rank, local, size, addr, note, note_len, ctx);
    return true;
  }
  op* o = ops_.get();
  o->dev = this;
  o->rank = rank;
  o->ctx = ctx;
  o->note_len = uint32_t(note_len);
  if (note_len) memcpy(o->note, note, note_len);
  ucp_ep_h ep = peers_[size_t(rank)].ep;
  ucp_request_param_t rp = with_callback(o);
  rp.cb.send = &ucx_device::on_send_done;
  ucs_status_ptr_t req;
  if (!write) {
    o->kind = op::get;
    req = ucp_get_nbx(ep, local, size, addr, rk->rkey, &rp);
  } else {
    // Complete once delivered, as on every backend (and a notify must not overtake the
    // data): the put, then a flush of the endpoint, which waits for remote completion.
    ucp_request_param_t plain{};
    req = ucp_put_nbx(ep, local, size, addr, rk->rkey, &plain);
    if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
    o->kind = op::flush;
    if (!UCS_PTR_IS_ERR(req)) req = ucp_ep_flush_nbx(ep, &rp);
  }
  if (!UCS_PTR_IS_PTR(req)) finished(o, UCS_PTR_STATUS(req));
  return true;
}

bool ucx_device::try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  return rma(true, rank, const_cast<void*>(src), size, remote_addr, k, note, note_len, ctx);
}

// Rendezvous data into a buffer the target's core named: eager messages (see below).
bool ucx_device::try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr,
                               const void* note, size_t note_len, void* ctx) {
  util::lock_guard<util::spinlock> g(worker_lock_);
  if (peers_[size_t(rank)].dead.load(std::memory_order_relaxed)) {
    push_done(true, ctx, false, rank, nullptr, 0);
    return true;
  }
  stream_locked(rank, src, size, remote_addr, note, note_len, ctx);
  return true;
}

void ucx_device::stream_locked(int rank, const void* src, size_t size, uint64_t remote_addr,
                               const void* note, size_t note_len, void* ctx) {
  peer& p = peers_[size_t(rank)];
  // Eager fragments, not UCP's rendezvous: that completes the sender only on an
  // acknowledgment the receiver sends from a later progress of this device, which a receiver
  // that stops progressing it once its data is in never sends (the core already did the
  // handshake that a rendezvous is for). In chunks, so that the receiver's UCP assembles one
  // chunk at a time (a transient copy of a chunk, not of the whole transfer); eager active
  // messages on an endpoint arrive in order, so the notification rides on the last chunk.
  const size_t chunk = ctx_.stream_chunk();
  stream_state* whole = streams_.get();
  whole->ctx = ctx;
  whole->rank = rank;
  whole->left = size ? (size + chunk - 1) / chunk : 1;
  const char* from = static_cast<const char*>(src);
  size_t off = 0;
  do {
    const size_t len = std::min(chunk, size - off);
    const bool last = off + len == size;
    op* o = ops_.get();
    o->kind = op::stream;
    o->dev = this;
    o->rank = rank;
    o->whole = whole;
    o->header =
        am_header{uint32_t(me_),     kind_stream, uint8_t(last ? note_len : 0), 0, 0, cookie_,
                  remote_addr + off, {}};
    if (last && note_len) memcpy(o->header.note, note, note_len);
    ucp_request_param_t rp = with_callback(o);
    rp.cb.send = &ucx_device::on_send_done;
    rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t req =
        ucp_am_send_nbx(p.ep, 0, &o->header, sizeof(am_header), from + off, len, &rp);
    if (!UCS_PTR_IS_PTR(req)) finished(o, UCS_PTR_STATUS(req));
    off += len;
  } while (off < size);
}

bool ucx_device::try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  return rma(false, rank, dst, size, remote_addr, k, note, note_len, ctx);
}

}  // namespace weft::net::ucx
