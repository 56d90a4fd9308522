// SPDX-License-Identifier: BSD-3-Clause
// Registrations and the checks that keep a stale handle away from the provider. A device
// asks a registration's owner once per (peer, registration) before accessing it; the owner
// remembers who asked, and deregistration revokes each copy. A device acknowledges a
// revocation once its writes with that registration are delivered and its reads done, and
// only then does the owner close the registration. tcp;ofi_rxm breaks the connection when it
// refuses a key, so without this one stale handle would hang every later message to that
// peer.
#include <rdma/fi_domain.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "net/ofi/ofi_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::net::ofi {

// ---- the owner's side (context) -------------------------------------------------------------

local_region ofi_context::register_memory(void* base, size_t size) {
  fid_mr* mr = nullptr;
  // The id names the registration for the owner's checks: never reused, so a stale handle
  // names nothing, and not guessable, so a handle made by hand names nothing either. The
  // provider's key is a counter (some providers take keys of fewer than 8 bytes).
  const uint64_t id = ids_.next();
  int rc = fi_mr_reg(domain_, base, size, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE, 0,
                     next_key(), 0, &mr, nullptr);
  if (rc != 0) util::fail("register_memory", "base", util::to_hex(base), fab().fi_strerror(-rc));
  auto r = std::make_unique<registration>();
  r->mr = mr;
  r->key = fi_mr_key(mr);  // the provider's own with FI_MR_PROV_KEY
  r->base = reinterpret_cast<uint64_t>(base);
  r->size = size;
  local_region m;
  m.base = base;
  m.size = size;
  m.key = r->key;
  m.generation = id;
  m.backend = mr;
  regs_.add(id, std::move(r));
  return m;
}

bool ofi_context::lookup_for_peer(uint64_t id, uint64_t key, const key_asker& who, uint64_t& base,
                                  uint64_t& size) {
  return regs_.ask(id, who, [&](const registration& r) {
    // A forged or mistyped handle may name a live id with another key: refused too.
    if (r.key != key) return false;
    base = r.base;
    size = r.size;
    return true;
  });
}

void ofi_context::deregister_memory(local_region& mr) {
  regs_.revoke(mr.generation);
}

bool ofi_context::region_idle(const local_region& mr) {
  return regs_.idle(mr.generation);
}

void ofi_context::release_region(local_region& mr) {
  if (std::unique_ptr<registration> r = regs_.release(mr.generation)) fi_close(&r->mr->fid);
  mr = local_region{};
}

// ---- the accessing side (device) ------------------------------------------------------------

const char* ofi_device::resolve(int rank, rkey_t k, uint64_t addr, size_t size, remote_key** out) {
  auto [it, fresh] = keys_.try_emplace({rank, k.generation});
  remote_key& rk = it->second;
  if (fresh) {
    rk.id = k.generation;
    rk.key = k.key;
    key_request q{k.generation, k.key, device_generation_};
    send_control(rank, kind_key_request, &q, sizeof(q));
    return nullptr;
  }
  switch (rk.state) {
    case remote_key::fetching: return nullptr;
    case remote_key::refused: return "the region has been deregistered";
    case remote_key::ready: break;
  }
  if (rk.key != k.key) return "the handle's key is not its region's";
  if (addr < rk.base || size > rk.size || addr - rk.base > rk.size - size)
    return "the access lies outside the region";
  if (out) *out = &rk;
  return "";
}

const char* ofi_device::check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t k) {
  if (k.key == 0 && k.generation == 0) return "key 0 names no registered region";
  if (rank == me_) {
    const char* why = ctx_.local_access(k.generation, k.key, remote_addr, size, [] {});
    return *why ? why : nullptr;
  }
  util::lock_guard<util::spinlock> g(keys_lock_);
  const char* why = resolve(rank, k, remote_addr, size, nullptr);  // asks the owner early
  return why && *why ? why : nullptr;
}

void ofi_device::access_finished(int rank, remote_key* rk) {
  util::lock_guard<util::spinlock> g(keys_lock_);
  if (--rk->in_flight == 0 && rk->ack_owed) {
    rk->ack_owed = false;
    revoke_ack a{rk->id, device_generation_};
    send_control(rank, kind_revoke_ack, &a, sizeof(a));
  }
}

void ofi_device::settle(bool write, bool ok, void* ctx, const void* note, size_t note_len) {
  settled d{write, ok, ctx, uint32_t(note_len), {}};
  if (note_len) memcpy(d.note, note, note_len);
  settled_.push_back(d);
  backlogged_.store(true, std::memory_order_relaxed);
}

