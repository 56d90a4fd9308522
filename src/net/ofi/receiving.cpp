// SPDX-License-Identifier: BSD-3-Clause
// What reaches an ofi device: the completion queue's entries (poll), each received message
// checked (cookie, source, length) and handed to the sink or held when the sink refuses it
// (offered again oldest first, per peer in order), the notifications of peers' writes, and
// the completions of this device's own sends, writes and reads.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstring>

#include "net/ofi/ofi_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::net::ofi {

void ofi_device::deliver_note(sink& s, int rank, const void* note, size_t len, bool credited,
                              bool answer) {
  if ((answer || may_offer(rank)) && s.on_remote_notify(rank, note, len)) {
    if (credited) taken_from(rank);
    return;
  }
  held_msg h{rank, UINT32_MAX, uint32_t(len), credited, {}};
  memcpy(h.note, note, len);
  hold(h);
}

void ofi_device::taken_from(int rank) {
  if (const uint32_t n = credits_in_->taken(rank)) {
    util::lock_guard<util::spinlock> g(keys_lock_);
    send_control(rank, kind_credit, &n, sizeof(n));
  }
}

// Offers what the sink refused again, oldest first; a peer's entries after one the sink
// still refuses wait for the next pass.
size_t ofi_device::retry_held(sink& s) {
  size_t n = 0;
  std::fill(blocked_.begin(), blocked_.end(), 0);
  std::deque<held_msg> kept;
  for (const held_msg& h : held_) {
    bool taken = false;
    if (!blocked_[size_t(h.rank)]) {
      if (h.buffer == UINT32_MAX) {
        taken = s.on_remote_notify(h.rank, h.note, h.len);
      } else {
        const char* body = &recv_mem_[size_t(h.buffer) * cell_size_] + sizeof(prefix);
        taken = s.on_message(h.rank, body, h.len);
        if (taken) post_recv(h.buffer);
      }
    }
    if (!taken) {
      blocked_[size_t(h.rank)] = 1;
      kept.push_back(h);
      continue;
    }
    --held_from_[size_t(h.rank)];
    if (h.credited) taken_from(h.rank);
    ++n;
  }
  held_.swap(kept);
  return n;
}

// A message that does not carry this job's cookie: from a process of another job that
// holds this endpoint's address by mistake. Dropped unread; the first is a warning.
void ofi_device::foreign_message(uint32_t claimed_src, size_t len) {
  const bool first = foreign_.fetch_add(1, std::memory_order_relaxed) == 0;
  WEFT_LOG_AT(first ? util::log_level::warn : util::log_level::debug,
              "ofi device %d: a message of %zu bytes from another job (its cookie is not this "
              "job's; it claims to be from rank %u), dropped%s",
              index_, len, claimed_src, first ? "; later ones are logged at debug level" : "");
}

