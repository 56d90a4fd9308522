// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend: one inbox per (rank, device) that every local peer enqueues
// into (bounded MPMC rings of fixed-size cells: its lanes, and the answer lane for answers
// to its own operations), and per-device put channels for large transfers, drained either
// by a pipelined two-process copy or by cross-memory attach.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "net/backend.hpp"
#include "net/shm/bell_socket.hpp"
#include "net/shm/chooser.hpp"
#include "net/shm/layout.hpp"
#include "net/shm/peer_maps.hpp"
#include "net/shm/put_ring.hpp"
#include "net/shm/regions.hpp"
#include "net/shm/segment.hpp"
#include "net/shm/work_list.hpp"

namespace weft::net::shm {

struct settings {
  put_mode mode;  // of rendezvous data
  size_t nchannels;
  size_t chunk_size;
  size_t nslots;
  size_t nlanes;  // WEFT_SHM_LANES; 0 when unset (default_lanes decides per device)
  size_t nregions;
  bool rma_by_cma;         // user puts and gets by cross-memory attach (when permitted)
  bool rma_auto;           // user puts by the chooser's measured choice (WEFT_SHM_RMA=auto)
  bool rma_set;            // WEFT_SHM_RMA was set: it wins over a device's peers_progress
  size_t test_delay_us;    // WEFT_TEST_PIPELINE_DELAY (test builds)
  bool test_split_unread;  // WEFT_TEST_SPLIT_UNREAD (test builds)
  bool stores_auto;        // WEFT_SHM_STORES=auto: each peer's store_chooser decides
  store_mode stores;       // otherwise every pipelined transfer's target stores so
  bool ahead;              // WEFT_SHM_AHEAD: rendezvous data may go before its clear-to-send
  size_t split_min;        // WEFT_SHM_SPLIT: cross-memory rendezvous data copied from both ends
  bool map;                // WEFT_SHM_MAP: puts and gets into shareable memory by a mapping
};

class shm_context;

class shm_device final : public device {
  friend struct fuzz_access;  // tests/fuzz/fuzz_shm.cpp feeds the cell decoder

 public:
  shm_device(shm_context& ctx, int index, const device_config& cfg);
  ~shm_device() override;

  size_t max_message_size() const override { return geo_.cell_size - sizeof(cell_header); }
  size_t max_inject_size() const override { return util::cache_line - sizeof(cell_header); }
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
  bool try_send_ahead(int rank, const void* hdr, size_t hdr_len, const void* payload, size_t len,
                      const void* src, size_t size, void* ctx) override;
  bool accept_ahead(int rank, uint32_t id, void* dst, size_t size, size_t accept, const void* note,
                    size_t note_len) override;
  void refuse_ahead(int rank, uint32_t id) override;
  void cancel_ahead(int rank, void* ctx) override;
  const char* check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t rkey) override;
  size_t poll(sink& s, size_t max) override;
  bool peer_alive(int rank) override;
  void forget_peer(int rank) override;
  bool wait_for_message(uint32_t timeout_us) override;
  int wake_fd() override { return bell_sock_.fd(); }
  bool arm_wake() override;
  void settle_wake() override { bell_sock_.drain(); }
  size_t repair() override;
  uint64_t count(counter_t c) const override;