// RMA within this process is a copy: libfabric's shm provider answers every write and read
// to its own process with -FI_EAGAIN, and no provider does it cheaper than memcpy.
bool ofi_device::local_rma(bool write, void* local, size_t size, uint64_t addr, rkey_t k,
                           const void* note, size_t note_len, void* ctx) {
  const char* why = ctx_.local_access(k.generation, k.key, addr, size, [&] {
    if (write)
      memcpy(reinterpret_cast<void*>(addr), local, size);
    else
      memcpy(local, reinterpret_cast<const void*>(addr), size);
  });
  util::lock_guard<util::spinlock> g(keys_lock_);
  settle(write, !*why, ctx, note, *why ? 0 : note_len);
  return true;
}

void ofi_device::queue_revoke(int rank, uint64_t id) {
  util::lock_guard<util::spinlock> g(keys_lock_);
  send_control(rank, kind_revoke, &id, sizeof(id));
}

// Under keys_lock_. Sent at once when nothing waits before it, else queued behind.
void ofi_device::send_control(int rank, uint8_t kind, const void* body, size_t len) {
  if (control_out_.empty()) {
    prefix p = make_prefix(kind, 0);
    if (send_buffer(rank, p, body, len, nullptr, 0, nullptr)) return;
  }
  control c{rank, kind, uint8_t(len), {}};
  memcpy(c.body, body, len);
  control_out_.push_back(c);
  backlogged_.store(true, std::memory_order_relaxed);
}

// From poll: queued control messages, then the accesses settled since the last poll.
size_t ofi_device::flush_control(sink& s) {
  // Every poll comes here: no lock while there is nothing (a push seen late waits one poll).
  if (!backlogged_.load(std::memory_order_relaxed)) return 0;
  std::vector<settled> done;
  {
    util::lock_guard<util::spinlock> g(keys_lock_);
    size_t sent = 0;
    for (; sent < control_out_.size(); ++sent) {
      const control& c = control_out_[sent];
      if (dead_[size_t(c.rank)].load(std::memory_order_relaxed)) continue;  // nobody to tell
      prefix p = make_prefix(c.kind, 0);
      if (!send_buffer(c.rank, p, c.body, c.len, nullptr, 0, nullptr)) break;
    }
    control_out_.erase(control_out_.begin(), control_out_.begin() + long(sent));
    if (control_out_.empty()) backlogged_.store(false, std::memory_order_relaxed);
    if (settled_.empty()) return sent;
    done.swap(settled_);
  }
  for (const settled& d : done) {
    if (d.note_len) deliver_note(s, me_, d.note, d.note_len);  // this process was the target
    if (d.write)
      s.on_put_local_done(d.ctx, d.ok);
    else
      s.on_get_done(d.ctx, d.ok);
  }
  return done.size();
}

namespace {
// A registration message's body is exactly one T; anything else is malformed.
template <typename T>
bool read_body(const char* body, size_t len, T& out) {
  if (len != sizeof(T)) return false;
  memcpy(&out, body, sizeof(T));
  return true;
}

}  // namespace

// A control message from `src` (under poll_lock_).
void ofi_device::key_message(int src, uint8_t kind, const char* body, size_t len) {
  switch (kind) {
    case kind_key_request: {
      key_request q;
      if (!read_body(body, len, q)) break;
      key_reply r{q.id, 0, 0, 0, {}};
      r.found = ctx_.lookup_for_peer(q.id, q.key, key_asker{src, index_, q.device_generation},
                                     r.base, r.size);
      util::lock_guard<util::spinlock> g(keys_lock_);
      send_control(src, kind_key_reply, &r, sizeof(r));
      return;
    }
    case kind_key_reply: {
      key_reply r;
      if (!read_body(body, len, r)) break;
      util::lock_guard<util::spinlock> g(keys_lock_);
      auto it = keys_.find({src, r.id});
      // Not asked, or revoked meanwhile (the revocation came first): nothing to learn.
      if (it == keys_.end() || it->second.state != remote_key::fetching) return;
      it->second.state = r.found ? remote_key::ready : remote_key::refused;
      it->second.base = r.base;
      it->second.size = r.size;
      return;
    }
    case kind_revoke: {
      uint64_t id;
      if (!read_body(body, len, id)) break;
      util::lock_guard<util::spinlock> g(keys_lock_);
      remote_key& rk = keys_[{src, id}];
      rk.id = id;
      rk.state = remote_key::refused;
      if (rk.in_flight) {
        rk.ack_owed = true;
      } else {
        revoke_ack a{id, device_generation_};
        send_control(src, kind_revoke_ack, &a, sizeof(a));
      }
      return;
    }
    case kind_revoke_ack: {
      revoke_ack a;
      if (!read_body(body, len, a)) break;
      ctx_.revoke_acknowledged(a.id, key_asker{src, index_, a.device_generation});
      return;
    }
  }
  WEFT_LOG(error,
           "ofi: a malformed registration message (kind %u, %zu bytes) from rank %d, dropped",
           unsigned(kind), len, src);
}

}  // namespace weft::net::ofi
