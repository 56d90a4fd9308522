// SPDX-License-Identifier: BSD-3-Clause
// The libfabric backend: reliable-datagram endpoints (FI_EP_RDM), one endpoint, completion
// queue and address vector per device, so threads on different devices share nothing in
// Weft (the provider may still serialise inside a domain; see docs/backends.md).
//   message      fi_inject when it fits the provider's inject size, else fi_send from a
//                device-owned send buffer; pre-posted receive buffers of one packet each
//   put / get    fi_writemsg / fi_readmsg with FI_DELIVERY_COMPLETE into the peer's
//                registration (the provider checks the key)
//   notification of a put: remote CQ data naming a slot the pair of devices shares
//                (note_slots.hpp); when no slot is free, and for a get, a message once the
//                write is delivered or the read has completed
//   rendezvous   (the core's put with key 0 into a buffer it named) streamed as messages
// A handle names its registration by an id that is never reused (rkey_t::generation) besides
// the provider's key. A device checks a peer's registration with its owner before the first
// access (remote_keys.cpp); deregistration revokes every device's copy and completes once
// each has no access in flight, so a stale handle is refused here and never reaches the
// provider (tcp;ofi_rxm drops the connection when it refuses a key).
// Every message starts with a 16-byte prefix naming the sender, since not every provider
// reports the source address (FI_SOURCE), and carrying the job's cookie: the endpoint's
// address is public, and a process of another job that sends to it by mistake (a stale
// address) is refused before anything it says is read.
// Files: context.cpp (the provider and domain), ofi_backend.cpp (a device's endpoint, its
// peers' liveness), sending.cpp, receiving.cpp, remote_keys.cpp, note_slots.cpp, closing.cpp.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/backend.hpp"
#include "net/credits.hpp"
#include "net/key_registry.hpp"
#include "net/ofi/fabric_lib.hpp"
#include "net/ofi/note_slots.hpp"
#include "util/object_pool.hpp"
#include "util/spinlock.hpp"
#include "util/unguessable.hpp"

namespace weft::net::ofi {

// The name the backend's errors carry.
inline constexpr const char* call = "ofi backend";
// Fails with libfabric's reason when a provider call returned non-zero (ofi_backend.cpp).
void check(ssize_t rc, const char* what);

class ofi_context;

class ofi_device final : public device {
 public:
  ofi_device(ofi_context& ctx, int index, const device_config& cfg);
  ~ofi_device() override;