 private:
  struct lane {
    ring_index* head = nullptr;  // own lanes only
    ring_index* tail = nullptr;
    char* cells = nullptr;   // ncells lines
    char* bodies = nullptr;  // ncells slots of cell_size bytes (none in the answer lane)
    cell_header* cell(uint64_t pos, uint64_t mask) const {
      return reinterpret_cast<cell_header*>(cells + (pos & mask) * cell_line);
    }
    char* body(uint64_t pos, uint64_t mask, size_t cell_size) const {
      return bodies + (pos & mask) * cell_size;
    }
  };
  // Cells of one of our lanes that the sink refused (back-pressure): claimed from the ring
  // but not released, so a sender that keeps sending finds the ring full and sees retry.
  // A held cell is offered again before anything newer from the same sender; other
  // senders' cells in the lane go on (a flood from one peer must not hold up another
  // peer's barrier message). Positions, oldest first, at most the ring's size; while any
  // are held, the lane's consumers go through the lock.
  struct lane_hold {
    std::atomic<bool> active{false};
    util::spinlock lock;
    std::vector<uint64_t> cells;   // held positions
    std::vector<uint32_t> from;    // held cells by sender (local rank)
    std::vector<uint8_t> refused;  // drain_holding's scratch: senders refused this pass
    // repair(): since when the lane's head cell has been claimed but not published. One
    // thread repairs at a time, but not always the same one: relaxed atomics.
    std::atomic<uint64_t> stuck_at{0};
    std::atomic<int64_t> stuck_since_ns{0};
  };
  struct peer {
    segment seg;
    char* base = nullptr;
    bell* bell_ = nullptr;
    std::vector<lane> lanes;   // as many as its header says: each rank sizes its own inbox
    size_t nlanes = 0;         // lanes.size(), for a send to read in one load
    lane answers;              // its answer lane (is_answer)
    char* channels = nullptr;  // its put channels (where they start depends on its lanes)
    pid_t pid = 0;
    // A cross-memory copy found the process gone (ESRCH): dead, even while it lingers as
    // a zombie that kill(pid, 0) still finds until its parent reaps it.
    std::atomic<bool> gone{false};
    chooser choose;        // how rendezvous data to this peer moves (WEFT_SHM_PUT=auto)
    store_chooser stores;  // how it stores our pipelined transfers (WEFT_SHM_STORES=auto)
    bell_address bell_at;  // its device's doorbell socket
    // Its data ahead announced to us and not yet accepted or refused, by its channel.
    util::spinlock ahead_lock;
    std::vector<ahead_msg> ahead;  // size 0: none on that channel
  };
  struct outgoing_put {
    int rank;
    uint32_t channel;
    const char* src;
    size_t size;
    uint64_t next_chunk;
    void* ctx;
    bool get_reply;  // streams our region back to a peer's get
    uint32_t held;   // get_reply: the region (slot) we hold until the data is staged
    uint32_t note_len = 0;
    char note[max_note_size] = {};
    bool finished = false;  // get_reply: streamed; only the notification is left to take
    bool timed = false;     // its time and bytes go to the peer's chooser
    uint64_t ticks = 0;     // timed or store_timed: spent in the copy loop (chooser.hpp)
    store_mode store = store_mode::cached;  // how the target stores it
    bool store_timed = false;               // its time goes to the peer's store_chooser
    size_t piece = 0;                       // bytes per slot (put_start_msg::piece)
    bool ahead = false;                     // sent ahead of its ready-to-send (try_send_ahead)
    bool accepted = false;  // ahead: the target's verdict seen (it left unaccepted_)
  };
  struct incoming_put {
    int rank;
    channel_header* channel;
    char* slots;
    char* dst;
    size_t size;
    uint64_t consumed;
    uint32_t held;  // our region (slot), held until the copy is done
    uint64_t get_ctx;
    bool get_reply;  // the answer to our get with context get_ctx
    uint32_t note_len;
    char note[max_note_size];
    bool copied = false;  // the data is in; only the notification is left to take
    bool timed = false;   // the source's chooser wants our copy time (copy_ticks)
    uint64_t ticks = 0;
    store_mode store = store_mode::cached;  // how the copy writes into dst (the source's word)
    size_t piece = 0;                       // bytes per slot, as the source cut the transfer
    size_t keep = SIZE_MAX;  // data ahead into a shorter buffer: bytes past it dropped
  };
  struct local_event {
    enum kind_t { put_done, get_done, notify, split_done } kind;
    int rank;
    void* ctx;  // notify: the put or get (then) that completes once the note is sent
    bool ok;
    uint32_t note_len;
    char note[max_note_size];
    kind_t then = put_done;
    uint8_t note_kind = kind_notify;  // notify: kind_data_note for rendezvous data's
  };
  // The acknowledgment of an inline put this device applied (apply_put_inline), sent at its
  // next poll or send (send_acks).
  struct pending_ack {
    int rank;
    uint32_t ok;
    uint64_t ctx;
  };
  struct pending_get {  // a pipelined get of ours, waiting for the target's stream
    int rank;
    uint64_t ctx;
    char* dst;
    size_t size;
  };
  struct pending_split {  // rendezvous data of ours split with its target (shm_split.cpp)
    static constexpr uint32_t answer_due = ~0u;
    int rank;
    void* ctx;
    const char* src;
    uint64_t dst, size;
    bool timed;                     // the chooser is told the copies' time
    bool written = false;           // our half is in the target's buffer
    uint64_t ticks = 0;             // our copy loop's time (util::ticks)
    uint64_t target_ticks = 0;      // the target's, from its answer
    uint32_t verdict = answer_due;  // the target's split_done_msg verdict once it answered
    char note[16] = {};
  };
  struct deferred {  // a peer's get we could not answer at once (no channel, full queue)
    int rank;
    bool refuse;
    uint32_t held;  // not refused: the region (slot) acquired for it
    get_request_msg req;
  };

