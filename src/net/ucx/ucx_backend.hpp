// SPDX-License-Identifier: BSD-3-Clause
// The UCX backend: one UCP worker per device, with an endpoint to the same device of every
// rank, so threads on different devices share nothing in Weft. A device's worker runs in
// UCS_THREAD_MODE_SERIALIZED behind the device's own spinlock.
//   message      ucp_am_send_nbx, eager only, from a device-owned send buffer; the receive
//                handler keeps UCP's descriptor (persistent data) until the sink has seen it
//   put / get    ucp_put_nbx / ucp_get_nbx with the target's unpacked remote key; a put
//                is followed by a flush of the endpoint and completes with it, once its
//                data is delivered (as with ofi's FI_DELIVERY_COMPLETE)
//   notify       UCX has no put with immediate data: a notified put is put, flush, then a
//                notify message; a notified get sends the notify once its data arrived
//   rendezvous   (the core's put with key 0 into a buffer it named) one eager active message,
//                copied into the named buffer by the receive handler (UCP's own rendezvous
//                would need the receiver to progress after its data is in; see try_put)
// Remote keys are variable-sized blobs in UCX, while Weft's handle carries a 64-bit key: the
// key names the registration, and a device fetches the packed key from its owner on first
// use (the access waits in the core's backlog meanwhile). Deregistration revokes every
// fetched copy and completes once each fetcher has flushed and acknowledged, so no peer
// touches a region after deregister_memory returns.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/backend.hpp"
#include "net/credits.hpp"
#include "net/key_registry.hpp"
#include "util/object_pool.hpp"
#include "util/spinlock.hpp"
#include "util/unguessable.hpp"

namespace weft::net::ucx {

// Request parameters whose completion callback gets `user_data`.
inline ucp_request_param_t with_callback(void* user_data) {
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.user_data = user_data;
  return rp;
}

class ucx_context;

// What travels in UCP's active-message header; messages send only the first 16 bytes. The
// job's cookie (bootstrap::cookie) travels in each: a worker's address is public, and a
// process of another job that sends to it by mistake is refused before anything is read.
struct am_header {
  uint32_t src;
  uint8_t kind;  // msg_kind
  uint8_t note_len;
  uint8_t credited;  // 1: the sender took a credit for it (credits.hpp)
  uint8_t pad;
  uint64_t cookie;
  uint64_t dst;  // stream: the address of the target's buffer
  char note[max_note_size];
};
enum msg_kind : uint8_t {
  kind_message,
  kind_notify,
  kind_stream,
  kind_rkey_request,
  kind_rkey_reply,
  kind_revoke,
  kind_revoke_ack,
  kind_hello,
  kind_credit,  // uint32_t: credited messages the sender's sink has taken
  // An answer to an operation of the receiver's (try_send_answer): its credit is taken even
  // when none is left (send_credits::overdraw), since the receiver always takes it, and it
  // is offered past the sender's held messages.
  kind_answer
};
inline constexpr size_t short_header = 16;

class ucx_device final : public device {
 public:
  ucx_device(ucx_context& ctx, int index, const device_config& cfg);
  ~ucx_device() override;

  size_t max_message_size() const override { return cell_size_; }
  size_t max_inject_size() const override { return 0; }
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
  size_t poll(sink& s, size_t max) override;
  bool wait_for_message(uint32_t timeout_us) override;
  int wake_fd() override { return efd_; }
  bool arm_wake() override;
  bool peer_alive(int rank) override;
  void forget_peer(int rank) override;

  // Called by the context (any thread): tell `rank` that registration `key` is gone.
  void queue_revoke(int rank, uint64_t key);

