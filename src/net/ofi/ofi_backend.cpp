// SPDX-License-Identifier: BSD-3-Clause
#include "net/ofi/ofi_backend.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "net/wake.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

namespace weft::net::ofi {
namespace {

constexpr const char* call = "ofi backend";

void check(ssize_t rc, const char* what) {
  if (rc != 0) util::fail(call, what, std::to_string(rc), fab().fi_strerror(int(-rc)));
}

constexpr size_t send_cells = 256;             // send buffers per device
size_t recv_cells(const device_config& cfg) {  // receives kept posted per device
  return std::max<size_t>(16, std::min<size_t>(cfg.inbox_depth, 256));
}

std::string key(int ctx, int index) {
  return "ofi-" + std::to_string(ctx) + "-" + std::to_string(index);
}

}  // namespace

// ---- context ------------------------------------------------------------------------------
// What Weft asks of a provider (also what weft-info lists providers by).
fi_info* weft_hints() {
  fi_info* hints = fab().fi_dupinfo(nullptr);
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  // FI_RX_CQ_DATA: a write's CQ data may consume a posted receive (verbs asks for that).
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  // Messages between two endpoints arrive in the order they were sent (Weft's matching
  // does not overtake).
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  return hints;
}

ofi_context::ofi_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id)
    : boot_(std::move(boot)), context_id_(context_id) {
  fi_info* hints = weft_hints();
  const std::string prov = util::get_text(util::setting::ofi_provider);
  if (!prov.empty()) hints->fabric_attr->prov_name = strdup(prov.c_str());
  int rc = fab().fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info_);
  fab().fi_freeinfo(hints);
  if (rc != 0 || !info_)
    util::fail(call, "WEFT_OFI_PROVIDER", prov.empty() ? "<any>" : prov,
               std::string("no provider offers reliable datagrams with messages and RMA here (") +
                   fab().fi_strerror(-rc) + "); fi_info -t FI_EP_RDM lists what there is");
  if (prov.empty()) {
    // The first answer is libfabric's preference; shared memory only reaches this host.
    for (fi_info* i = info_; i; i = i->next)
      if (strcmp(i->fabric_attr->prov_name, "shm") != 0 || boot_->local_size() == boot_->size()) {
        fi_info* chosen = fab().fi_dupinfo(i);
        fab().fi_freeinfo(info_);
        info_ = chosen;
        break;
      }
  }
  // Room for messages that arrive before a receive is posted again: the sockets provider's
  // default overflowed thousands of times a run under four threads (each time it holds the
  // message back). Only there: ofi_rxm refuses an endpoint that asks for more than its own.
  if (strcmp(info_->fabric_attr->prov_name, "sockets") == 0) {
    if (info_->rx_attr->total_buffered_recv == 0) info_->rx_attr->total_buffered_recv = 64 << 20;
    warn_small_tcp_receive_buffers();
  }
  virt_addr_ = info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
  prov_key_ = info_->domain_attr->mr_mode & FI_MR_PROV_KEY;
  mr_local_ =
      (info_->domain_attr->mr_mode & FI_MR_LOCAL) || util::get_flag(util::setting::ofi_mr_local);
  cq_data_ = info_->domain_attr->cq_data_size >= sizeof(uint64_t) &&
             boot_->size() <= int(max_cq_data_ranks) && util::get_flag(util::setting::ofi_cq_data);
  peer_timeout_ns_ = int64_t(*util::get_size(util::setting::peer_timeout)) * 1000000000;
  check(fab().fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  WEFT_LOG(info, "ofi context %d: %s", context_id_, describe().c_str());
}

// The sockets provider waits for a whole header before it reads any of it. A connection
// whose receive buffer is held by the few bytes of a header's start (the kernel charges the
// whole packet they came in) advertises no window, the rest never comes, and both sides
// stall for good. Buffers that start at 1 MiB leave room; the provider sets none on the
// sockets it accepts (FI_SOCKETS_MAX_BUF_SZ reaches only those it connects).
void ofi_context::warn_small_tcp_receive_buffers() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_rmem");
  size_t low = 0, initial = 0, most = 0;
  if (!(f >> low >> initial >> most) || initial >= (size_t(1) << 20)) return;
  WEFT_LOG(warn,
           "ofi: the sockets provider can stall under load with TCP receive buffers that start "
           "at %zu bytes (net.ipv4.tcp_rmem); 1 MiB avoids it: sysctl -w "
           "net.ipv4.tcp_rmem=\"%zu 1048576 %zu\" (docs/backends.md)",
           initial, low, std::max<size_t>(most, size_t(1) << 20));
}

