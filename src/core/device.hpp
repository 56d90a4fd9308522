// SPDX-License-Identifier: BSD-3-Clause
// A device: one network device of the backend plus the request slab and backlog queue of
// the operations posted on it. Threads on different devices share no lock in here or in the
// backend (a matching engine and a packet pool are shared unless each device has its own;
// see docs/concepts.md, "What threads share"). No lock on the critical
// path. The device is also the backend's sink: it turns arrivals into matches, copies and
// completion signals (the progress engine of the paper's Figure 1).
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "backlog/backlog_queue.hpp"
#include "comp/comp.hpp"
#include "core/counters.hpp"
#include "core/request.hpp"
#include "core/wire.hpp"
#include "net/backend.hpp"
#include "util/generation.hpp"
#include "util/spinlock.hpp"
#include "util/wide_store.hpp"
#include "weft/weft.hpp"

namespace weft::impl {

class runtime_impl;
class packet_pool_impl;

// What a device's backlog holds, one plain value per item.
namespace backlog_work {
struct post {  // a post whose caller refused retry, tried again as it was given
  comm_args args;
  void* owned;  // a copy of the caller's buffer (a send without a completion object)
};
struct signal {  // a completion object that could not take its signal (a full queue)
  comp_impl* comp;
  status_t status;
};
struct control {  // a protocol message to a full peer queue
  int rank;
  uint32_t len;
  wire_header header;
  char body[48];
};
struct rendezvous_put {  // the data of a rendezvous send, when the backend was busy
  int rank;
  uint64_t send_handle, raddr, accept;
  rendezvous_note note;
};
}  // namespace backlog_work
using backlog_item = std::variant<backlog_work::post, backlog_work::signal, backlog_work::control>;

// The completion object a post names. Its handle may carry a generation tag (a recycled
// continuation, a synchronizer allocated per operation): post_comm checked it is live and
// passes the arguments on as they are, without a copy, so every read goes through here.
inline comp_impl* comp_of(const comm_args& a) {
  return util::untagged(a.local_comp.p);
}

// The status a post returns at once: its own arguments and `code`.
inline status_t immediate(const comm_args& a, errorcode_t code) {
  status_t s;
  s.error = code;
  s.rank = a.rank;
  s.tag = a.tag;
  s.buf = a.local_buffer;
  s.size = a.size;
  s.user_context = a.user_context;
  return s;
}

class device_impl final : public net::sink {
 public:
  WEFT_GENERATIONAL_MEMORY  // behind device_t handles, which carry a generation
  device_impl(runtime_impl& rt, int index, packet_pool_impl* pool, size_t inbox_depth,
              bool peers_progress, bool shared);
  ~device_impl() override;

  // ---- posting (core/post.cpp) ----
  status_t post(const comm_args& a);
  // A send (rc rcomp_null) or active message that needs nothing but one eager message
  // (core/post_short.cpp): sent; full (the backend has no room: retry_nomem, noted as
  // post's retry is); or general, when it needs post(), which then does it or says what is
  // wrong (nothing was sent). Inline into its one caller (detail::post_short_impl).
  enum class short_post : uint8_t { sent, full, general };
  [[gnu::always_inline]] inline short_post post_short(int rank, rcomp_t rc, const void* buf,
                                                      size_t size, const comp_impl* comp,
                                                      tag_t tag);
  bool cancel(const comm_args& a);

  // ---- progress (core/progress.cpp) ----
  error_t progress();
  bool on_message(int rank, const void* data, size_t len) override;
  void on_put_local_done(void* ctx, bool ok) override;
  void on_get_done(void* ctx, bool ok) override;
  bool on_remote_notify(int rank, const void* note, size_t len) override;
  bool expects_data(int rank, uint64_t addr, size_t size, const void* note, size_t len) override;
  bool on_ahead(int rank, uint32_t id, const void* data, size_t len) override;