bool ofi_device::received(sink& s, op* o, size_t len) {
  const char* buf = &recv_mem_[size_t(o->buffer) * cell_size_];
  prefix p;
  if (len < sizeof(p)) {
    WEFT_LOG(error, "ofi: a message of %zu bytes, shorter than its prefix, dropped", len);
    return true;
  }
  memcpy(&p, buf, sizeof(p));
  if (p.cookie != cookie_) {
    foreign_message(p.src, len);
    return true;
  }
  const char* body = buf + sizeof(p);
  const size_t blen = len - sizeof(p);
  if (p.src >= peers_.size()) {
    WEFT_LOG(error, "ofi: a message names sender %u of %zu ranks, dropped", p.src, peers_.size());
    return true;
  }
  const int src = int(p.src);
  heard_from(src);
  if (p.kind == kind_expelled) {
    if (declare_dead(src, gone_expelled))
      WEFT_LOG(warn, "ofi: rank %d has taken this rank for dead and expelled it", src);
    return true;
  }
  // A peer this device took for dead, heard from again (it was stopped, or cut off): what
  // it sends is dropped, since its operations with this rank have failed here already, and
  // it is told, so that its own operations with this rank fail too.
  if (dead_[size_t(src)].load(std::memory_order_relaxed) &&
      gone_why_[size_t(src)].load(std::memory_order_relaxed) == gone_silent && p.kind != kind_bye &&
      p.kind != kind_bye_ack) {
    expel(src);
    return true;
  }
  switch (p.kind) {
    case kind_message:
    case kind_answer:  // an answer passes the sender's held messages, as deliver_note's does
      if ((p.kind == kind_answer || may_offer(src)) && s.on_message(src, body, blen)) {
        if (p.credited) taken_from(src);
        return true;
      }
      hold(held_msg{src, o->buffer, uint32_t(blen), p.credited != 0, {}});
      return false;
    case kind_credit: {
      uint32_t n;
      if (blen != sizeof(n)) break;
      memcpy(&n, body, sizeof(n));
      credits_out_->grant(src, n);
      return true;
    }
    case kind_ping: {
      prefix pong = make_prefix(kind_pong, 0);
      send_buffer(src, pong, nullptr, 0, nullptr, 0, nullptr);  // lost: the next ping asks again
      return true;
    }
    case kind_pong: return true;
    case kind_bye: {
      // Answered unless this device has said goodbye to the peer itself: that serves as
      // the answer, and the peer's endpoint may already be gone.
      const uint8_t was = talk_[size_t(src)].fetch_or(bye_heard, std::memory_order_relaxed);
      if (!(was & bye_sent)) {
        prefix ack = make_prefix(kind_bye_ack, 0);
        send_buffer(src, ack, nullptr, 0, nullptr, 0, nullptr);  // lost: the peer times out
      }
      return true;
    }
    case kind_bye_ack:
      talk_[size_t(src)].fetch_or(bye_answered, std::memory_order_relaxed);
      return true;
    case kind_key_request:
    case kind_key_reply:
    case kind_revoke:
    case kind_revoke_ack: key_message(src, p.kind, body, blen); return true;
    case kind_notify:
      ++notify_counts_.by_message;
      deliver_note(s, src, body, blen, p.credited != 0);
      return true;
    case kind_note_define: {
      const void* note;
      size_t note_len, released;
      if (!note_in_.define(src, body, blen, note, note_len, released)) break;
      for (size_t i = 0; i < released; ++i) deliver_note(s, src, note, note_len);
      return true;
    }
    case kind_chunk: {
      chunk_header h;
      if (blen < sizeof(h)) break;
      memcpy(&h, body, sizeof(h));
      if (h.len != blen - sizeof(h) || h.note_len > max_note_size) break;
      if (h.len) memcpy(reinterpret_cast<void*>(h.dst), body + sizeof(h), h.len);
      auto& in = incoming_[{src, h.stream}];
      in.got += h.len;
      in.note_len = h.note_len;
      memcpy(in.note, h.note, h.note_len);
      if (in.got >= h.total) {
        incoming entry = in;
        incoming_.erase({src, h.stream});
        // Rendezvous data answers our clear-to-send: its note passes held messages.
        if (entry.note_len) deliver_note(s, src, entry.note, entry.note_len, false, true);
      }
      return true;
    }
  }
  WEFT_LOG(error, "ofi: a malformed message (kind %u, %zu bytes) from rank %d, dropped",
           unsigned(p.kind), len, src);
  return true;
}

// A peer's write with CQ data: the notification of a put, by slot.
void ofi_device::remote_write(sink& s, uint64_t data) {
  cq_note n;
  if (!decode_cq_note(data, int(peers_.size()), n)) {
    WEFT_LOG(error, "ofi: a write with CQ data %#llx that names no notification, dropped",
             static_cast<unsigned long long>(data));
    return;
  }
  heard_from(n.rank);
  const void* note;
  size_t len;
  switch (note_in_.lookup(n, note, len)) {
    case note_receiver::result::deliver:
      ++notify_counts_.by_data;
      deliver_note(s, n.rank, note, len);
      return;
    case note_receiver::result::parked:
      ++notify_counts_.by_data;
      ++notify_counts_.parked;
      return;
    case note_receiver::result::stale:
      WEFT_LOG(error,
               "ofi: rank %d's write names slot %u generation %u, older than the slot's; "
               "notification dropped",
               n.rank, n.slot, n.generation);
      return;
  }
}