ofi_context::~ofi_context() {
  // Registrations never deregistered: the domain does not close while they are open.
  regs_.for_each([](registration& r) { fi_close(&r.mr->fid); });
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) fab().fi_freeinfo(info_);
}

std::string ofi_context::describe() const {
  return std::string("ofi: provider ") + info_->fabric_attr->prov_name + ", fabric " +
         info_->fabric_attr->name + ", domain " + info_->domain_attr->name + ", inject " +
         std::to_string(info_->tx_attr->inject_size) + " B, addresses " +
         (virt_addr_ ? "virtual" : "offsets") + (mr_local_ ? ", local buffers registered" : "") +
         ", put notifications by " + (cq_data_ ? "remote CQ data" : "message");
}

std::unique_ptr<device> ofi_context::alloc_device(int index, const device_config& cfg) {
  return std::make_unique<ofi_device>(*this, index, cfg);
}

// ---- device -------------------------------------------------------------------------------
ofi_device::ofi_device(ofi_context& ctx, int index, const device_config& cfg)
    : ctx_(ctx),
      index_(index),
      me_(ctx.boot().rank()),
      cell_size_(cfg.cell_size),
      device_generation_(next_device_generation()),
      cookie_(ctx.boot().cookie()),
      note_in_(ctx.boot().size()) {
  if (ctx.cq_data()) note_out_ = std::make_unique<note_sender>(ctx.boot().size());
  fi_info* info = ctx.info();
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  // Every posted receive and send buffer, the provider's queue of writes and reads, and the
  // peers' notified writes fit many times over: a provider whose queue overflows may drop
  // completions (sockets does), and its default size is its own choice.
  cq_attr.size = std::max<size_t>(8192, 4 * (recv_cells(cfg) + send_cells + info->tx_attr->size));
  // A wait fd, for blocking progress, where the provider has one; none where it does not.
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(ctx.domain(), &cq_attr, &cq_, nullptr) == 0) {
    if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) wait_fd_ = -1;
  } else {
    cq_attr.wait_obj = FI_WAIT_NONE;
    check(fi_cq_open(ctx.domain(), &cq_attr, &cq_, nullptr), "fi_cq_open");
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  check(fi_av_open(ctx.domain(), &av_attr, &av_, nullptr), "fi_av_open");
  check(fi_endpoint(ctx.domain(), info, &ep_, nullptr), "fi_endpoint");
  check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
  check(fi_enable(ep_), "fi_enable");
  ctx.attach(index, this);
  rx_cq_data_ = info->mode & FI_RX_CQ_DATA;

  // Addresses: every rank publishes its endpoint's name, then inserts all in rank order,
  // so that a peer's fi_addr_t is its rank's entry.
  char name[256];
  size_t len = sizeof(name);
  check(fi_getname(&ep_->fid, name, &len), "fi_getname");
  auto& b = ctx.boot();
  b.put(key(ctx.context_id(), index), std::string(name, len));
  b.fence();
  const int n = b.size();
  peers_.resize(size_t(n));
  dead_.reset(new std::atomic<bool>[size_t(n)]);
  gone_why_.reset(new std::atomic<int>[size_t(n)]);
  talk_.reset(new std::atomic<uint8_t>[size_t(n)]);
  live_.reset(new liveness[size_t(n)]);
  for (int r = 0; r < n; ++r) {
    dead_[size_t(r)].store(false);
    gone_why_[size_t(r)].store(0);
    talk_[size_t(r)].store(0);
    std::string theirs = b.get(r, key(ctx.context_id(), index));
    if (fi_av_insert(av_, theirs.data(), 1, &peers_[size_t(r)], 0, nullptr) != 1)
      util::fail(call, "address of rank " + std::to_string(r),
                 std::to_string(theirs.size()) + " bytes",
                 "fi_av_insert refused it (a peer with another provider?)");
  }

  const size_t nrecv = recv_cells(cfg);
  const size_t nsend = send_cells;
  recv_mem_.resize(nrecv * cell_size_);
  send_mem_.resize(nsend * cell_size_);
  recv_ops_.resize(nrecv);
  send_ops_.resize(nsend);
  if (ctx.mr_local()) {
    recv_mr_ = register_local(recv_mem_.data(), recv_mem_.size(), FI_RECV);
    send_mr_ = register_local(send_mem_.data(), send_mem_.size(), FI_SEND);
  }
  for (uint32_t i = 0; i < nsend; ++i) {
    send_ops_[i].kind = op::send;
    send_ops_[i].buffer = i;
    free_sends_.push_back(uint32_t(nsend - 1 - i));
  }
  held_from_.assign(peers_.size(), 0);
  blocked_.assign(peers_.size(), 0);
  const int32_t window = int32_t(std::min<size_t>(cfg.inbox_depth, 1 << 20));
  credits_out_ = std::make_unique<send_credits>(peers_.size(), window);
  credits_in_ = std::make_unique<recv_credits>(peers_.size(), window);
  held_cap_ = nrecv + size_t(window) * peers_.size() + 1024;
  for (uint32_t i = 0; i < nrecv; ++i) {
    recv_ops_[i].kind = op::recv;
    recv_ops_[i].buffer = i;
    post_recv(i);
  }
  b.fence();  // nobody sends before every receive buffer is posted
}