  // What a poll hands to the sink, gathered while the worker progresses (UCP forbids
  // calling back into the worker from its callbacks, and the sink may send).
  struct event {
    enum kind_t : uint8_t { message, notify, put_done, get_done } kind;
    bool release = false;  // message: UCP's descriptor, released after delivery
    bool delivered = false;
    bool credited = false;  // the sender took a credit for it
    bool answer = false;    // completes an operation of ours: passes held messages
    bool ok = true;
    int rank = -1;
    void* data = nullptr;
    size_t len = 0;
    void* ctx = nullptr;
    uint32_t note_len = 0;
    char note[max_note_size];
  };
  // A rendezvous transfer sent as chunks: complete when the last chunk's send is.
  struct stream_state {
    void* ctx = nullptr;
    int rank = -1;
    uint64_t left = 0;
    bool ok = true;
  };
  // The state of an operation UCP completes later.
  struct op {
    enum kind_t : uint8_t { send, get, stream, flush, revoke_flush } kind;
    ucx_device* dev;
    int rank = -1;
    uint32_t buffer = 0;  // send: index of the send buffer
    void* ctx = nullptr;
    uint64_t key = 0;  // revoke_flush: the registration
    uint32_t note_len = 0;
    char note[max_note_size];
    am_header header;               // stream: UCP reads it until the send completes
    stream_state* whole = nullptr;  // stream: the transfer this chunk is part of
  };
  struct peer {
    ucp_ep_h ep = nullptr;
    ucx_device* dev = nullptr;
    int rank = -1;
    int32_t pid = 0;
    bool watch_pid = false;  // no transport reports its failure, but it is on this host
    std::atomic<bool> dead{false};
  };

 private:
  // Remote keys fetched from their owners, per (rank, key); guarded by worker_lock_.
  struct remote_key {
    enum state_t : uint8_t { fetching, ready, refused } state = fetching;
    ucp_rkey_h rkey = nullptr;
    uint64_t base = 0, size = 0;
  };
  struct control {
    int rank;
    uint8_t kind;
    std::string body;
  };

  static ucs_status_t on_am(void* arg, const void* header, size_t header_len, void* data,
                            size_t len, const ucp_am_recv_param_t* param);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  ucs_status_t received(const am_header& h, size_t header_len, void* data, size_t len,
                        const ucp_am_recv_param_t* param);
  void finished(op* o, ucs_status_t status);
  // Under worker_lock_: send header|a|b (a control message or a Weft message).
  bool send_locked(int rank, uint8_t kind, const void* a, size_t alen, const void* b, size_t blen);
  // Under worker_lock_: why the access cannot go ahead, or "" when the key is ready, or
  // nullptr when it is still being fetched.
  const char* resolve(int rank, rkey_t k, uint64_t addr, size_t size, remote_key** out);
  // Sends [src, src + size) as eager fragments written at remote_addr, the note on the last
  // one (the rendezvous data path); under worker_lock_, the peer alive.
  void stream_locked(int rank, const void* src, size_t size, uint64_t remote_addr, const void* note,
                     size_t note_len, void* ctx);
  bool rma(bool write, int rank, void* local, size_t size, uint64_t addr, rkey_t k,
           const void* note, size_t note_len, void* ctx);
  void handle_control();
  void push_done(bool write, void* ctx, bool ok, int rank, const void* note, size_t note_len);
  void push_notify(int rank, const void* note, size_t len, bool credited, bool answer = false);
  void send_notes();
  void declare_dead(int rank, ucs_status_t why);
  void greet_everyone();
  // Before the endpoints close: tells each owner this device is done with its keys, so
  // that deregistration there does not wait for it.
  void release_remote_keys();
  // The body of a key request or a revocation's acknowledgment: the key and who asks.
  std::string key_and_device_generation(uint64_t key) const;
  // The device that sent such a body.
  key_asker asker(const control& c) const;

  ucx_context& ctx_;
  const int index_;
  const int me_;
  const uint64_t cookie_;             // the job's
  std::atomic<uint64_t> foreign_{0};  // messages of other jobs dropped
  const size_t cell_size_;
  const uint64_t device_generation_;  // unique among this process's devices, ever
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;  // the worker's event fd (UCP_FEATURE_WAKEUP), or -1
  std::unique_ptr<peer[]> peers_;
  util::object_pool<op> ops_;  // operations in flight, reused
  util::object_pool<stream_state> streams_;
  int npeers_ = 0;