  // A backend cell to `rank`: answers (is_answer, each fits a cell line) into its answer
  // lane, the rest as messages.
  bool enqueue(int rank, uint8_t kind, const void* a, size_t alen, const void* b, size_t blen);
  // A message into the lane of this thread's index, inlined into try_send (every message).
  [[gnu::always_inline]] inline bool enqueue_inline(int rank, uint8_t kind, const void* a,
                                                    size_t alen, const void* b, size_t blen);
  // Claims the next cell of `ln`, a lane of `p`, and publishes the message in it; false
  // when the lane is full.
  [[gnu::always_inline]] inline bool publish(peer& p, const lane& ln, uint8_t kind, const void* a,
                                             size_t alen, const void* b, size_t blen);
  [[gnu::noinline, gnu::cold]] void ring_bell(peer& p);
  uint32_t arm_bell(uint32_t bit);
  // body: the cell's body slot, where the message is when it does not fit inline. Core
  // messages are handed on here; backend cells and malformed ones go out of line.
  // False: the sink refused it; the cell stays claimed (lane_hold).
  bool handle_cell(sink& s, const cell_header* c, const char* body);
  [[gnu::noinline, gnu::cold]] bool handle_other_cell(sink& s, const cell_header* c,
                                                      const char* data);
  uint32_t claim_channel();
  bool any_local_peer_dead();
#ifdef WEFT_TEST_HOOKS
  static void arm_test_hook();
  static void test_hook_after_claim();
#endif
  // The constructor's steps.
  std::string create_segment();
  void agree_and_publish(const std::string& name);
  void attach_peers();
  void init_lane(lane& ln, size_t offset);
  // repair()'s step for one lane: lane l of own_lanes_, or the answer lane (l == nlanes).
  bool repair_lane(const lane& ln, lane_hold& h, size_t l, int64_t now);
  // The note of a put or get done at once, then its completion (`then`, ctx); both wait
  // in events_ while the target's lane is full, so the operation completes only once its
  // note is on its way: a full target holds the initiator back, and events_ holds at most
  // one entry per operation posted and not completed.
  // `kind`: kind_notify, or kind_data_note for the core's rendezvous data (an answer).
  void send_note_then(int rank, const void* note, size_t len, local_event::kind_t then, void* ctx,
                      uint8_t kind);
  void log_refusal(const char* op, int rank, rkey_t k, uint64_t addr, size_t size, const char* why);
  // Sends the acknowledgments in acks_ that the initiators' answer lanes have room for.
  void send_acks();
  // `data`: the core's rendezvous data, into a buffer the target named (nothing to check).
  void direct_access(bool write, int rank, void* local, size_t size, uint64_t remote_addr, rkey_t k,
                     const void* note, size_t note_len, void* ctx, bool data = false);
  put_mode rma_mechanism() const;
  bool mapped_target(int rank, rkey_t k);
  bool stream_out(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                  const void* note, size_t note_len, void* ctx, uint16_t kind);
  bool start_stream(int rank, put_start_msg& m);
  // Rendezvous data by cross-memory attach from both ends (shm_split.cpp): false when it
  // cannot be split (the target's answer lane is full); then the source copies it all.
  bool split_write(int rank, const void* src, size_t size, uint64_t remote_addr, const void* note,
                   void* ctx, bool timed);
  // The target's side: check the buffer, read the second half, answer.
  void on_split_read(sink& s, int src, const split_read_msg& m);
  // The source's side of the answer; the transfer ends once both halves are in.
  void on_split_done(int src, const split_done_msg& m);
  // Under splits_lock_ taken by the caller: the entry for (rank, ctx), or splits_.end().
  std::vector<pending_split>::iterator find_split(int rank, uint64_t ctx);
  void drop_split(int rank, uint64_t ctx);
  enum class settled { unknown, waiting, complete };
  template <typename Mark>
  settled settle_split(int rank, uint64_t ctx, Mark&& mark, pending_split& done);
  void finish_split(pending_split p);
  // A cross-memory copy to or from `rank` failed with `err` (shm_rma.cpp).
  void copy_failed(const char* op, int rank, int err, local_event::kind_t done, void* ctx);
  bool take_get(int rank, uint64_t ctx, pending_get* out = nullptr);
  bool put_inline(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                  const void* note, size_t note_len, void* ctx);
  bool apply_put_inline(sink& s, int src, uint64_t remote_addr, rkey_t k, uint64_t ctx,
                        const char* note, size_t note_len, const char* data, size_t size);
  bool take_put(int rank, uint64_t ctx);
  bool serve_get(int rank, const get_request_msg& m, uint32_t held);
  // Whether a lane has nothing to take: its next cell not yet published and no refused
  // cells held. Inline in poll, so that an idle poll makes no call per lane.
  bool lane_idle(const lane& ln, const lane_hold& hold) const {
    const uint64_t pos = ln.head->value.load(std::memory_order_relaxed);
    return ln.cell(pos, mask_)->seq.load(std::memory_order_acquire) != pos + 1 &&
           !hold.active.load(std::memory_order_acquire);
  }
  [[gnu::noinline]] size_t advance_work(sink& s);
  // Pipelined transfers of at least this many bytes have their stores chosen
  // (WEFT_SHM_STORES=auto); smaller ones are cached.
  static constexpr size_t stream_min = 256 << 10;
  store_mode choose_stores(peer& p, size_t size, bool& timed);
  static void copy_in(store_mode m, char* dst, const char* src, size_t n);
  [[gnu::noinline]] size_t poll_lanes(sink& s, uint64_t used, size_t max);
  size_t drain_lane(sink& s, const lane& ln, lane_hold& hold, size_t max);
  [[gnu::noinline, gnu::cold]] void hold_run(lane_hold& hold, const lane& ln, uint64_t from,
                                             uint64_t to);
  [[gnu::noinline, gnu::cold]] size_t drain_holding(sink& s, const lane& ln, lane_hold& hold,
                                                    size_t max);
  // The answer lane: every cell taken as it comes, nothing held.
  [[gnu::noinline]] size_t drain_answers(sink& s, size_t max);
  // Claims the published cells of `ln` from its head in runs and passes each position to
  // `take`, releasing the cell when it returns true; stops at the first false (take has
  // kept that cell and the rest of its run). Returns the cells released.
  template <class Take>
  size_t claim_runs(const lane& ln, size_t max, Take&& take);
  // The announcement of a pipelined transfer from `src` into this rank (a put, rendezvous
  // data, or the answer to our get), its channel checked and accepted or refused.
  bool accept_stream(sink& s, int src, const put_start_msg& m);
  // Under hold.lock: offers one claimed cell, or holds it behind its sender's held ones.
  bool offer_cell(sink& s, const lane& ln, lane_hold& hold, uint64_t pos);
  // Channel c of the channel area at `channels` (own_channels_ or a peer's).
  channel_header* channel_of(char* channels, uint32_t c) const {
    return reinterpret_cast<channel_header*>(channels + geo_.channel_stride() * c);
  }
  char* slots_of(char* channels, uint32_t c) const {
    return channels + geo_.channel_stride() * c + geometry::align(sizeof(channel_header), 4096);
  }
  // Whether a peer's announcement names a piece this device's slots can hold.
  bool piece_ok(uint32_t piece) const {
    return piece != 0 && piece <= geo_.chunk_size;
  }
  // Takes the announcement of data ahead on channel `id` of `p` into *out (nullptr: drops
  // it); false when there is none (refused or forgotten already).
  static bool take_announcement(peer& p, uint32_t id, ahead_msg* out);
  static size_t npieces(size_t size, size_t piece) {
    return (size + piece - 1) / piece;
  }

