// SPDX-License-Identifier: BSD-3-Clause
// An ofi device's endpoint: its completion queue, address vector and pre-posted receives,
// made and closed; and what it knows of its peers' liveness (a provider error or a silence
// takes a peer for dead, and the launcher's word expels one).
#include "net/ofi/ofi_backend.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "net/wake.hpp"
#include "util/clock.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

namespace weft::net::ofi {

void check(ssize_t rc, const char* what) {
  if (rc != 0) util::fail(call, what, std::to_string(rc), fab().fi_strerror(int(-rc)));
}

namespace {

constexpr size_t send_cells = 256;             // send buffers per device
size_t recv_cells(const device_config& cfg) {  // receives kept posted per device
  return std::max<size_t>(16, std::min<size_t>(cfg.inbox_depth, 256));
}

std::string key(int ctx, int index) {
  return "ofi-" + std::to_string(ctx) + "-" + std::to_string(index);
}

}  // namespace

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

bool ofi_device::wait_for_message(uint32_t timeout_us) {
  return wait_armed(*this, timeout_us);
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
  const int64_t now = util::now_ns();
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
