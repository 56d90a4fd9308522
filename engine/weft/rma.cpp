// SPDX-License-Identifier: BSD-3-Clause
// Puts and gets of the Weft engine. A put of at most put_eager bytes travels in one active
// message with its remote callback's data (the seed's eager optimisation; its local
// callback runs at once). A larger put, and every get, is Weft's put or get with
// notification (the seed's future work): one-sided, no receive at the target. A remote
// callback of at most packed_max bytes rides in the notification's tag. A longer one goes
// ahead in an announce message; the target runs the callback when it has both the
// announce and the notification, in whichever order they came (`pairings_`, keyed by
// source rank and the initiator's sequence number; an entry lives only while one half
// waits for the other).
#include <cstring>

#include "engine/weft/weft_engine.hpp"

namespace weft::engine {

int weft_engine::post_rma(int is_get, weft_engine_mem_t lreg, ptrdiff_t ldispl, const void* rreg,
                          ptrdiff_t rdispl, size_t size, int rank, weft_engine_onesided_fn l_fn,
                          void* l_data, weft_engine_tag_t r_tag, const void* r_data,
                          size_t r_size) {
  const char* call = is_get ? "weft_engine_post_get" : "weft_engine_post_put";
  auto op = std::make_unique<rma_op>();
  std::memcpy(&op->rreg, rreg, sizeof(op->rreg));
  const packed_region& rr = op->rreg;
  if (rr.magic != packed_magic)
    return weft_engine_fail(call, "rreg", "?", "not a region packed by a Weft engine");
  if (rr.owner != rank)
    return weft_engine_fail(
        call, "rreg", ("of rank " + std::to_string(rr.owner)).c_str(),
        ("the region belongs to another rank than " + std::to_string(rank)).c_str());
  if (size_t(rdispl) > rr.rmr.size || size > rr.rmr.size - size_t(rdispl))
    return weft_engine_fail(
        call, "rdispl", std::to_string(rdispl).c_str(),
        ("an access of " + std::to_string(size) + " bytes there overruns the remote region of " +
         std::to_string(rr.rmr.size) + " bytes")
            .c_str());
  op->is_get = is_get;
  op->lreg = lreg;
  op->ldispl = ldispl;
  op->rdispl = rdispl;
  op->size = size;
  op->rank = rank;
  op->l_fn = l_fn;
  op->l_data = l_data;
  if (!is_get && size <= attr.put_eager) return put_eager(*op, r_tag, r_data, r_size);
  if (r_tag != WEFT_ENGINE_NO_TAG && r_size <= packed_max) {
    op->packed = true;
    op->packed_low = pack_callback(r_tag, r_data, r_size);
  } else if (r_tag != WEFT_ENGINE_NO_TAG) {  // too long for the tag: an announce
    op->seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
    announce_header h{op->seq, r_tag, uint32_t(r_size)};
    op->r_copy.resize(sizeof(h) + r_size);
    std::memcpy(op->r_copy.data(), &h, sizeof(h));
    if (r_size) std::memcpy(op->r_copy.data() + sizeof(h), r_data, r_size);
  }
  __atomic_fetch_add(is_get ? &stats.gets : &stats.puts, 1, __ATOMIC_RELAXED);
  if (ndeferred_.load(std::memory_order_acquire) == 0) {
    const int rc = start_rma(op);
    if (rc != WEFT_RETRY) return rc;
  }
  deferred_post d;
  d.op = std::move(op);
  return defer(std::move(d));
}

// The announce (once), then the put or get. WEFT_RETRY keeps `op` for a later try.
int weft_engine::start_rma(std::unique_ptr<rma_op>& op) {
  if (op->seq && !op->announced) {
    status_t s =
        send(op->rank, make_tag(msg_kind::announce, 0), op->r_copy.data(), op->r_copy.size());
    if (s.error.is_retry()) return WEFT_RETRY;
    if (s.error.is_error()) {
      report(op->rank, "the announce of a " + std::string(op->is_get ? "get" : "put") +
                           " failed: " + s.error.get_str());
      return WEFT_ERROR;
    }
    op->announced = true;
    __atomic_fetch_add(&stats.announces, 1, __ATOMIC_RELAXED);
  }
  const auto* l = reinterpret_cast<const mem_region*>(op->lreg);
  char* local = static_cast<char*>(l->base) + op->ldispl;
  rma_op* ctx = op.get();
  auto post = [&](auto&& x) {
    x.device(dev_).user_context(ctx);
    if (op->seq)
      x.remote_comp(bulk_rc_).tag(
          make_tag(op->is_get ? msg_kind::get_data : msg_kind::put_data, op->seq));
    else if (op->packed)
      x.remote_comp(bulk_rc_).tag(make_tag(msg_kind::packed, op->packed_low));
    return x();
  };
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  status_t s = op->is_get ? post(post_get_x(op->rank, local, op->size, bulk_cq_,
                                            uint64_t(op->rdispl), op->rreg.rmr))
                          : post(post_put_x(op->rank, local, op->size, bulk_cq_,
                                            uint64_t(op->rdispl), op->rreg.rmr));
  if (s.error.is_posted()) {
    op.release();  // bulk_cq gives it back (on_local_done)
    return WEFT_POSTED;
  }
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (s.error.is_retry()) return WEFT_RETRY;
  s.user_context = ctx;
  s.rank = op->rank;
  on_local_done(s);  // done at once (or failed): the callback, now
  op.release();
  return s.error.is_error() ? WEFT_ERROR : WEFT_POSTED;
}

// A small put: one active message carrying eager_header, the remote callback's data and
// the bytes. The local bytes are copied before this returns, so l_fn runs now.
int weft_engine::put_eager(const rma_op& op, weft_engine_tag_t r_tag, const void* r_data,
                           size_t r_size) {
  eager_header h{op.rreg.id, op.rreg.generation, uint64_t(op.rdispl), r_tag, uint32_t(r_size)};
  thread_local std::vector<char> msg;
  msg.resize(sizeof(h) + r_size + op.size);
  std::memcpy(msg.data(), &h, sizeof(h));
  if (r_size) std::memcpy(msg.data() + sizeof(h), r_data, r_size);
  const auto* l = reinterpret_cast<const mem_region*>(op.lreg);
  if (op.size)
    std::memcpy(msg.data() + sizeof(h) + r_size, static_cast<char*>(l->base) + op.ldispl, op.size);
  const tag_t t = make_tag(msg_kind::put_eager, 0);
  status_t s;
  s.error = errorcode_t::retry;
  if (ndeferred_.load(std::memory_order_acquire) == 0) s = send(op.rank, t, msg.data(), msg.size());
  if (s.error.is_error())
    return s.error.errorcode == errorcode_t::error_peer_dead ? WEFT_ERROR_PEER_DEAD : WEFT_ERROR;
  int rc = WEFT_DONE;
  if (s.error.is_retry()) {
    if (ndeferred_.load() >= attr.deferred) return WEFT_RETRY;
    deferred_post d;
    d.rank = op.rank;
    d.tag = t;
    d.bytes = msg;
    rc = defer(std::move(d));
    if (rc == WEFT_RETRY) return rc;
  }
  __atomic_fetch_add(&stats.puts_eager, 1, __ATOMIC_RELAXED);
  if (op.l_fn) op.l_fn(this, op.lreg, op.ldispl, &op.rreg, op.rdispl, op.size, op.rank, op.l_data);
  return WEFT_DONE;
}

// At the target of a small put: the region checked by its table entry, the bytes copied,
// then the remote callback.
void weft_engine::on_put_eager(const status_t& s) {
  eager_header h;
  const char* p = static_cast<const char*>(s.buf);
  if (s.size < sizeof(h)) return report(s.rank, "a malformed eager put (too short)");
  std::memcpy(&h, p, sizeof(h));
  if (s.size - sizeof(h) < h.r_size) return report(s.rank, "a malformed eager put (data)");
  const size_t n = s.size - sizeof(h) - h.r_size;
  {
    util::lock_guard<util::spinlock> g(regions_lock_);
    const mem_region* r = h.region < regions_.size() ? regions_[h.region] : nullptr;
    if (!r || r->generation != h.generation || h.disp > r->size || n > r->size - h.disp)
      return report(s.rank, "an eager put of " + std::to_string(n) +
                                " bytes to a region not registered here (or out of bounds)");
    std::memcpy(static_cast<char*>(r->base) + h.disp, p + sizeof(h) + h.r_size, n);
  }
  if (h.r_tag == WEFT_ENGINE_NO_TAG) return;
  run_remote(s.rank, "an eager put", h.r_tag, const_cast<char*>(p) + sizeof(h), h.r_size);
}

static uint64_t pairing_key(int rank, uint64_t seq) {
  return uint64_t(uint32_t(rank)) << 40 | (seq & ((uint64_t(1) << 40) - 1));
}

void weft_engine::on_announce(const status_t& s) {
  announce_header h;
  if (s.size < sizeof(h)) return report(s.rank, "a malformed announce (too short)");
  std::memcpy(&h, s.buf, sizeof(h));
  if (s.size - sizeof(h) != h.r_size) return report(s.rank, "a malformed announce (length)");
  const char* data = static_cast<const char*>(s.buf) + sizeof(h);
  pairing ready;
  {
    util::lock_guard<util::spinlock> g(pairing_lock_);
    auto it = pairings_.try_emplace(pairing_key(s.rank, h.seq)).first;
    it->second.have_announce = true;
    it->second.r_tag = h.r_tag;
    it->second.r_data.assign(data, data + h.r_size);
    if (!it->second.have_data) return;
    ready = std::move(it->second);
    pairings_.erase(it);
  }
  run_remote(s.rank, "a put or get", ready.r_tag, ready.r_data.data(), ready.r_data.size());
}

void weft_engine::on_notification(const status_t& s) {
  if (kind_of(s.tag) == msg_kind::packed) {  // the callback's tag and bytes in the tag
    unsigned char data[packed_max];
    uint32_t r_tag;
    const size_t n = unpack_callback(low_of(s.tag), data, r_tag);
    if (n > packed_max) return report(s.rank, "a malformed packed notification");
    return run_remote(s.rank, "a put or get", r_tag, data, n);
  }
  pairing ready;
  {
    util::lock_guard<util::spinlock> g(pairing_lock_);
    auto it = pairings_.try_emplace(pairing_key(s.rank, low_of(s.tag))).first;
    it->second.have_data = true;
    if (!it->second.have_announce) return;
    ready = std::move(it->second);
    pairings_.erase(it);
  }
  run_remote(s.rank, "a put or get", ready.r_tag, ready.r_data.data(), ready.r_data.size());
}

// A remote callback at the target, however its tag and bytes came (`what` names the
// operation in the report of a tag not registered here).
void weft_engine::run_remote(int src, const char* what, uint32_t r_tag, void* data, size_t n) {
  weft_engine_tag_entry_t t;
  if (!tag_entry(r_tag, t))
    return report(src, std::string(what) + " names remote tag " + std::to_string(r_tag) +
                           ", not registered here");
  __atomic_fetch_add(&stats.callbacks, 1, __ATOMIC_RELAXED);
  t.fn(this, r_tag, data, n, src, t.data);
}

// A bulk completion at the initiator: a put or get (rma_op) or a long active message's
// copy (low bit set).
void weft_engine::on_local_done(const status_t& s) {
  const uintptr_t ctx = reinterpret_cast<uintptr_t>(s.user_context);
  if (ctx & 1) {
    std::free(reinterpret_cast<void*>(ctx & ~uintptr_t(1)));
    if (s.error.is_error())
      report(s.rank, "an active message failed: " + std::string(s.error.get_str()));
    return;
  }
  std::unique_ptr<rma_op> op(reinterpret_cast<rma_op*>(ctx));
  if (s.error.is_error()) {
    report(op->rank, std::string(op->is_get ? "a get" : "a put") + " of " +
                         std::to_string(op->size) + " bytes failed: " + s.error.get_str());
    return;
  }
  __atomic_fetch_add(&stats.callbacks, 1, __ATOMIC_RELAXED);
  if (op->l_fn)
    op->l_fn(this, op->lreg, op->ldispl, &op->rreg, op->rdispl, op->size, op->rank, op->l_data);
}

}  // namespace weft::engine