  // A transfer the chooser gives the pipeline (rendezvous data, or a put of a device whose
  // puts it chooses) finds every channel taken: true when the oldest has been held 16 times
  // longer than cross-memory attach would take to move `size` bytes to `p`. Its target
  // computes instead of progressing; the transfer goes around the channels.
  bool bypass_channels(const peer& p, size_t size) const;

  shm_context& ctx_;
  int index_;
  // This device's puts by the chooser's measured choice: WEFT_SHM_RMA=auto, or a device
  // allocated with peers_progress while WEFT_SHM_RMA is unset.
  bool rma_auto_;
  geometry geo_;
  uint64_t mask_;
  uint32_t lap_shift_;  // log2(ncells): a position's lap of the ring
  segment own_;
  char* own_base_ = nullptr;
  char* own_channels_ = nullptr;
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_at_;  // util::ticks() of each channel's claim
  bell* own_bell_ = nullptr;
  std::vector<lane> own_lanes_;
  std::unique_ptr<lane_hold[]> holds_;        // one per own lane
  lane own_answers_;                          // the answer lane: never holds a cell
  lane_hold answers_hold_;                    // its repair() state only
  std::vector<std::unique_ptr<peer>> peers_;  // by rank; ours points at own_
  work_list<outgoing_put> outgoing_;
  work_list<incoming_put> incoming_;
  work_list<local_event> events_;
  work_list<deferred> deferred_;
  work_list<pending_ack> acks_;
  util::spinlock gets_lock_;  // also guards puts_
  std::vector<pending_get> gets_;
  put_ring puts_;  // our inline puts, awaiting their acknowledgments
  util::spinlock splits_lock_;
  std::vector<pending_split> splits_;  // ours split with their targets: one per send at most
  std::atomic<uint64_t> bytes_pipelined_{0}, bytes_cross_memory_{0}, bytes_streamed_{0},
      bytes_mapped_{0}, bypassed_{0}, split_read_{0};
  // Written only under gets_lock_, read by count() at any time.
  std::atomic<uint64_t> puts_small_{0};
  void bump_puts_small(int64_t by) {
    puts_small_.store(puts_small_.load(std::memory_order_relaxed) + uint64_t(by),
                      std::memory_order_relaxed);
  }
  // Data of ours sent ahead that the target has neither accepted nor refused: at most
  // nchannels - 1 transfers, so that messages nobody receives yet never hold every channel.
  std::atomic<uint32_t> unaccepted_{0};
  bell_socket bell_sock_;  // the doorbell as a descriptor (mixed); none for a lone rank
};

