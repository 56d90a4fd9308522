// SPDX-License-Identifier: BSD-3-Clause
// What an ofi device sends: messages copied into its registered send buffers under the
// peer's credits (answers may overdraw them), the notes of notified operations that wait
// for credit, the core's rendezvous data streamed as messages, and puts and gets as the
// provider's writes and reads.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstring>

#include "net/ofi/ofi_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::net::ofi {

// Copies prefix|a|b into a send buffer and sends it; false when none is free or the
// provider is busy.
bool ofi_device::send_buffer(int rank, const prefix& p, const void* a, size_t alen, const void* b,
                             size_t blen, stream* owner) {
  uint32_t i;
  {
    util::lock_guard<util::spinlock> g(send_lock_);
    if (free_sends_.empty()) return false;
    i = free_sends_.back();
    free_sends_.pop_back();
  }
  char* buf = &send_mem_[size_t(i) * cell_size_];
  memcpy(buf, &p, sizeof(p));
  if (alen) memcpy(buf + sizeof(p), a, alen);
  if (blen) memcpy(buf + sizeof(p) + alen, b, blen);
  send_ops_[i].owner = owner;
  send_ops_[i].rank = rank;
  ssize_t rc = fi_send(ep_, buf, sizeof(p) + alen + blen, send_desc(), peers_[size_t(rank)],
                       &send_ops_[i].fi);
  if (rc == 0) {
    mark_sent_to(rank);
    return true;
  }
  {
    util::lock_guard<util::spinlock> g(send_lock_);
    free_sends_.push_back(i);
  }
  refused(rc, rank, "fi_send");
  return false;
}

bool ofi_device::try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                          size_t len) {
  // A peer taken for dead here gets nothing; the core learns at its next check (50 ms)
  // and fails the post then, so retry until it does.
  if (dead_[size_t(rank)].load(std::memory_order_relaxed)) return false;
  if (!credits_out_->take(rank)) return false;
  if (send_message(rank, make_prefix(kind_message, 1), hdr, hdr_len, payload, len)) return true;
  credits_out_->give_back(rank);
  return false;
}

// Answers overdraw their credit: they are few (one per operation of the peer's) and always
// taken, so a peer whose inbox is full of this rank's refused messages still gets them.
bool ofi_device::try_send_answer(int rank, const void* hdr, size_t hdr_len, const void* payload,
                                 size_t len) {
  if (dead_[size_t(rank)].load(std::memory_order_relaxed)) return false;
  credits_out_->overdraw(rank);
  if (send_message(rank, make_prefix(kind_answer, 1), hdr, hdr_len, payload, len)) return true;
  credits_out_->give_back(rank);
  return false;
}

bool ofi_device::send_message(int rank, const prefix& p, const void* hdr, size_t hdr_len,
                              const void* payload, size_t len) {
  const size_t total = sizeof(p) + hdr_len + len;
  if (total <= ctx_.info()->tx_attr->inject_size && !ctx_.mr_local()) {
    char buf[256];
    if (total <= sizeof(buf)) {
      memcpy(buf, &p, sizeof(p));
      memcpy(buf + sizeof(p), hdr, hdr_len);
      if (len) memcpy(buf + sizeof(p) + hdr_len, payload, len);
      ssize_t rc = fi_inject(ep_, buf, total, peers_[size_t(rank)]);
      if (rc == 0) {
        mark_sent_to(rank);
        return true;
      }
      refused(rc, rank, "fi_inject");
      return false;
    }
  }
  return send_buffer(rank, p, hdr, hdr_len, payload, len, nullptr);
}

bool ofi_device::send_note(int rank, const void* note, size_t len) {
  if (!credits_out_->take(rank)) return false;
  prefix p = make_prefix(kind_notify, 1);
  if (send_buffer(rank, p, note, len, nullptr, 0, nullptr)) return true;
  credits_out_->give_back(rank);
  return false;
}

// Under poll_lock_: the notes that found no credit, in order, each operation completing
// once its note is sent, or failing once its target is dead; a target still out of credits
// keeps its notes (and the rest of this pass cannot reach it either).
size_t ofi_device::send_pending_notes(sink& s) {
  size_t n = 0, kept = 0;
  for (pending_note& p : notes_) {
    const bool dead = dead_[size_t(p.rank)].load(std::memory_order_relaxed);
    if (!dead && !send_note(p.rank, p.note, p.len)) {
      notes_[kept++] = p;
      continue;
    }
    p.write ? s.on_put_local_done(p.ctx, !dead) : s.on_get_done(p.ctx, !dead);
    ++n;
  }
  notes_.resize(kept);
  return n;
}

bool ofi_device::send_definition(int rank, const note_sender::use& u, const void* note,
                                 size_t len) {
  prefix p = make_prefix(kind_note_define, 0);
  note_definition d{uint8_t(u.slot), uint8_t(len), {}, u.generation};
  return send_buffer(rank, p, &d, sizeof(d), note, len, nullptr);
}

// The core's rendezvous data into a buffer the target named: streamed as messages.
bool ofi_device::try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr,
                               const void* note, size_t note_len, void* ctx) {
  {
    auto s = std::make_unique<stream>();
    s->rank = rank;
    s->src = static_cast<const char*>(src);
    s->dst = remote_addr;
    s->size = size;
    s->id = next_stream_.fetch_add(1);
    s->ctx = ctx;
    s->note_len = uint32_t(note_len);
    if (note_len) memcpy(s->note, note, note_len);
    util::lock_guard<util::spinlock> g(streams_lock_);
    new_streams_.push_back(std::move(s));
    return true;
  }
}

