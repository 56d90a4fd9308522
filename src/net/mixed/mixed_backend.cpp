// SPDX-License-Identifier: BSD-3-Clause
// The mixed backend: shared memory to the ranks on this host, the network backend (ofi or
// ucx) to the others, for messages, rendezvous transfers and RMA alike. A registration is
// made with both: the network backend's key is the handle peers get, and the shared-memory
// table records the region under that same key, so a peer on this host finds it there.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "net/backend.hpp"
#include "net/shm/shm_backend.hpp"
#include "net/wake.hpp"
#include "util/log.hpp"
#include "util/spinlock.hpp"
#include "util/thread_index.hpp"
#include "util/ticks.hpp"

namespace weft::net {

std::unique_ptr<context> make_network_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                              int context_id);

namespace {

// The ranks of this host as a job of their own, for the shared-memory backend: ranks are
// renumbered, keys are kept apart from the parent's, and the job identifier names the host
// (namespaces on one machine share /dev/shm). Fences are the parent's, hence collective
// over the whole job, which every rank's backend reaches in the same order.
class host_bootstrap final : public bootstrap::bootstrap {
 public:
  host_bootstrap(std::shared_ptr<weft::bootstrap::bootstrap> parent, std::vector<int> members)
      : parent_(std::move(parent)), members_(std::move(members)) {
    size_ = local_size_ = int(members_.size());
    rank_ = local_rank_ =
        int(std::find(members_.begin(), members_.end(), parent_->rank()) - members_.begin());
    job_id_ = parent_->job_id() + "h" + std::to_string(members_.front());
    cookie_ = parent_->cookie();
  }
  const char* name() const override { return "host subset"; }
  void put(const std::string& key, const std::string& value) override {
    parent_->put("host:" + key, value);
  }
  std::string get(int rank, const std::string& key) override {
    return parent_->get(members_[size_t(rank)], "host:" + key);
  }
  void fence() override { parent_->fence(); }
  int job_rank(int r) const override { return members_[size_t(r)]; }

 private:
  std::shared_ptr<weft::bootstrap::bootstrap> parent_;
  std::vector<int> members_;
};

// Hands the shared-memory device's events on with the job's rank numbers.
class renumbering_sink final : public sink {
 public:
  renumbering_sink(sink& outer, const std::vector<int>& global) : outer_(outer), global_(global) {}
  bool on_message(int rank, const void* data, size_t len) override {
    return outer_.on_message(global_[size_t(rank)], data, len);
  }
  void on_put_local_done(void* ctx, bool ok) override { outer_.on_put_local_done(ctx, ok); }
  void on_get_done(void* ctx, bool ok) override { outer_.on_get_done(ctx, ok); }
  bool on_remote_notify(int rank, const void* note, size_t len) override {
    return outer_.on_remote_notify(global_[size_t(rank)], note, len);
  }
  bool expects_data(int rank, uint64_t addr, size_t size, const void* note, size_t len) override {
    return outer_.expects_data(global_[size_t(rank)], addr, size, note, len);
  }
  bool on_ahead(int rank, uint32_t id, const void* data, size_t len) override {
    return outer_.on_ahead(global_[size_t(rank)], id, data, len);
  }

 private:
  sink& outer_;
  const std::vector<int>& global_;
};

class mixed_device final : public device {
 public:
  mixed_device(std::unique_ptr<device> shm, std::unique_ptr<device> net,
               const std::vector<int>& local, const std::vector<int>& global)
      : shm_(std::move(shm)), net_(std::move(net)), local_(local), global_(global) {}