class shm_context final : public context {
 public:
  shm_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id);
  const char* name() const override { return "shm"; }
  std::unique_ptr<device> alloc_device(int index, const device_config& cfg) override;
  local_region register_memory(void* base, size_t size) override;
  // Registers under a name given by the caller (a mixed job: the network backend's key).
  local_region register_named(void* base, size_t size, rkey_t name);
  void deregister_memory(local_region& mr) override;
  bool region_idle(const local_region& mr) override;
  void release_region(local_region& mr) override;
  rkey_t get_rkey(const local_region& mr) override;
  std::string describe() const override;

  bootstrap::bootstrap& boot() { return *boot_; }
  int context_id() const { return context_id_; }
  const settings& config() const { return settings_; }
  bool cma_permitted() const { return cma_ok_; }
  pid_t pid_of(int rank) const { return pids_[size_t(rank)]; }
  region_table& regions() { return *regions_; }
  // Peers' shareable memory mapped here; nullptr when WEFT_SHM_MAP=0 or cross-memory
  // attach (whose permission pidfd_getfd needs too) is not permitted.
  peer_maps* maps() { return maps_.get(); }

 private:
  std::shared_ptr<bootstrap::bootstrap> boot_;
  int context_id_;
  settings settings_;
  bool cma_ok_ = false;
  std::vector<pid_t> pids_;
  std::unique_ptr<region_table> regions_;
  std::unique_ptr<peer_maps> maps_;
};

}  // namespace weft::net::shm