  util::spinlock worker_lock_;  // every call into worker_ and everything below
  std::vector<char> send_mem_;
  std::vector<op> send_ops_;
  std::vector<uint32_t> free_sends_;
  std::vector<event> events_;
  bool closing_ = false;  // the destructor has released events_: drop, do not hold
  std::map<std::pair<int, uint64_t>, remote_key> keys_;
  std::vector<control> control_in_, control_out_;
  // Notifications waiting to be sent (no allocation per notified put or get).
  // A finished put's or get's notification, its operation completing once it is sent: a
  // target out of credits holds the initiator back, and the list holds at most one entry
  // per operation posted and not completed (a peer found dead: the core fails them).
  struct outgoing_note {
    int rank;
    uint32_t len;
    char note[max_note_size];
    void* ctx;
    bool write;
  };
  std::vector<outgoing_note> notes_out_;
  int hellos_ = 0;  // peers heard from during the constructor

  util::spinlock poll_lock_;  // one poller delivers at a time, so messages keep their order
  std::vector<event> delivering_;
  // Messages and notifications the sink refused (back-pressure), in arrival order, offered
  // again before anything newer from the same peer (other peers' go on); a message keeps
  // UCP's descriptor. Under poll_lock_. Once it holds held_cap_ entries, poll stops
  // progressing the worker (credits keep each peer below inbox_depth entries, so that is a
  // last resort).
  std::deque<event> held_;
  std::vector<uint32_t> held_from_;  // held_ entries by peer
  std::vector<uint8_t> blocked_;     // poll's scratch: peers refused in this pass
  size_t held_cap_ = 0;
  std::unique_ptr<send_credits> credits_out_;     // under worker_lock_ or not: atomic
  std::unique_ptr<recv_credits> credits_in_;      // under poll_lock_
  std::vector<std::pair<int, uint32_t>> grants_;  // under poll_lock_: to send
  // Offers one event to the sink; false when it refuses a message or a notification.
  static bool offer(sink& s, const event& e);
  // The sink took a credited message from `rank`: grant credits back in batches.
  void taken_from(int rank);
};

class ucx_context final : public context {
 public:
  ucx_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id);
  ~ucx_context() override;
  const char* name() const override { return "ucx"; }
  std::unique_ptr<device> alloc_device(int index, const device_config& cfg) override;
  local_region register_memory(void* base, size_t size) override;
  void deregister_memory(local_region& mr) override;
  bool region_idle(const local_region& mr) override;
  void release_region(local_region& mr) override;
  rkey_t get_rkey(const local_region& mr) override { return rkey_t{mr.key, 0}; }
  std::string describe() const override;

  bootstrap::bootstrap& boot() { return *boot_; }
  int context_id() const { return context_id_; }
  ucp_context_h handle() const { return ucp_; }
  bool peer_failure_detection() const { return peer_failure_; }
  // Rendezvous data goes as eager active messages of at most this many bytes
  // (WEFT_UCX_CHUNK), so UCP assembles one chunk at a time, not the whole transfer.
  size_t stream_chunk() const { return stream_chunk_; }
  // WEFT_PEER_TIMEOUT: how long a device waits for every peer's greeting.
  int64_t peer_timeout_s() const { return peer_timeout_s_; }

  // A peer's request for registration `key`, by the device `who`: false when there is no
  // such live registration; else its packed key and extent, and the asker is remembered so
  // that deregistration revokes its copy.
  bool lookup_for_peer(uint64_t key, const key_asker& who, std::string& packed, uint64_t& base,
                       uint64_t& size);
  void revoke_acknowledged(uint64_t key, const key_asker& who) { regs_.acknowledged(key, who); }
  void attach(int index, ucx_device* d) { regs_.attach(index, d); }
  void detach(int index) { regs_.detach(index); }

 private:
  struct registration {
    ucp_mem_h memh = nullptr;
    void* base = nullptr;
    size_t size = 0;
    std::string packed;
  };
  std::shared_ptr<bootstrap::bootstrap> boot_;
  const int context_id_;
  ucp_context_h ucp_ = nullptr;
  bool peer_failure_ = true;
  size_t stream_chunk_ = 0;
  int64_t peer_timeout_s_ = 30;
  key_registry<registration, ucx_device> regs_;
  util::unguessable keys_;  // registration keys: never reused, not guessable
};

}  // namespace weft::net::ucx