  size_t max_message_size() const override {
    return std::min(shm_->max_message_size(), net_->max_message_size());
  }
  size_t max_inject_size() const override { return shm_->max_inject_size(); }
  bool try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                size_t len) override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->try_send(l, hdr, hdr_len, payload, len)
                  : net_->try_send(rank, hdr, hdr_len, payload, len);
  }
  bool try_send_answer(int rank, const void* hdr, size_t hdr_len, const void* payload,
                       size_t len) override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->try_send_answer(l, hdr, hdr_len, payload, len)
                  : net_->try_send_answer(rank, hdr, hdr_len, payload, len);
  }
  bool try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t rkey,
               const void* note, size_t note_len, void* ctx) override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->try_put(l, src, size, remote_addr, rkey, note, note_len, ctx)
                  : net_->try_put(rank, src, size, remote_addr, rkey, note, note_len, ctx);
  }
  bool try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr, const void* note,
                     size_t note_len, void* ctx) override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->try_send_data(l, src, size, remote_addr, note, note_len, ctx)
                  : net_->try_send_data(rank, src, size, remote_addr, note, note_len, ctx);
  }
  // Streams over shared memory only: the network backends have none.
  bool try_send_ahead(int rank, const void* hdr, size_t hdr_len, const void* payload, size_t len,
                      const void* src, size_t size, void* ctx) override {
    const int l = local_[size_t(rank)];
    return l >= 0 && shm_->try_send_ahead(l, hdr, hdr_len, payload, len, src, size, ctx);
  }
  bool accept_ahead(int rank, uint32_t id, void* dst, size_t size, size_t accept, const void* note,
                    size_t note_len) override {
    const int l = local_[size_t(rank)];
    return l >= 0 && shm_->accept_ahead(l, id, dst, size, accept, note, note_len);
  }
  void refuse_ahead(int rank, uint32_t id) override {
    if (const int l = local_[size_t(rank)]; l >= 0) shm_->refuse_ahead(l, id);
  }
  void cancel_ahead(int rank, void* ctx) override {
    if (const int l = local_[size_t(rank)]; l >= 0) shm_->cancel_ahead(l, ctx);
  }
  bool try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t rkey,
               const void* note, size_t note_len, void* ctx) override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->try_get(l, dst, size, remote_addr, rkey, note, note_len, ctx)
                  : net_->try_get(rank, dst, size, remote_addr, rkey, note, note_len, ctx);
  }
  const char* check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t rkey) override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->check_remote(l, remote_addr, size, rkey)
                  : net_->check_remote(rank, remote_addr, size, rkey);
  }
  // Shared memory every time. The network as long as it yields events, and otherwise once
  // as much time has passed as its last empty look took: a provider whose poll is a system
  // call (tcp: 1 us here) would otherwise make every same-host message wait for it, while
  // one that reads a completion queue in memory (verbs) is still looked at almost always.
  // Every 1024th poll of a thread (the count shm_device::poll advances) looks regardless, in
  // case a slow look (the thread was preempted in it) put the next one far off.
  size_t poll(sink& s, size_t max) override {
    renumbering_sink local(s, global_);
    size_t n = shm_->poll(local, max);
    const uint64_t start = util::ticks();
    if (start < net_due_.load(std::memory_order_relaxed) && (util::thread_polls() & 1023) != 0)
      return n;
    const size_t m = net_->poll(s, max);
    const uint64_t end = util::ticks();
    net_due_.store(m ? 0 : end + (end - start), std::memory_order_relaxed);
    return n + m;
  }
  // Sleeps on shared memory's doorbell socket and the network's wait fd together, once
  // both are armed; where either has no descriptor, on shared memory for up to 100 us at a
  // time (the network is looked at again after each).
  bool wait_for_message(uint32_t timeout_us) override {
    const int fds[2] = {shm_->wake_fd(), net_->wake_fd()};
    if (fds[0] < 0 || fds[1] < 0)
      return shm_->wait_for_message(std::min<uint32_t>(timeout_us, 100));
    if (!shm_->arm_wake() || !net_->arm_wake()) return false;  // something is pending
    sleep_on_fds(fds, 2, timeout_us);
    shm_->settle_wake();
    return true;
  }
  bool peer_alive(int rank) override {
    const int l = local_[size_t(rank)];
    return (l < 0 || shm_->peer_alive(l)) && net_->peer_alive(rank);
  }
  std::string why_gone(int rank) override {
    const int l = local_[size_t(rank)];
    return l >= 0 && !shm_->peer_alive(l) ? shm_->why_gone(l) : net_->why_gone(rank);
  }
  void forget_peer(int rank) override {
    const int l = local_[size_t(rank)];
    if (l >= 0) shm_->forget_peer(l);
    net_->forget_peer(rank);
  }
  bool settles_accesses(int rank) const override {
    const int l = local_[size_t(rank)];
    return l >= 0 ? shm_->settles_accesses(l) : net_->settles_accesses(rank);
  }
  size_t repair() override { return shm_->repair() + net_->repair(); }
  bool peers_changed() override { return net_->peers_changed(); }
  uint64_t count(counter_t c) const override { return shm_->count(c) + net_->count(c); }

 private:
  std::unique_ptr<device> shm_, net_;
  const std::vector<int>& local_;   // by job rank: its rank on this host, or -1
  const std::vector<int>& global_;  // by host rank: its job rank
  // When the network is next looked at (util::ticks), apart from what every poll reads.
  alignas(util::cache_line) std::atomic<uint64_t> net_due_{0};
};

