// SPDX-License-Identifier: BSD-3-Clause
// A UCX device: its UCP worker and the endpoints to every rank, made and closed, and what
// it knows of its peers' liveness. See ucx_backend.hpp for how each operation maps, and
// sending.cpp and arrivals.cpp for the two directions.
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

bool ucx_device::wait_for_message(uint32_t timeout_us) {
  return wait_armed(*this, timeout_us);
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
