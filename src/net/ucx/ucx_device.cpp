// SPDX-License-Identifier: BSD-3-Clause
// A UCX device: one UCP worker, its endpoints, and the translation between UCP's callbacks
// and the sink. See ucx_backend.hpp for how each operation maps.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "net/ucx/ucx_backend.hpp"
#include "net/wake.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/process.hpp"

// Last, in a block of its own: its macros route UCX calls through the table.
#include "net/ucx/ucx_lib.hpp"

namespace weft::net::ucx {
namespace {

constexpr const char* call = "ucx backend";

void check(ucs_status_t st, const char* what) {
  if (st != UCS_OK) util::fail(call, what, std::to_string(int(st)), ucs_status_string(st));
}

std::string address_key(int ctx, int index) {
  return "ucx-" + std::to_string(ctx) + "-" + std::to_string(index);
}

// The body of an rkey reply: key, found, base, size, then the packed key.
struct rkey_reply {
  uint64_t key, found, base, size;
};

ucp_request_param_t with_callback(void* user_data) {
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.user_data = user_data;
  return rp;
}

}  // namespace

ucx_device::ucx_device(ucx_context& ctx, int index, const device_config& cfg)
    : ctx_(ctx),
      index_(index),
      me_(ctx.boot().rank()),
      cookie_(ctx.boot().cookie()),
      cell_size_(cfg.cell_size),
      device_generation_(next_device_generation()) {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // worker_lock_ serialises
  check(ucp_worker_create(ctx.handle(), &wp, &worker_), "ucp_worker_create");
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                  UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = 0;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
  hp.cb = &ucx_device::on_am;
  hp.arg = this;
  check(ucp_worker_set_am_recv_handler(worker_, &hp), "ucp_worker_set_am_recv_handler");
  if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;  // then wait by sleeping

  // Every rank publishes its process id and its worker's address; endpoints connect on
  // first use.
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  check(ucp_worker_get_address(worker_, &addr, &addr_len), "ucp_worker_get_address");
  auto& b = ctx.boot();
  const int32_t pid = int32_t(getpid());
  b.put(address_key(ctx.context_id(), index),
        std::string(reinterpret_cast<const char*>(&pid), sizeof(pid)) +
            std::string(reinterpret_cast<char*>(addr), addr_len));
  ucp_worker_release_address(worker_, addr);
  b.fence();
  npeers_ = b.size();
  const int32_t window = int32_t(std::min<size_t>(cfg.inbox_depth, 1 << 20));
  credits_out_ = std::make_unique<send_credits>(size_t(npeers_), window);
  credits_in_ = std::make_unique<recv_credits>(size_t(npeers_), window);
  held_from_.assign(size_t(npeers_), 0);
  blocked_.assign(size_t(npeers_), 0);
  held_cap_ = size_t(window) * size_t(npeers_) + 1024;
  peers_.reset(new peer[size_t(npeers_)]);
  for (int r = 0; r < npeers_; ++r) {
    std::string theirs = b.get(r, address_key(ctx.context_id(), index));
    peer& p = peers_[size_t(r)];
    p.dev = this;
    p.rank = r;
    if (theirs.size() <= sizeof(pid))
      util::fail(call, "address of rank " + std::to_string(r), std::to_string(theirs.size()),
                 "too short to be a UCX worker address");
    memcpy(&p.pid, theirs.data(), sizeof(pid));
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(theirs.data() + sizeof(pid));
    // On this host the process id tells whether a peer lives, and asking UCX for failure
    // detection would rule out its shared-memory transports, which cannot report one.
    p.watch_pid = b.same_host(r);
    ucs_status_t st = UCS_ERR_UNREACHABLE;
    bool undetected = false;  // an endpoint without failure detection had to do
    if (!p.watch_pid && ctx.peer_failure_detection()) {
      ucp_ep_params_t detecting = ep;
      detecting.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      detecting.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      detecting.err_handler.cb = &ucx_device::on_ep_error;
      detecting.err_handler.arg = &p;
      st = ucp_ep_create(worker_, &detecting, &p.ep);
      undetected = st == UCS_ERR_UNREACHABLE;
    }
    if (st == UCS_ERR_UNREACHABLE) st = ucp_ep_create(worker_, &ep, &p.ep);
    if (st != UCS_OK)
      util::fail(call, "endpoint to rank " + std::to_string(r), ucs_status_string(st),
                 "ucp_ep_create failed: no transport reaches that rank (its address cannot be "
                 "reached from here, or UCX_TLS and UCX_NET_DEVICES leave none in common)");
    if (undetected)
      WEFT_LOG(warn,
               "ucx: no transport to rank %d reports peer failures; its death will go "
               "unnoticed",
               r);
  }

  const size_t nsend = 256;
  send_mem_.resize(nsend * (short_header + cell_size_));
  send_ops_.resize(nsend);
  for (uint32_t i = 0; i < nsend; ++i) free_sends_.push_back(uint32_t(nsend - 1 - i));
  events_.reserve(256);
  delivering_.reserve(256);
  notes_out_.reserve(256);
  greet_everyone();
  ctx.attach(index, this);
}

// Connections are made on first use, and making one may need the peer's worker to progress.
// A peer that later stops progressing this device (it waits on another) would then stall
// our first message to it; so every connection is made here, while every rank progresses,
// and a peer that cannot be reached is named now rather than found hanging later.
void ucx_device::greet_everyone() {
  for (int r = 0; r < npeers_; ++r) {
    util::lock_guard<util::spinlock> g(worker_lock_);
    while (!send_locked(r, kind_hello, nullptr, 0, nullptr, 0)) ucp_worker_progress(worker_);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(ctx_.peer_timeout_s());
  for (;;) {
    util::lock_guard<util::spinlock> g(worker_lock_);
    ucp_worker_progress(worker_);
    if (hellos_ == npeers_ && free_sends_.size() == send_ops_.size()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string why =
          "not heard from within WEFT_PEER_TIMEOUT = " + std::to_string(ctx_.peer_timeout_s()) +
          " s (ranks whose endpoint failed:";
      bool any = false;
      for (int r = 0; r < npeers_; ++r)
        if (peers_[size_t(r)].dead) {
          why.append(" ").append(std::to_string(r));
          any = true;
        }
      why.append(any ? "" : " none");
      if (const uint64_t f = foreign_.load())
        why.append("; " + std::to_string(f) + " messages from another job were dropped");
      why.append("); check UCX_TLS, UCX_NET_DEVICES and the network between the hosts");
      util::fail(call, "peers",
                 std::to_string(npeers_ - hellos_) + " of " + std::to_string(npeers_), why);
    }
  }
  ctx_.boot().fence();  // nobody leaves before everyone has heard from everyone
}

ucx_device::~ucx_device() {
  ctx_.detach(index_);
  release_remote_keys();
  util::lock_guard<util::spinlock> g(worker_lock_);
  for (auto& [who, k] : keys_)
    if (k.rkey) ucp_rkey_destroy(k.rkey);
  for (auto& e : events_)
    if (e.release) ucp_am_data_release(worker_, e.data);
  for (auto& e : held_)
    if (e.release) ucp_am_data_release(worker_, e.data);
  closing_ = true;  // what arrives from now on is dropped at once, not held
  // Close every endpoint, flushing what is still queued to live peers; bounded, since a
  // peer may be gone without UCX having noticed.
  std::vector<void*> closing;
  for (int r = 0; r < npeers_; ++r) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = peers_[size_t(r)].dead ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(peers_[size_t(r)].ep, &rp);
    if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!closing.empty() && std::chrono::steady_clock::now() < until) {
    ucp_worker_progress(worker_);
    std::erase_if(closing, [](void* req) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
      ucp_request_free(req);
      return true;
    });
  }
  if (!closing.empty()) {
    // A peer that finalized before we did acknowledges nothing more (shared memory does not
    // notice that it left): released unfinished, so that the worker can be destroyed.
    WEFT_LOG(warn, "ucx: %zu endpoints still closing after 5 s; abandoned", closing.size());
    for (void* req : closing) ucp_request_free(req);
  }
  ucp_worker_destroy(worker_);
}