ofi_device::~ofi_device() {
  WEFT_LOG(info,
           "ofi device %d: notifications received: %llu by CQ data (%llu waited for their "
           "definition), %llu by message",
           index_, static_cast<unsigned long long>(notify_counts_.by_data),
           static_cast<unsigned long long>(notify_counts_.parked),
           static_cast<unsigned long long>(notify_counts_.by_message));
  ctx_.detach(index_);
  release_remote_keys();
  flush_to_peers();
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (recv_mr_) fi_close(&recv_mr_->fid);
  if (send_mr_) fi_close(&send_mr_->fid);
}

fid_mr* ofi_device::register_local(void* buf, size_t len, uint64_t access) {
  fid_mr* mr = nullptr;
  check(fi_mr_reg(ctx_.domain(), buf, len, access, 0, ctx_.next_key(), 0, &mr, nullptr),
        "fi_mr_reg(local)");
  return mr;
}

size_t ofi_device::max_inject_size() const {
  size_t inject = ctx_.info()->tx_attr->inject_size;
  return inject > sizeof(prefix) ? inject - sizeof(prefix) : 0;
}

void* ofi_device::send_desc() const {
  return send_mr_ ? fi_mr_desc(send_mr_) : nullptr;
}

void ofi_device::post_recv(uint32_t i) {
  void* desc = recv_mr_ ? fi_mr_desc(recv_mr_) : nullptr;
  ssize_t rc = fi_recv(ep_, &recv_mem_[size_t(i) * cell_size_], cell_size_, desc, FI_ADDR_UNSPEC,
                       &recv_ops_[i].fi);
  if (rc == -FI_EAGAIN)
    to_repost_.push_back(i);
  else
    check(rc, "fi_recv");
}

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
      if (may_offer(src) && s.on_message(src, body, blen)) {
        if (p.credited) taken_from(src);
        return true;
      }
      hold(held_msg{src, o->buffer, uint32_t(blen), p.credited != 0, {}});
      return false;
    case kind_answer:
      if (s.on_message(src, body, blen)) {
        if (p.credited) taken_from(src);
        return true;
      }
      hold(held_msg{src, o->buffer, uint32_t(blen), p.credited != 0, {}});  // not expected
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

