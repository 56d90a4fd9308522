// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's one-sided operations: puts and gets done at once by
// cross-memory attach, small puts carried in a cell, and pipelined gets.
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/cma.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::net::shm {

void shm_device::log_refusal(const char* op, int rank, rkey_t k, uint64_t addr, size_t size,
                             const char* why) {
  WEFT_LOG(warn,
           "shm: %s of %zu bytes at 0x%llx in region %llu (generation %llu) of rank %d "
           "refused: %s",
           op, size, static_cast<unsigned long long>(addr), static_cast<unsigned long long>(k.key),
           static_cast<unsigned long long>(k.generation), ctx_.boot().job_rank(rank), why);
}

const char* shm_device::check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t k) {
  return ctx_.regions().check(rank, k, remote_addr, size);
}

// A put (write) or get done at once by the initiator: check and hold the target's region,
// copy (memmove to itself; to a peer through this process's mapping of its shareable
// region, else by cross-memory attach), release, notify the target, and report completion
// at the next poll.
void shm_device::direct_access(bool write, int rank, void* local, size_t size, uint64_t remote_addr,
                               rkey_t k, const void* note, size_t note_len, void* ctx, bool data) {
  const auto done = write ? local_event::put_done : local_event::get_done;
  auto& regions = ctx_.regions();
  uint32_t held = 0;
  const char* why = data ? nullptr : regions.acquire(rank, k, remote_addr, size, held);
  if (why) {
    log_refusal(write ? "put" : "get", rank, k, remote_addr, size, why);
    events_.add(local_event{done, rank, ctx, false, 0, {}});
    return;
  }
  int err = 0;
  bool by_map = false;
  if (size) {
    auto* remote = reinterpret_cast<void*>(remote_addr);
    peer_maps* maps = data ? nullptr : ctx_.maps();
    uint32_t use = 0;
    char* mapped = maps && rank != ctx_.boot().rank()
                       ? maps->map(rank, k, regions.entry(rank, held), remote_addr, use)
                       : nullptr;
    if (rank == ctx_.boot().rank()) {
      write ? memmove(remote, local, size) : memmove(local, remote, size);
    } else if (mapped) {
      write ? memcpy(mapped, local, size) : memcpy(local, mapped, size);
      maps->done(rank, use);
      by_map = true;
    } else if (write) {
      err = cma_write(peers_[size_t(rank)]->pid, local, remote_addr, size);
    } else {
      err = cma_read(peers_[size_t(rank)]->pid, local, remote_addr, size);
    }
  }
  regions.release(rank, held);
  if (!err && rank != ctx_.boot().rank())
    (by_map ? bytes_mapped_ : bytes_cross_memory_).fetch_add(size, std::memory_order_relaxed);
  if (err) {
    copy_failed(write ? "put (shm, cross-memory attach)" : "get (shm, cross-memory attach)", rank,
                err, done, ctx);
    return;
  }
  if (note_len)
    send_note_then(rank, note, note_len, done, ctx, data ? kind_data_note : kind_notify);
  else
    events_.add(local_event{done, rank, ctx, true, 0, {}});
}

// A cross-memory copy to or from `rank` failed: its process is gone (marked so; the
// operation `ctx` completes failed as `done`, and the core says why) or the address was
// wrong (a bug of ours: stop, naming the operation).
void shm_device::copy_failed(const char* op, int rank, int err, local_event::kind_t done,
                             void* ctx) {
  if (err != ESRCH)
    util::fail(op, "rank", std::to_string(ctx_.boot().job_rank(rank)), strerror(err));
  peers_[size_t(rank)]->gone.store(true, std::memory_order_relaxed);
  events_.add(local_event{done, rank, ctx, false, 0, {}});
}

// Whether region k of rank is a peer's shareable memory that this process maps: then a put
// or get into it is one memcpy, whatever WEFT_SHM_RMA says.
bool shm_device::mapped_target(int rank, rkey_t k) {
  return ctx_.maps() && rank != ctx_.boot().rank() && ctx_.regions().shareable(rank, k);
}

// A user's put: by cross-memory attach when permitted and WEFT_SHM_RMA asks for it.
put_mode shm_device::rma_mechanism() const {
  const settings& cfg = ctx_.config();
  return cfg.rma_by_cma && ctx_.cma_permitted() ? put_mode::cma : put_mode::pipeline;
}

bool shm_device::try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  if (rank == ctx_.boot().rank() || size == 0 || rma_mechanism() == put_mode::cma ||
      mapped_target(rank, k)) {
    direct_access(false, rank, dst, size, remote_addr, k, note, note_len, ctx);
    return true;
  }
  // Pipelined: the target streams the region back through one of its channels.
  get_request_msg m{remote_addr,
                    size,
                    k.key,
                    k.generation,
                    reinterpret_cast<uint64_t>(dst),
                    reinterpret_cast<uint64_t>(ctx),
                    uint32_t(note_len),
                    0,
                    {}};
  if (note_len) memcpy(m.note, note, note_len);
  {
    util::lock_guard<util::spinlock> g(gets_lock_);
    gets_.push_back(pending_get{rank, m.ctx, static_cast<char*>(dst), size});
  }
  if (!enqueue(rank, kind_get_request, &m, sizeof(m), nullptr, 0)) {
    take_get(rank, m.ctx);
    return false;
  }
  return true;
}