// ---- sending ------------------------------------------------------------------------------

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

// ---- completions and arrivals (under worker_lock_, from the worker's progress) ------------

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
void ucx_device::wait_for_message(uint32_t timeout_us) {
  wait_armed(*this, timeout_us);
}

bool ucx_device::arm_wake() {
  if (efd_ < 0) return false;
  util::lock_guard<util::spinlock> g(worker_lock_);
  return ucp_worker_arm(worker_) == UCS_OK;  // UCS_ERR_BUSY: events to progress first
}

bool ucx_device::peer_alive(int rank) {
  peer& p = peers_[size_t(rank)];
  if (p.dead.load(std::memory_order_relaxed)) return false;
  if (p.watch_pid && !util::process_exists(p.pid)) {
    declare_dead(rank, UCS_ERR_ENDPOINT_TIMEOUT);
    return false;
  }
  return true;
}

void ucx_device::forget_peer(int rank) {
  declare_dead(rank, UCS_ERR_ENDPOINT_TIMEOUT);
  util::lock_guard<util::spinlock> g(worker_lock_);
  std::erase_if(control_out_, [rank](const control& c) { return c.rank == rank; });
  std::erase_if(notes_out_, [rank](const outgoing_note& n) { return n.rank == rank; });
}

}  // namespace weft::net::ucx