class mixed_context final : public context {
 public:
  mixed_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id) {
    local_.assign(size_t(boot->size()), -1);
    for (int r = 0; r < boot->size(); ++r)
      if (boot->same_host(r)) {
        local_[size_t(r)] = int(global_.size());
        global_.push_back(r);
      }
    shm_ = std::make_unique<shm::shm_context>(std::make_shared<host_bootstrap>(boot, global_),
                                              context_id);
    net_ = make_network_context(boot, context_id);
    WEFT_LOG(info, "mixed context %d: %s", context_id, describe().c_str());
  }
  const char* name() const override { return "mixed"; }
  std::unique_ptr<device> alloc_device(int index, const device_config& cfg) override {
    auto shm = shm_->alloc_device(index, cfg);
    auto net = net_->alloc_device(index, cfg);
    return std::make_unique<mixed_device>(std::move(shm), std::move(net), local_, global_);
  }
  // The returned record is the network's, with the shared-memory one hung on it.
  local_region register_memory(void* base, size_t size) override {
    auto pair = std::make_unique<registration>();
    pair->net = net_->register_memory(base, size);
    try {
      pair->shm = shm_->register_named(base, size, net_->get_rkey(pair->net));
    } catch (...) {  // the shared-memory table is full: no peer has seen the key yet
      net_->deregister_memory(pair->net);
      net_->release_region(pair->net);
      throw;
    }
    local_region m = pair->net;
    m.backend = pair.release();
    return m;
  }
  void deregister_memory(local_region& mr) override {
    auto* pair = static_cast<registration*>(mr.backend);
    shm_->deregister_memory(pair->shm);
    net_->deregister_memory(pair->net);
  }
  bool region_idle(const local_region& mr) override {
    auto* pair = static_cast<registration*>(mr.backend);
    return shm_->region_idle(pair->shm) && net_->region_idle(pair->net);
  }
  void release_region(local_region& mr) override {
    std::unique_ptr<registration> pair(static_cast<registration*>(mr.backend));
    shm_->release_region(pair->shm);
    net_->release_region(pair->net);
    mr = local_region{};
  }
  rkey_t get_rkey(const local_region& mr) override {
    return net_->get_rkey(static_cast<registration*>(mr.backend)->net);
  }
  std::string describe() const override {
    return "mixed: shared memory to the " + std::to_string(global_.size()) +
           " ranks of this host, " + net_->describe();
  }

 private:
  struct registration {
    local_region shm, net;
  };
  std::vector<int> local_, global_;
  std::unique_ptr<shm::shm_context> shm_;
  std::unique_ptr<context> net_;
};

}  // namespace

std::unique_ptr<context> make_mixed_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                            int context_id) {
  return std::make_unique<mixed_context>(std::move(boot), context_id);
}

}  // namespace weft::net