void ofi_device::complete(sink& s, op* o, bool ok) {
  switch (o->kind) {
    case op::recv: post_recv(o->buffer); return;
    case op::send: {
      if (!ok && declare_dead(o->rank, gone_send_failed))
        WEFT_LOG(warn, "ofi: a send to rank %d failed; taking it for dead", o->rank);
      stream* owner = o->owner;
      {
        util::lock_guard<util::spinlock> g(send_lock_);
        free_sends_.push_back(o->buffer);
      }
      if (owner && ++owner->completed == owner->chunks && owner->sent == owner->size) {
        s.on_put_local_done(owner->ctx, ok);
        auto it =
            std::find_if(streams_.begin(), streams_.end(),
                         [owner](const std::unique_ptr<stream>& x) { return x.get() == owner; });
        if (it != streams_.end()) streams_.erase(it);
      }
      return;
    }
    case op::write:
    case op::read: {
      // Handed back by the provider: only now may the buffer go back to its owner, also when
      // the peer was taken for dead meanwhile (then it is a failure, whatever it did).
      if (o->local_mr) fi_close(&o->local_mr->fid);
      if (o->note_slot >= 0) note_out_->release(o->rank, uint32_t(o->note_slot));
      ok = ok && !dead_[size_t(o->rank)].load(std::memory_order_relaxed);
      access_finished(o->rank, o->held);
      if (ok && o->note_len && !send_note(o->rank, o->note, o->note_len)) {
        pending_note n{o->rank, o->note_len, {}, o->ctx, o->kind == op::write};
        memcpy(n.note, o->note, o->note_len);
        notes_.push_back(n);  // completes in send_pending_notes
      } else if (o->kind == op::write) {
        s.on_put_local_done(o->ctx, ok);
      } else {
        s.on_get_done(o->ctx, ok);
      }
      rma_ops_.put(o);
      return;
    }
  }
}

size_t ofi_device::poll(sink& s, size_t max) {
  if (!poll_lock_.try_lock()) return 0;
  size_t n = notes_.empty() ? 0 : send_pending_notes(s);
  if (!to_repost_.empty()) {
    std::vector<uint32_t> again;
    again.swap(to_repost_);
    for (uint32_t i : again) post_recv(i);
  }
  advance_streams();
  n += flush_control(s);
  if (!held_.empty()) n += retry_held(s);
  fi_cq_data_entry e[16];
  while (n < max && held_.size() < held_cap_) {
    ssize_t got = fi_cq_read(cq_, e, std::min<size_t>(16, max - n));
    if (got == -FI_EAGAIN) break;
    if (got == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) != 1) break;
      auto* o = static_cast<op*>(err.op_context);
      if (!o) {  // a peer's write into this process (no operation of ours)
        WEFT_LOG(warn, "ofi: a remote write failed: %s",
                 fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0));
        ++n;
        continue;
      }
      log_failure(*o, err);
      // A put or get never reaches the provider with a key its owner has not confirmed
      // (remote_keys.cpp), so one that fails lost its connection: the peer is gone, and the
      // core reports the operation as such rather than as a refused region.
      if ((o->kind == op::write || o->kind == op::read) && o->rank >= 0 &&
          declare_dead(o->rank, err.err > 0 ? err.err : FI_EIO))
        WEFT_LOG(warn, "ofi: rank %d taken for dead: a put or get with it failed", o->rank);
      complete(s, o, false);
      ++n;
      continue;
    }
    if (got < 0) check(got, "fi_cq_read");
    for (ssize_t i = 0; i < got; ++i) {
      auto* o = static_cast<op*>(e[i].op_context);
      // A peer's write with CQ data. Not one of ours that completed: the sockets provider
      // flags our own write's completion FI_REMOTE_CQ_DATA too, and tcp sets no FI_RMA on
      // a peer's write.
      if ((e[i].flags & FI_REMOTE_CQ_DATA) &&
          !(e[i].flags & (FI_WRITE | FI_READ | FI_SEND | FI_MSG))) {
        remote_write(s, e[i].data);
        // With FI_RX_CQ_DATA the write used a posted receive (the context): post it again.
        // Otherwise the context means nothing (libfabric's shm provider leaves 0x1 there).
        if (o && rx_cq_data_) complete(s, o, true);
        continue;
      }
      if (o->kind == op::recv && !received(s, o, e[i].len)) continue;  // held: not reposted
      complete(s, o, true);
    }
    n += size_t(got);
  }
  poll_lock_.unlock();
  return n;
}

// Sleeps on the completion queue's wait fd once fi_trywait says nothing is pending; a
// provider without one sleeps up to 50 us at a time instead.

}  // namespace weft::net::ofi