  // Signals `c` with `s` (or queues the signal when `c` cannot take it now). `counted`:
  // the operation was counted as pending on `c`.
  // Inline: it is on the path of every arriving message.
  void complete(comp_impl* c, const status_t& s, bool counted) {
    if (!c) return;
    if (counted && c->kind == comp_kind::cont) {  // never refuses
      c->signal_counted(s);
      return;
    }
    if (counted) c->pending.fetch_sub(1, std::memory_order_relaxed);
    if (!signal_comp(c, s)) defer_signal(c, s);
  }
  // Completes `q` with `code` and the request's own fields, and frees it.
  void finish_request(request* q, errorcode_t code);
  // A control message sent from inside progress: queued in the backlog when the peer's
  // queue is full.
  void send_control(int rank, const wire_header& h, const void* body, size_t len);
  // The backlog holds backlog_size items or more: posts that would add to it are refused
  // with retry_backlog (see docs/api.md, "Back-pressure").
  bool backlog_over() const { return backlog_size() >= backlog_limit; }
  // Both queues: the backlog and the transfers waiting for the backend (data_backlog).
  size_t backlog_size() const { return backlog.size() + data_backlog.size(); }
  bool backlog_empty() const { return backlog.empty() && data_backlog.empty(); }
  // Counts an item just put in the backlog and raises its high-water mark.
  void counted_backlog_push() {
    counters.add(counter_t::backlog_pushes);
    counters.raise(counter_t::backlog_high_water, backlog_size());
  }
  bool peer_dead(int rank) const { return dead_[size_t(rank)].load(std::memory_order_relaxed); }
  size_t pending_operations();
  // A counter: the core's count and the backend's share.
  uint64_t read_counter(counter_t c) const;
  // This device's counters, one line to `out` (WEFT_STATS=1 at finalize).
  void print_counters(FILE* out) const;

  runtime_impl& rt;
  const int index;
  const size_t inbox_depth;
  const bool peers_progress;  // alloc_device_x's promise (net::device_config)
  const bool shared;          // alloc_device_x's `shared`, or the runtime's default device
  std::unique_ptr<net::device> net;
  packet_pool_impl* pool;
  request_slab slab;
  const size_t backlog_limit;
  backlog_queue<backlog_item> backlog;
  // Rendezvous data the backend could not start (its channels or queue full), in the order
  // the clear-to-sends came: tried oldest first, stopping at the first that cannot go
  // (backlog_queue::drain_in_order). At most one per send request: the slab bounds it.
  backlog_queue<backlog_work::rendezvous_put> data_backlog;
  size_t eager_limit;
  size_t inject_limit;
  std::atomic<uint32_t> barrier_epoch{0};
  device_counters counters;