void ofi_device::heard_from(int rank) {
  // Only the poller (under poll_lock_) writes it: a plain store, no locked read-modify-write.
  auto& heard = live_[size_t(rank)].heard;
  heard.store(heard.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void ofi_device::refused(ssize_t rc, int rank, const char* what) {
  switch (rc) {
    case -FI_EAGAIN: return;
    case -FI_ENOENT:  // the sockets provider's answer when it cannot connect
    case -FI_ECONNREFUSED:
    case -FI_ECONNRESET:
    case -FI_ECONNABORTED:
    case -FI_ENOTCONN:
    case -FI_EHOSTUNREACH:
    case -FI_ENETUNREACH:
    case -FI_ETIMEDOUT:
      if (declare_dead(rank, int(-rc)))
        WEFT_LOG(warn, "ofi: %s to rank %d: %s; taking it for dead", what, rank,
                 fab().fi_strerror(int(-rc)));
      return;
    default:
      util::fail(call, std::string(what) + " to rank", std::to_string(rank),
                 std::to_string(rc) + ": " + fab().fi_strerror(int(-rc)));
  }
}

bool ofi_device::declare_dead(int rank, int why) {
  int none = 0;
  gone_why_[size_t(rank)].compare_exchange_strong(none, why);
  if (dead_[size_t(rank)].exchange(true)) return false;
  news_.store(true, std::memory_order_relaxed);
  return true;
}

std::string ofi_device::why_gone(int rank) {
  const int why = gone_why_[size_t(rank)].load();
  switch (why) {
    case gone_silent:
      return "the peer is taken for dead: silent for longer than WEFT_PEER_TIMEOUT though pinged";
    case gone_expelled:
      return "the peer has taken this rank for dead (no word from it for its WEFT_PEER_TIMEOUT) "
             "and expelled it: nothing between them arrives any more";
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ETIMEDOUT:
      return std::string("the peer cannot be reached (") + fab().fi_strerror(why) + ")";
    default:
      if (why > 0)
        return std::string("the peer process has died (its connection: ") + fab().fi_strerror(why) +
               ")";
      return "the peer process has died";
  }
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

// A failed operation: the first with each peer is logged at warn, the rest (a window of
// sends that all fail once a peer is gone) at debug.
void ofi_device::log_failure(const op& o, const fi_cq_err_entry& err) {
  const char* what = o.kind == op::write  ? "put"
                     : o.kind == op::read ? "get"
                     : o.kind == op::send ? "send"
                                          : "receive";
  const char* why = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
  if (o.rank >= 0 && size_t(o.rank) >= failure_logged_.size())
    failure_logged_.resize(size_t(o.rank) + 1, 0);
  if (o.rank < 0 || !failure_logged_[size_t(o.rank)]) {
    if (o.rank >= 0) failure_logged_[size_t(o.rank)] = 1;
    WEFT_LOG(warn, "ofi: %s with rank %d failed: %s (later failures with it: log level debug)",
             what, o.rank, why);
  } else {
    WEFT_LOG(debug, "ofi: %s with rank %d failed: %s", what, o.rank, why);
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
void ofi_device::wait_for_message(uint32_t timeout_us) {
  wait_armed(*this, timeout_us);
}

bool ofi_device::arm_wake() {
  if (wait_fd_ < 0) return false;
  fid* f = &cq_->fid;
  util::lock_guard<util::spinlock> g(poll_lock_);         // the completion queue's reader
  return fi_trywait(ctx_.fabric(), &f, 1) == FI_SUCCESS;  // -FI_EAGAIN: events pending
}

bool ofi_device::peer_alive(int rank) {
  if (dead_[size_t(rank)].load(std::memory_order_relaxed)) return false;
  if (rank == me_) return true;
  // Called by the core's periodic check (every 50 ms or so); not on the critical path.
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const int64_t timeout = ctx_.peer_timeout_ns();
  const int64_t ping_every = std::min<int64_t>(timeout / 4, 1000000000);
  util::lock_guard<util::spinlock> g(live_lock_);
  liveness& l = live_[size_t(rank)];
  const uint64_t heard = l.heard.load(std::memory_order_relaxed);
  const bool after_pause = now - l.checked_at_ns > ping_every;
  l.checked_at_ns = now;
  if (heard != l.seen || l.heard_at_ns == 0 || after_pause) {
    l.seen = heard;
    l.heard_at_ns = now;
    return true;
  }
  // Asked at least once since it fell silent (a ping that found no free send buffer counts:
  // buffers held by sends to a dead peer never come back).
  if (now - l.heard_at_ns > timeout && l.asked_at_ns > l.heard_at_ns) {
    if (declare_dead(rank, gone_silent)) {
      WEFT_LOG(warn,
               "ofi: rank %d silent for %.1f s though pinged (WEFT_PEER_TIMEOUT); taking it for "
               "dead and telling it so",
               rank, double(now - l.heard_at_ns) / 1e9);
      expel(rank);
    }
    return false;
  }
  if (now - l.heard_at_ns > ping_every && now - l.pinged_at_ns > ping_every) {
    prefix ping = make_prefix(kind_ping, 0);
    l.asked_at_ns = now;
    if (send_buffer(rank, ping, nullptr, 0, nullptr, 0, nullptr)) l.pinged_at_ns = now;
  }
  return true;
}

void ofi_device::expel(int rank) {
  prefix p = make_prefix(kind_expelled, 0);
  send_buffer(rank, p, nullptr, 0, nullptr, 0, nullptr);  // lost: its next message asks again
}

void ofi_device::forget_peer(int rank) {
  dead_[size_t(rank)].store(true);
  util::lock_guard<util::spinlock> g(poll_lock_);
  std::erase_if(streams_, [rank](const std::unique_ptr<stream>& s) { return s->rank == rank; });
  // Its pending notes stay: send_pending_notes fails their operations.
  note_in_.forget(rank);
}

}  // namespace weft::net::ofi

namespace weft::net {
std::unique_ptr<context> make_ofi_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id) {
  return std::make_unique<ofi::ofi_context>(std::move(boot), context_id);
}
}  // namespace weft::net