  size_t max_message_size() const override { return cell_size_ - sizeof(prefix); }
  size_t max_inject_size() const override;
  bool try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                size_t len) override;
  bool try_send_answer(int rank, const void* hdr, size_t hdr_len, const void* payload,
                       size_t len) override;
  bool try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr, const void* note,
                     size_t note_len, void* ctx) override;
  bool try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t rkey,
               const void* note, size_t note_len, void* ctx) override;
  bool try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t rkey,
               const void* note, size_t note_len, void* ctx) override;
  const char* check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t rkey) override;
  // The provider reads and writes a put's or get's local buffer until it hands the
  // operation back, also after its peer is taken for dead: complete() settles it then.
  bool settles_accesses(int) const override { return true; }
  size_t poll(sink& s, size_t max) override;
  bool wait_for_message(uint32_t timeout_us) override;
  int wake_fd() override { return wait_fd_; }
  bool arm_wake() override;
  bool peer_alive(int rank) override;
  bool peers_changed() override {
    return news_.load(std::memory_order_relaxed) && news_.exchange(false);
  }
  std::string why_gone(int rank) override;
  void forget_peer(int rank) override;

  // Called by the context (any thread): tell `rank` that registration `id` is gone.
  void queue_revoke(int rank, uint64_t id);

  struct prefix {
    uint32_t src;
    uint8_t kind;      // msg_kind
    uint8_t credited;  // 1: the sender took a credit for it (credits.hpp)
    uint8_t pad[2];
    uint64_t cookie;  // the job's (bootstrap::cookie): another job's message is dropped
  };
  prefix make_prefix(uint8_t kind, uint8_t credited) const {
    return prefix{uint32_t(me_), kind, credited, {}, cookie_};
  }
  enum msg_kind : uint8_t {
    kind_message,
    kind_chunk,
    kind_notify,
    kind_ping,
    kind_pong,
    kind_note_define,
    kind_key_request,  // key_request: may this device access registration `id`?
    kind_key_reply,    // key_reply
    kind_revoke,       // uint64_t id: the registration is gone; acknowledge when idle
    kind_revoke_ack,   // revoke_ack: done with `id` (also unasked, when the device goes)
    kind_bye,          // the sender's device is closing: everything it sent came before
    kind_bye_ack,      // the answer to kind_bye: everything the closing device sent arrived
    kind_credit,       // uint32_t: credited messages the sender's sink has taken
    kind_expelled,     // the sender has taken this rank for dead: nothing it sends arrives
    // An answer to an operation of the receiver's (try_send_answer): its credit is taken
    // even when none is left (send_credits::overdraw), since the receiver always takes it,
    // and it is offered past the sender's held messages.
    kind_answer
  };
  struct key_request {
    uint64_t id, key, device_generation;
  };
  struct revoke_ack {
    uint64_t id, device_generation;
  };
  struct key_reply {
    uint64_t id, base, size;
    uint8_t found;
    uint8_t pad[7];
  };
  static_assert(sizeof(key_reply) <= max_note_size);
  // A piece of a rendezvous stream: `len` bytes for address `dst` of the target.
  struct chunk_header {
    uint64_t dst;
    uint64_t stream;
    uint64_t total;
    uint32_t len;
    uint32_t note_len;
    char note[max_note_size];
  };
  struct stream {
    int rank;
    const char* src;
    uint64_t dst, size, id, sent = 0, chunks = 0, completed = 0;
    void* ctx;
    uint32_t note_len;
    char note[max_note_size];
  };
  // A peer's registration as this device knows it, per (rank, id). Entries are never
  // erased, so an operation in flight may point at its own.
  struct remote_key {
    enum state_t : uint8_t { fetching, ready, refused } state = fetching;
    bool ack_owed = false;  // revoked with accesses in flight: acknowledge when they end
    uint32_t in_flight = 0;
    uint64_t id = 0, key = 0, base = 0, size = 0;
  };
  // The completion context of every operation: fi_context2 first, as the provider wants.
  struct op {
    fi_context2 fi;
    enum kind_t : uint8_t { recv, send, write, read } kind;
    uint32_t buffer = 0;  // recv / send: index of the buffer
    int rank = -1;
    void* ctx = nullptr;         // write / read: the core's context
    stream* owner = nullptr;     // send of a rendezvous chunk
    fid_mr* local_mr = nullptr;  // FI_MR_LOCAL: the registration of a user buffer
    remote_key* held = nullptr;  // write / read: the peer registration it accesses
    int32_t note_slot = -1;      // write notified through CQ data: its slot
    uint32_t note_len = 0;       // notified by message afterwards
    char note[max_note_size];
  };

 private:
  bool send_buffer(int rank, const prefix& p, const void* a, size_t alen, const void* b,
                   size_t blen, stream* owner);
  void complete(sink& s, op* o, bool ok);
  // False: the message waits in its buffer (held_), which is not reposted yet.
  bool received(sink& s, op* o, size_t len);
  void remote_write(sink& s, uint64_t data);
  // A notification for the sink, or held (a copy) when the sink refuses it or something
  // older waits.
  // `answer`: it completes an operation of ours (rendezvous data), so it passes the
  // sender's held messages.
  void deliver_note(sink& s, int rank, const void* note, size_t len, bool credited = false,
                    bool answer = false);
  size_t retry_held(sink& s);
  void log_failure(const op& o, const fi_cq_err_entry& err);
  // The sink took a credited message from `rank`: grant credits back in batches.
  void taken_from(int rank);
  bool send_definition(int rank, const note_sender::use& u, const void* note, size_t len);
  void heard_from(int rank);
  // A send, write or read the provider refused: -FI_EAGAIN is left to the caller's retry,
  // a refusal for want of a connection (the peer's endpoint is gone) takes the peer for
  // dead, and any other error throws.
  void refused(ssize_t rc, int rank, const char* what);
  // Messages received are counted in live_; what this device sent, here, for flush_to_peers().
  void mark_sent_to(int rank) {
    if (!(talk_[size_t(rank)].load(std::memory_order_relaxed) & sent_to))
      talk_[size_t(rank)].fetch_or(sent_to, std::memory_order_relaxed);
  }
  // Before the endpoint closes: says goodbye to every peer it exchanged messages with and
  // waits (2 s at most) until each has answered or said goodbye itself, so that nothing
  // this device sent is lost when its connections close (the sockets provider drops what
  // a closed socket had not yet delivered).
  void flush_to_peers();
  void post_recv(uint32_t i);
  bool send_note(int rank, const void* note, size_t len);
  // A message of kind p.kind, injected when it is small enough, else from a send buffer.
  bool send_message(int rank, const prefix& p, const void* hdr, size_t hdr_len, const void* payload,
                    size_t len);
  size_t send_pending_notes(sink& s);
  bool rma(bool write, int rank, void* local, size_t size, uint64_t remote_addr, rkey_t k,
           const void* note, size_t note_len, void* ctx);
  void advance_streams();
  // remote_keys.cpp. Under keys_lock_: why an access cannot go ahead, "" when it can (the
  // registration's entry in *out), nullptr while the owner is being asked.
  const char* resolve(int rank, rkey_t k, uint64_t addr, size_t size, remote_key** out);
  // An access counted in `rk.in_flight` (under keys_lock_) has ended.
  void access_finished(int rank, remote_key* rk);
  // Before the endpoint closes: tells each owner that this device is done with its
  // registrations, so that deregistration there does not wait for it.
  void release_remote_keys();
  // Under keys_lock_: an access that ended without the provider (refused, or a copy within
  // this process), reported by the next poll with the target's notification.
  void settle(bool write, bool ok, void* ctx, const void* note, size_t note_len);
  bool local_rma(bool write, void* local, size_t size, uint64_t addr, rkey_t k, const void* note,
                 size_t note_len, void* ctx);
  void key_message(int src, uint8_t kind, const char* body, size_t len);
  void send_control(int rank, uint8_t kind, const void* body, size_t len);
  size_t flush_control(sink& s);
  void foreign_message(uint32_t claimed_src, size_t len);
  void* send_desc() const;  // of the send buffers, when they are registered
  fid_mr* register_local(void* buf, size_t len, uint64_t access);

  ofi_context& ctx_;
  const int index_;
  const int me_;
  const size_t cell_size_;
  const uint64_t device_generation_;
  const uint64_t cookie_;  // the job's
  std::atomic<uint64_t> foreign_{
      0};  // messages of other jobs dropped  // unique among this process's devices, ever
  bool rx_cq_data_ = false;  // a remote write's CQ data consumes a posted receive
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  int wait_fd_ = -1;  // the completion queue's wait fd (FI_WAIT_FD), or -1
  fid_av* av_ = nullptr;
  std::vector<fi_addr_t> peers_;
  std::vector<char> recv_mem_, send_mem_;
  std::vector<op> recv_ops_, send_ops_;
  util::object_pool<op> rma_ops_;
  fid_mr* recv_mr_ = nullptr;
  fid_mr* send_mr_ = nullptr;
  util::spinlock send_lock_;
  std::vector<uint32_t> free_sends_;
  util::spinlock poll_lock_;
  util::spinlock streams_lock_;
  std::vector<std::unique_ptr<stream>> new_streams_, streams_;
  std::atomic<uint64_t> next_stream_{1};
  struct incoming {
    uint64_t got = 0;
    uint32_t note_len = 0;
    char note[max_note_size];
  };
  std::map<std::pair<int, uint64_t>, incoming> incoming_;
  // A finished put's or get's notification that found no credit, its operation completing
  // once it is sent (or failing once its target is dead): a target out of credits holds the
  // initiator back, and the list holds at most one entry per operation not completed.
  struct pending_note {
    int rank;
    uint32_t len;
    char note[max_note_size];
    void* ctx;
    bool write;
  };
  std::vector<pending_note> notes_;
  std::unique_ptr<note_sender> note_out_;  // null: puts are notified by message
  note_receiver note_in_;
  struct {
    uint64_t by_data = 0, parked = 0, by_message = 0;
  } notify_counts_;  // notifications received, counted by the poller for the log
  std::vector<uint32_t> to_repost_;
  // What the sink refused (back-pressure), in arrival order, offered again by each poll
  // before anything newer from the same peer (a peer's later messages wait behind it; other
  // peers' go on, so one peer's flood cannot hold up another's barrier message): a message
  // keeps its receive buffer (`buffer`), a notification is copied. Under poll_lock_. Once it
  // holds held_cap_ entries, poll stops reading the completion queue; credits keep each
  // peer below inbox_depth entries, so that is a last resort.
  struct held_msg {
    int rank;
    uint32_t buffer;  // a message: its receive buffer; a notification: UINT32_MAX
    uint32_t len;
    bool credited;
    char note[max_note_size];
  };
  std::deque<held_msg> held_;
  std::vector<uint32_t> held_from_;      // held_ entries by peer
  std::vector<uint8_t> blocked_;         // retry_held's scratch: peers refused in this pass
  std::vector<uint8_t> failure_logged_;  // by peer: one failed operation was logged at warn
  size_t held_cap_ = 0;
  // Whether a message or notification from `rank` may go to the sink now (nothing of its
  // waits), and the way to keep it otherwise.
  bool may_offer(int rank) const { return held_from_[size_t(rank)] == 0; }
  void hold(const held_msg& h) {
    held_.push_back(h);
    ++held_from_[size_t(h.rank)];
  }
  std::unique_ptr<send_credits> credits_out_;
  std::unique_ptr<recv_credits> credits_in_;  // under poll_lock_
  std::unique_ptr<std::atomic<bool>[]> dead_;
  // Why a peer was taken for dead, set before dead_ (the first reason stays): a libfabric
  // error number, or one of the gone_* codes.
  std::unique_ptr<std::atomic<int>[]> gone_why_;
  static constexpr int gone_silent = -1, gone_send_failed = -2, gone_expelled = -3;
  std::atomic<bool> news_{false};  // declare_dead took a peer since peers_changed()
  // Takes `rank` for dead for `why`; true for the caller that did (and should say so).
  bool declare_dead(int rank, int why);
  // Per peer, for flush_to_peers(): whether this device sent to it, and how far the closing
  // handshake has come.
  enum talk_bits : uint8_t { sent_to = 1, bye_heard = 2, bye_answered = 4, bye_sent = 8 };
  std::unique_ptr<std::atomic<uint8_t>[]> talk_;
  // Liveness: the providers here report no dead peer, so a peer that Weft waits on and that
  // has been silent for a while is pinged; no answer within WEFT_PEER_TIMEOUT, or a ping
  // that fails to send, and it is dead.
  // Silence counts only across checks in a row: a check after a long pause (nothing was
  // pending, so nobody checked) starts the clock again instead of finding the peer silent
  // since the last check. A peer is taken for dead only when it stayed silent for
  // WEFT_PEER_TIMEOUT while pinged.
  struct liveness {
    std::atomic<uint64_t> heard{0};  // messages received from the peer; written by the poller only
    uint64_t seen = 0;               // `heard` at the last check
    int64_t heard_at_ns = 0, pinged_at_ns = 0, asked_at_ns = 0, checked_at_ns = 0;
  };
  // Tells `rank`, which this device took for dead, that it was expelled (best effort).
  void expel(int rank);
  std::unique_ptr<liveness[]> live_;
  util::spinlock live_lock_;

  struct pair_hash {
    size_t operator()(const std::pair<int, uint64_t>& p) const {
      return std::hash<uint64_t>()(p.second * 0x9e3779b97f4a7c15ull ^ uint64_t(p.first));
    }
  };
  util::spinlock keys_lock_;  // keys_, control_out_, settled_
  // Peers' registrations this device has asked about, per (rank, id).
  std::unordered_map<std::pair<int, uint64_t>, remote_key, pair_hash> keys_;
  struct control {
    int rank;
    uint8_t kind;
    uint8_t len;
    char body[max_note_size];  // a key_reply, or a notification
  };
  std::vector<control> control_out_;  // could not be sent at once; sent in order by poll
  // control_out_ or settled_ may hold something (set under keys_lock_, read without it).
  std::atomic<bool> backlogged_{false};
  struct settled {
    bool write, ok;
    void* ctx;
    uint32_t note_len;
    char note[max_note_size];
  };
  std::vector<settled> settled_;
};