bool ofi_device::try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  return rma(true, rank, const_cast<void*>(src), size, remote_addr, k, note, note_len, ctx);
}

bool ofi_device::try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  return rma(false, rank, dst, size, remote_addr, k, note, note_len, ctx);
}

// A write (complete once delivered at the target) or a read into the peer's registration.
bool ofi_device::rma(bool write, int rank, void* local, size_t size, uint64_t remote_addr, rkey_t k,
                     const void* note, size_t note_len, void* ctx) {
  if (k.key == 0 && k.generation == 0) {  // names no registration: never reaches a peer
    util::lock_guard<util::spinlock> g(keys_lock_);
    WEFT_LOG(debug, "ofi: %s with key 0 refused", write ? "put" : "get");
    settle(write, false, ctx, nullptr, 0);
    return true;
  }
  if (rank == me_) return local_rma(write, local, size, remote_addr, k, note, note_len, ctx);
  if (dead_[size_t(rank)].load(std::memory_order_relaxed)) {  // the core fails it at its check
    util::lock_guard<util::spinlock> g(keys_lock_);
    settle(write, false, ctx, nullptr, 0);
    return true;
  }
  remote_key* rk = nullptr;
  {
    util::lock_guard<util::spinlock> g(keys_lock_);
    const char* why = resolve(rank, k, remote_addr, size, &rk);
    if (!why) return false;  // the owner is being asked: the core retries
    if (*why) {
      WEFT_LOG(debug, "ofi: %s of %zu bytes at rank %d refused: %s", write ? "put" : "get", size,
               rank, why);
      settle(write, false, ctx, nullptr, 0);
      return true;
    }
    if (size == 0) {  // nothing to move (and libfabric's shm provider never completes it)
      if (note_len) send_control(rank, kind_notify, note, note_len);
      settle(write, true, ctx, nullptr, 0);
      return true;
    }
    ++rk->in_flight;  // a revocation waits for it
  }
  op* o = rma_ops_.get();
  o->kind = write ? op::write : op::read;
  o->rank = rank;
  o->ctx = ctx;
  o->held = rk;
  uint64_t flags = FI_COMPLETION | (write ? FI_DELIVERY_COMPLETE : 0);
  uint64_t data = 0;
  note_sender::use u;
  if (write && note_len && note_out_ &&
      note_out_->acquire(rank, note, note_len, u, [&](const note_sender::use& d) {
        return send_definition(rank, d, note, note_len);
      })) {
    o->note_slot = int32_t(u.slot);
    flags |= FI_REMOTE_CQ_DATA;
    data = encode_cq_note(me_, u.slot, u.generation);
  }
  if (o->note_slot < 0 && note_len) {
    o->note_len = uint32_t(note_len);
    memcpy(o->note, note, note_len);
  }
  iovec iov{local, size};
  if (ctx_.mr_local() && size)
    o->local_mr = register_local(local, size, write ? FI_WRITE : FI_READ);
  void* desc = o->local_mr ? fi_mr_desc(o->local_mr) : nullptr;
  // rk->base is the owner's answer, written once before the entry became ready.
  fi_rma_iov target{ctx_.virt_addr() ? remote_addr : remote_addr - rk->base, size, k.key};
  fi_msg_rma msg{&iov, &desc, 1, peers_[size_t(rank)], &target, 1, &o->fi, data};
  ssize_t rc = write ? fi_writemsg(ep_, &msg, flags) : fi_readmsg(ep_, &msg, flags);
  if (rc == 0) {
    mark_sent_to(rank);
    return true;
  }
  if (o->note_slot >= 0) note_out_->release(rank, uint32_t(o->note_slot));
  WEFT_LOG(debug, "ofi: %s of %zu bytes with rank %d: %s", write ? "write" : "read", size, rank,
           fab().fi_strerror(int(-rc)));
  if (o->local_mr) fi_close(&o->local_mr->fid);
  rma_ops_.put(o);
  access_finished(rank, rk);
  refused(rc, rank, write ? "fi_writemsg" : "fi_readmsg");
  return false;
}

void ofi_device::advance_streams() {
  {
    util::lock_guard<util::spinlock> g(streams_lock_);
    for (auto& s : new_streams_) streams_.push_back(std::move(s));
    new_streams_.clear();
  }
  const size_t room = cell_size_ - sizeof(prefix) - sizeof(chunk_header);
  for (auto& s : streams_) {
    while (s->sent < s->size || s->chunks == 0) {
      const size_t len = std::min<uint64_t>(room, s->size - s->sent);
      chunk_header h{s->dst + s->sent, s->id, s->size, uint32_t(len), s->note_len, {}};
      memcpy(h.note, s->note, s->note_len);
      prefix p = make_prefix(kind_chunk, 0);
      if (!send_buffer(s->rank, p, &h, sizeof(h), s->src + s->sent, len, s.get())) return;
      s->sent += len;
      ++s->chunks;
    }
  }
}

}  // namespace weft::net::ofi