 private:
  // One pass of progress: the backlog, the backend's poll, the periodic check.
  [[gnu::always_inline]] inline error_t progress_once();
  [[gnu::noinline, gnu::cold]] void raise_wire_error();
  // Idle and oversubscribed (WEFT_YIELD): yields the core, or sleeps for a message (idle.cpp).
  [[gnu::noinline]] void give_core_away(uint32_t polls);
  [[gnu::noinline]] void check_if_due();
  // Reports what is wrong with `a` (util::fail); out of line so post's frame stays small.
  [[noreturn, gnu::noinline, gnu::cold]] void refuse_post(const comm_args& a);
  // The signal `c` could not take now, retried from the backlog.
  [[gnu::noinline, gnu::cold]] void defer_signal(comp_impl* c, const status_t& s);
  // Queues work that must not fail for want of room (see backlog_limit).
  void backlog_push(const backlog_item& it, const char* what);
  void data_backlog_push(const backlog_work::rendezvous_put& r);
  template <typename Queue, typename Item>
  void push_or_fail(Queue& q, const Item& it, const char* queue, const char* what);
  bool run_backlog_item(backlog_item& it);
  // One kind of backlog work each; true when it is done with.
  bool retry_work(backlog_work::post& p);
  bool retry_work(backlog_work::signal& g);
  bool retry_work(backlog_work::control& m);
  bool retry_work(backlog_work::rendezvous_put& r);
  // A send or active message: inline in post, its rare parts out of line.
  [[gnu::always_inline]] inline status_t post_out(const comm_args& a);
  // One eager message to the backend, counted once it left; false: the backend is full.
  // A caller told to retry (allow_retry): seen by the periodic check, which then looks at
  // the peers (a dead peer's full queue would otherwise be retried for ever), and counted.
  void note_retry() {
    if (!retried_.load(std::memory_order_relaxed)) retried_.store(true, std::memory_order_relaxed);
    counters.add(counter_t::retries);
  }
  [[gnu::always_inline]] bool send_eager(int rank, const wire_header& h, const void* buf,
                                         size_t size) {
    // The backend copies the header at once with 16-byte loads: written in one store.
    alignas(16) char out[sizeof(wire_header)];
    const header_words w = words_of(h);
    util::store16(out, w.lo, w.hi);
    if (!net->try_send(rank, out, sizeof(out), buf, size)) return false;
    counters.add_two(size <= inject_limit ? counter_t::sent_inject : counter_t::sent_eager,
                     counter_t::bytes_sent, size);
    return true;
  }
  [[gnu::noinline]] status_t post_large(const comm_args& a, wire_header& h);
  [[gnu::noinline]] wire_header address_send(const comm_args& a);
  [[gnu::noinline]] void return_packet(const comm_args& a);
  status_t post_in(const comm_args& a);
  status_t post_rendezvous(const comm_args& a, const wire_header& h);
  status_t post_rma(const comm_args& a);
  // Names are views: a put builds no string unless it fails.
  void check_remote_access(const char* call, std::string_view arg, std::string_view disp_arg,
                           int rank, const rmr_t& m, uint64_t disp, size_t size);
  void check_one_sided(const comm_args& a);
  status_t post_list(const comm_args& a);
  status_t post_list_twosided(const comm_args& a, size_t total);
  status_t post_list_rma(const comm_args& a, size_t total);
  request* alloc_outgoing(const comm_args& a, bool is_am);
  status_t retry_or_backlog(const comm_args& a, errorcode_t code);
  bool copied_if_backlogged(const comm_args& a) const;
  // The receiving side of a match: a posted receive's request, or a receive being posted.
  struct recv_side {
    void* buf;
    size_t size;
    comp_impl* comp;
    void* user_context;
    bool counted;  // the receive was counted as pending on comp
  };
  status_t match_arrived(const recv_side& recv, request* unexpected, const comm_args* poster);
  void match_posted(request* recv, request* unexpected);
  // Inline in on_message: one frame for every arriving active message.
  [[gnu::always_inline]] inline bool deliver_am(int rank, const wire_header& h, const char* data,
                                                size_t size);
  // Out of line, so that the eager paths above keep a small frame.
  [[gnu::noinline, gnu::cold]] bool on_other_message(int rank, const char* p, size_t len);
  [[gnu::noinline, gnu::cold]] void refuse_am(int rank, const wire_header& h, size_t size);
  bool arrive_send(int rank, const wire_header& h, const char* data, size_t size);
  // The rendezvous protocol (core/rendezvous.cpp).
  bool arrive_rts(int rank, const wire_header& h, const rts_body& b, uint32_t id = no_ahead);
  // Publishes `r` (its fields set) as the receive of the data sent ahead of a
  // ready-to-send (backend id `id`), which then goes into its buffer.
  void take_ahead(request* r, uint32_t id);
  bool publish_receive(request* r, int rank);
  void fail_late_receive(matching_engine_impl* e, const match_key& key, uint8_t pol, request* r);
  // The outgoing side of the same race (a rendezvous send, a put or get): see post.cpp.
  bool publish_out(request* r, req_kind k, const comm_args& a);
  bool take_back(request* r, req_kind k);
  void send_refusal(int rank, uint64_t sreq, errorcode_t code);
  void arrive_cts(int rank, const cts_body& b);
  void arrive_nack(int rank, const nack_body& b);
  void accept_rendezvous(const recv_side& recv, request* u);
  void rendezvous_arrived(int rank, const rendezvous_note& n);
  void wire_error(int rank, const std::string& what);
  void periodic_check();
  void check_peers();

 public:
  // Whether `rank` is alive; finding it gone ends what waits on it (device_t::test_peer).
  bool check_peer(int rank);

 private:
  errorcode_t failure_with(int rank);
  void fail_peer(int rank);
  void fail_request(request* q, int rank);
  void finish_rma(request* r, bool ok);

  std::unique_ptr<std::atomic<bool>[]> dead_;
  // Claimed by the one thread that fails a peer found gone (check_peer): progress's
  // periodic check and test_peer may find it at once.
  std::unique_ptr<std::atomic<bool>[]> gone_claimed_;
  std::atomic<int64_t> next_peer_check_ns_{0};
  std::atomic<bool> retried_{false};  // a post answered retry since the last periodic check
  util::spinlock fatal_lock_;
  std::atomic<bool> has_fatal_wire_error_{false};
  std::string fatal_wire_error_;
};

}  // namespace weft::impl