namespace {
// Whether a put goes as put_small_msg: a few bytes, a key of generation 0, and a note that
// ends with the put's own address and size (the core's notes of puts do).
bool fits_small(size_t size, uint64_t remote_addr, rkey_t k, const void* note, size_t note_len) {
  if (size > put_small_data || note_len != put_small_note + sizeof(put_extent) || k.generation)
    return false;
  const put_extent e{remote_addr, size};
  return memcmp(static_cast<const char*>(note) + put_small_note, &e, sizeof(e)) == 0;
}
}  // namespace

bool shm_device::put_inline(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                            const void* note, size_t note_len, void* ctx) {
  const uint64_t c = reinterpret_cast<uint64_t>(ctx);
  const bool small = fits_small(size, remote_addr, k, note, note_len);
  {  // remembered first: the acknowledgment may come before enqueue returns
    util::lock_guard<util::spinlock> g(gets_lock_);
    puts_.push(put_ring::entry{rank, c});
    if (small) bump_puts_small(1);  // under the lock anyway: a plain add, not a locked one
  }
  bool sent;
  if (small) {
    put_small_msg m{remote_addr, c, k.key, {}};
    memcpy(m.note_head, note, put_small_note);
    sent = enqueue(rank, kind_put_small, &m, sizeof(m), src, size);
  } else {
    put_inline_msg m{remote_addr, k.key, k.generation, c, uint32_t(note_len), 0, {}};
    memcpy(m.note, note, note_len);
    sent = enqueue(rank, kind_put_inline, &m, sizeof(m), src, size);
  }
  if (sent) return true;
  // Refused: forgotten, and counted again when it is posted again.
  util::lock_guard<util::spinlock> g(gets_lock_);
  puts_.take(rank, c);
  if (small) bump_puts_small(-1);
  return false;
}

// The target's side of an inline put: check and hold the region, copy, deliver the note,
// acknowledge. False when the sink refused the note: the cell is offered again later (the
// copy then repeats, the same bytes to the same place).
bool shm_device::apply_put_inline(sink& s, int src, uint64_t remote_addr, rkey_t k, uint64_t ctx,
                                  const char* note, size_t note_len, const char* data,
                                  size_t size) {
  const int me = ctx_.boot().rank();
  uint32_t held = 0;
  const char* why = ctx_.regions().acquire(me, k, remote_addr, size, held);
  if (why) {
    log_refusal("put from a peer", me, k, remote_addr, size, why);
  } else {
    memcpy(reinterpret_cast<void*>(remote_addr), data, size);
    ctx_.regions().release(me, held);
    if (!s.on_remote_notify(src, note, note_len)) return false;
  }
  // Acknowledged by this device's next poll or send, not here: a program that answers the
  // note (a put back, a message) does so first, and its answer no longer waits behind the
  // acknowledgment's cell on both ends (docs/shm.md: the 8-byte notified-put ping-pong
  // 15-25% faster).
  acks_.add(pending_ack{src, why ? 0u : 1u, ctx});
  return true;
}

void shm_device::send_acks() {
  acks_.advance([this](const pending_ack& a) {
    const put_ack_msg m{a.ctx, a.ok, 0};
    return enqueue(a.rank, kind_put_ack, &m, sizeof(m), nullptr, 0);
  });
}

bool shm_device::take_put(int rank, uint64_t ctx) {
  util::lock_guard<util::spinlock> g(gets_lock_);
  return puts_.take(rank, ctx);
}

bool shm_device::take_get(int rank, uint64_t ctx, pending_get* out) {
  util::lock_guard<util::spinlock> g(gets_lock_);
  for (size_t i = 0; i < gets_.size(); ++i) {
    if (gets_[i].rank == rank && gets_[i].ctx == ctx) {
      if (out) *out = gets_[i];
      gets_[i] = gets_.back();
      gets_.pop_back();
      return true;
    }
  }
  return false;
}

// The target of a pipelined get, its region already held: stream the region back.
bool shm_device::serve_get(int rank, const get_request_msg& m, uint32_t held) {
  put_start_msg p{m.dst, m.size, 0, 0, m.ctx, 0, 0, stream_get_reply, {}, 0, 0, 0};
  if (!start_stream(rank, p)) return false;
  outgoing_put o{rank, p.channel, reinterpret_cast<const char*>(m.remote_addr), m.size, 0, nullptr,
                 true, held};
  o.note_len = m.note_len;
  memcpy(o.note, m.note, sizeof(o.note));
  o.piece = p.piece;
  outgoing_.add(o);
  return true;
}

}  // namespace weft::net::shm