class ofi_context final : public context {
 public:
  ofi_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id);
  ~ofi_context() override;
  const char* name() const override { return "ofi"; }
  std::unique_ptr<device> alloc_device(int index, const device_config& cfg) override;
  local_region register_memory(void* base, size_t size) override;
  void deregister_memory(local_region& mr) override;
  bool region_idle(const local_region& mr) override;
  void release_region(local_region& mr) override;
  rkey_t get_rkey(const local_region& mr) override { return rkey_t{mr.key, mr.generation}; }
  std::string describe() const override;

  bootstrap::bootstrap& boot() { return *boot_; }
  int context_id() const { return context_id_; }
  fi_info* info() const { return info_; }
  fid_domain* domain() const { return domain_; }
  fid_fabric* fabric() const { return fabric_; }
  // The address a peer's registration is reached at: the virtual address, or the offset
  // into the registration for providers without FI_MR_VIRT_ADDR.
  bool virt_addr() const { return virt_addr_; }
  // Local buffers must be registered (FI_MR_LOCAL), by the provider's wish or forced by
  // WEFT_OFI_MR_LOCAL=1 so that the path is tested where no provider asks for it.
  bool mr_local() const { return mr_local_; }
  int64_t peer_timeout_ns() const { return peer_timeout_ns_; }
  // Puts carry their notification as remote CQ data (the provider offers 8 bytes of it and
  // WEFT_OFI_CQ_DATA is not 0).
  bool cq_data() const { return cq_data_; }
  // A registration key never used before in this domain (the provider refuses duplicates,
  // and a stale remote key must not reach a newer region).
  uint64_t next_key() { return next_key_.fetch_add(1); }

  // A peer's question through device `dev`: may it access registration `id` with provider
  // key `key`? If so, its extent, and the peer is remembered so that deregistration
  // revokes its copy.
  // A peer's question by device `who`: may it access registration `id` with provider key
  // `key`? If so, its extent, and the asker is remembered so that deregistration revokes
  // its copy.
  bool lookup_for_peer(uint64_t id, uint64_t key, const key_asker& who, uint64_t& base,
                       uint64_t& size);
  void revoke_acknowledged(uint64_t id, const key_asker& who) { regs_.acknowledged(id, who); }
  // An access by this process to its own registration: why it cannot go ahead, or "" once
  // `copy` ran (under the registry's lock, so deregistration cannot overtake it).
  template <typename Copy>
  const char* local_access(uint64_t id, uint64_t key, uint64_t addr, size_t size, Copy&& copy) {
    const char* why = "the region has been deregistered";
    regs_.with_live(id, [&](const registration& r) {
      if (r.key != key)
        why = "the handle's key is not its region's";
      else if (addr < r.base || size > r.size || addr - r.base > r.size - size)
        why = "the access lies outside the region";
      else
        copy(), why = "";
      return true;
    });
    return why;
  }
  void attach(int index, ofi_device* d) { regs_.attach(index, d); }
  void detach(int index) { regs_.detach(index); }

 private:
  static void warn_small_tcp_receive_buffers();
  struct registration {
    fid_mr* mr = nullptr;
    uint64_t key = 0, base = 0, size = 0;
  };
  std::shared_ptr<bootstrap::bootstrap> boot_;
  const int context_id_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  bool virt_addr_ = false;
  bool mr_local_ = false;
  bool prov_key_ = false;
  bool cq_data_ = false;
  int64_t peer_timeout_ns_ = 0;
  std::atomic<uint64_t> next_key_{1};
  util::unguessable ids_;  // registration ids
  key_registry<registration, ofi_device> regs_;
};

}  // namespace weft::net::ofi
