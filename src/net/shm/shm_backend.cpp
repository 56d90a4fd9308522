// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/shm_backend.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/cma.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/mpmc_queue.hpp"
#include "util/process.hpp"
#include "util/settings.hpp"
#include "util/small_copy.hpp"
#include "util/stream_copy.hpp"
#include "util/thread_index.hpp"
#include "util/ticks.hpp"
#include "util/tsan.hpp"

namespace weft::net::shm {

namespace {
// The host's hardware threads, as default_lanes counts them (a test build may pretend).
size_t hw_threads() {
#ifdef WEFT_TEST_HOOKS
  if (size_t t = *util::get_size(util::setting::test_hw_threads)) return t;
#endif
  return std::thread::hardware_concurrency();
}

// Read by peers through cross-memory attach at start-up to learn whether it is permitted.
volatile uint64_t cma_probe_cookie = 0x57454654434d4121ull;

std::string key(const char* what, int ctx, int index) {
  return std::string("shm-") + what + "-" + std::to_string(ctx) + "-" + std::to_string(index);
}

settings read_settings() {
  settings s{};
  using util::setting;
  const std::string put = util::get_text(setting::shm_put);
  s.mode = put == "cma"        ? put_mode::cma
           : put == "pipeline" ? put_mode::pipeline
                               : put_mode::automatic;
  const std::string rma = util::get_text(setting::shm_rma);
  s.rma_by_cma = rma != "pipeline";  // auto: gets by cross-memory attach
  s.rma_auto = rma == "auto";
  s.rma_set = util::is_set(setting::shm_rma);
  const std::string stores = util::get_text(setting::shm_stores);
  s.stores_auto = stores == "auto";
  s.stores = stores == "streaming" ? store_mode::streaming : store_mode::cached;
  s.ahead = util::get_flag(setting::shm_ahead);
  // Each size is checked against its row's range in settings.def.
  s.nchannels = *util::get_size(setting::shm_channels);
  s.chunk_size = *util::get_size(setting::shm_chunk);
  s.nslots = *util::get_size(setting::shm_slots);
  s.nlanes = util::get_size(setting::shm_lanes).value_or(0);
  s.nregions = *util::get_size(setting::shm_regions);
#ifdef WEFT_TEST_HOOKS
  s.test_delay_us = *util::get_size(setting::test_pipeline_delay);
#endif
  if (s.chunk_size % 64)
    util::fail("environment", "WEFT_SHM_CHUNK", std::to_string(s.chunk_size),
               "must be a multiple of 64");
  return s;
}

}  // namespace

// ---- context ------------------------------------------------------------------------------

shm_context::shm_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id)
    : boot_(std::move(boot)), context_id_(context_id), settings_(read_settings()) {
  auto& b = *boot_;
  if (b.local_size() != b.size())
    util::fail(
        "shm backend", "ranks", std::to_string(b.size()),
        "shared memory reaches only the " + std::to_string(b.local_size()) +
            " ranks on this host; WEFT_BACKEND=auto or mixed adds the network for the others");
  char info[64];
  snprintf(info, sizeof(info), "%d %llx", int(getpid()),
           static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&cma_probe_cookie)));
  b.put(key("pid", context_id_, 0), info);
  b.fence();  // every exchange is put, fence, get: what PMI and PMIx guarantee
  pids_.resize(size_t(b.size()));
  // WEFT_SHM_CMA=0 forbids cross-memory attach outright, as a kernel policy would.
  cma_ok_ = util::get_flag(util::setting::shm_cma);
  for (int r = 0; r < b.size(); ++r) {
    std::string v = b.get(r, key("pid", context_id_, 0));
    int pid = 0;
    unsigned long long addr = 0;
    if (sscanf(v.c_str(), "%d %llx", &pid, &addr) != 2)
      util::fail("shm backend", "peer info", v,
                 "malformed bootstrap value from rank " + std::to_string(r));
    pids_[size_t(r)] = pid;
    if (r == b.rank() || !cma_ok_) continue;
    uint64_t got = 0;
    if (cma_read(pid, &got, addr, sizeof(got)) != 0 || got != cma_probe_cookie) cma_ok_ = false;
  }
  if (settings_.mode == put_mode::automatic && !cma_ok_) settings_.mode = put_mode::pipeline;
  if (settings_.mode == put_mode::cma && !cma_ok_) {
    WEFT_LOG(warn,
             "WEFT_SHM_PUT=cma but cross-memory attach is not permitted here; "
             "falling back to the pipelined copy");
    settings_.mode = put_mode::pipeline;
  }
  regions_ = std::make_unique<region_table>(b, context_id_, settings_.nregions);
  WEFT_LOG(info, "shm context %d: %s", context_id_, describe().c_str());
}

std::string shm_context::describe() const {
  std::string s = "shm: large transfers by ";
  s += settings_.mode == put_mode::cma        ? "cross-memory attach"
       : settings_.mode == put_mode::pipeline ? "pipelined copy"
                                              : "pipelined copy or cross-memory attach, per peer "
                                                "and size, whichever moved more lately";
  s += " (channels " + std::to_string(settings_.nchannels) + ", chunk " +
       std::to_string(settings_.chunk_size) + " B x " + std::to_string(settings_.nslots) +
       " slots); user puts and gets by " +
       (settings_.rma_auto && cma_ok_     ? "the measured choice (gets by cross-memory attach)"
        : settings_.rma_by_cma && cma_ok_ ? "cross-memory attach"
                                          : "pipelined copy") +
       (!settings_.rma_set && cma_ok_ ? " (a device allocated with peers_progress: puts by the "
                                        "measured choice)"
                                      : "") +
       "; " +
       (settings_.nlanes
            ? std::to_string(settings_.nlanes) + " inbox lanes"
            : "inbox lanes: " +
                  std::to_string(default_lanes(true, hw_threads(), size_t(boot_->local_size()))) +
                  " on shared devices, " + std::to_string(base_lanes) + " on others") +
       "; cross-memory attach " + (cma_ok_ ? "permitted" : "not permitted");
  return s;
}

std::unique_ptr<device> shm_context::alloc_device(int index, const device_config& cfg) {
  return std::make_unique<shm_device>(*this, index, cfg);
}

// Shared memory pins nothing: registration records the region in this rank's table, which
// every access checks and holds (see regions.hpp).
local_region shm_context::register_memory(void* base, size_t size) {
  return register_named(base, size, regions_->next_name());
}
local_region shm_context::register_named(void* base, size_t size, rkey_t name) {
  const uint32_t slot = regions_->add(base, size, name);
  return local_region{base, size, name.key, name.generation, nullptr, slot};
}
void shm_context::deregister_memory(local_region& mr) {
  regions_->retire(uint32_t(mr.local));
}
bool shm_context::region_idle(const local_region& mr) {
  return regions_->idle(uint32_t(mr.local));
}
void shm_context::release_region(local_region& mr) {
  regions_->recycle(uint32_t(mr.local));
  mr = local_region{};
}
rkey_t shm_context::get_rkey(const local_region& mr) {
  return rkey_t{mr.key, mr.generation};
}

// ---- device -------------------------------------------------------------------------------

shm_device::shm_device(shm_context& ctx, int index, const device_config& cfg)
    : ctx_(ctx),
      index_(index),
      rma_auto_(ctx.config().rma_auto || (cfg.peers_progress && !ctx.config().rma_set)) {
  const auto& st = ctx.config();
  geo_.cell_size = util::round_up_pow2(std::max<size_t>(cfg.cell_size, 128));
  geo_.ncells = util::round_up_pow2(std::max<size_t>(cfg.inbox_depth, 2));
  geo_.nchannels = st.nchannels;
  geo_.chunk_size = st.chunk_size;
  geo_.nslots = st.nslots;
  geo_.nlanes = st.nlanes
                    ? st.nlanes
                    : default_lanes(cfg.shared, hw_threads(), size_t(ctx.boot().local_size()));
  mask_ = geo_.ncells - 1;
  lap_shift_ = uint32_t(__builtin_ctzll(geo_.ncells));
#ifdef WEFT_TEST_HOOKS
  arm_test_hook();
#endif

  const std::string name = create_segment();
  agree_and_publish(name);
  attach_peers();
  own_.prefault(geo_.channels_offset(), geo_.channel_stride() * geo_.nchannels);
  const int n = ctx_.boot().size();
  if (n > 1)
    own_.unlink_when_attached(reinterpret_cast<segment_header*>(own_base_)->attached,
                              uint32_t(n - 1), "device segment");
}

// This device's own segment: its header (what peers check before they rely on it), its
// bell, and its lanes and channels, initialised. Returns its name ("" alone).
std::string shm_device::create_segment() {
  auto& b = ctx_.boot();
  const int me = b.rank(), n = b.size();
  std::string name;
  if (n > 1) {
    name = "/weft-" + b.job_id() + "-" + std::to_string(ctx_.context_id()) + "-" +
           std::to_string(index_) + "-" + std::to_string(me);
  }
  const char* settings =
      "WEFT_INBOX_DEPTH and WEFT_SHM_LANES (inbox), WEFT_PACKET_SIZE (cell), "
      "WEFT_SHM_CHANNELS, WEFT_SHM_SLOTS and WEFT_SHM_CHUNK (put channels)";
  // Lanes beyond the usual 4 that nobody asked for (default_lanes) give way to a small
  // /dev/shm: peers read each device's lanes from its header, so ranks may differ.
  const size_t wanted = geo_.nlanes;
  const bool may_shrink = !ctx_.config().nlanes && wanted > base_lanes;
  if (!own_.create(name, geo_.total(), settings, may_shrink)) {
    geo_.nlanes = base_lanes;
    own_.create(name, geo_.total(), settings);
    WEFT_LOG(warn,
             "shm: /dev/shm has no room for device %d's %zu inbox lanes; it has %zu (threads "
             "sharing it take turns beyond that; give /dev/shm more room)",
             index_, wanted, geo_.nlanes);
  }
  WEFT_LOG(debug, "shm: device %d of context %d: %zu inbox lanes", index_, ctx_.context_id(),
           geo_.nlanes);
  own_base_ = static_cast<char*>(own_.base());
  own_channels_ = own_base_ + geo_.channels_offset();
  claimed_at_ = std::make_unique<std::atomic<uint64_t>[]>(geo_.nchannels);
  auto* h = new (own_base_) segment_header{};
  h->magic = segment_magic;
  h->layout = layout_version;
  h->rank = uint32_t(me);
  h->pid = getpid();
  h->cell_size = geo_.cell_size;
  h->ncells = geo_.ncells;
  h->nchannels = geo_.nchannels;
  h->chunk_size = geo_.chunk_size;
  h->nslots = geo_.nslots;
  h->nlanes = geo_.nlanes;
  h->cookie = b.cookie();
  own_bell_ = new (own_base_ + geo_.bell_offset()) bell{};
  own_bell_->armed.store(0);
  if (!(n > 1 ? bell_sock_.open(bell_address_of(name)) : bell_sock_.open_private()))
    WEFT_LOG(info,
             "shm: no doorbell socket for device %d (%s); a thread sleeping on shared "
             "memory and the network together looks at shared memory every 100 us",
             index_, strerror(errno));
  own_lanes_.resize(geo_.nlanes);
  holds_.reset(new lane_hold[geo_.nlanes]);
  for (size_t l = 0; l < geo_.nlanes; ++l) {
    holds_[l].cells.reserve(geo_.ncells);
    holds_[l].from.assign(size_t(n), 0);
    holds_[l].refused.assign(size_t(n), 0);
    lane& ln = own_lanes_[l];
    ln.head = new (own_base_ + geo_.head_offset(l)) ring_index{};
    ln.head->value.store(0);
    ln.tail = new (own_base_ + geo_.tail_offset(l)) ring_index{};
    ln.tail->value.store(0);
    ln.cells = own_base_ + geo_.cells_offset(l);
    ln.bodies = own_base_ + geo_.bodies_offset(l);
    for (size_t i = 0; i < geo_.ncells; ++i) {
      auto* c = new (ln.cells + i * cell_line) cell_header{};
      c->seq.store(i, std::memory_order_relaxed);
    }
  }
  for (uint32_t c = 0; c < geo_.nchannels; ++c) {
    auto* ch = new (channel_of(own_channels_, c)) channel_header{};
    ch->busy.store(0);
    ch->written.store(0);
    ch->consumed.store(0);
  }
  // Peers learn the segment name only through the bootstrap (a socket round trip), which
  // orders these initialising stores before their first access.
  return name;
}

// The geometry checked on every rank, then the segment's name published. Fences are
// collective over the whole job even when this host has one rank (a mixed job's shared
// memory runs over a host's ranks only, on the job's bootstrap). Settings first, so that
// every rank of a mismatched job names both sides before anyone touches (or, failing,
// unlinks) a segment.
void shm_device::agree_and_publish(const std::string& name) {
  auto& b = ctx_.boot();
  char mine[256];
  snprintf(mine, sizeof(mine), "cell_size=%zu cells=%zu channels=%zu chunk_size=%zu slots=%zu",
           size_t(geo_.cell_size), size_t(geo_.ncells), size_t(geo_.nchannels),
           size_t(geo_.chunk_size), size_t(geo_.nslots));
  b.check_agreement(key("geo", ctx_.context_id(), index_), mine, "alloc_device (shm)",
                    "device geometry",
                    "devices of the same index must be allocated with the same settings "
                    "(WEFT_PACKET_SIZE, WEFT_INBOX_DEPTH, WEFT_SHM_*)");
  b.put(key("seg", ctx_.context_id(), index_), name);
  b.fence();
}

// Every peer's segment, mapped and checked (magic, layout, cookie, geometry, size).
void shm_device::attach_peers() {
  auto& b = ctx_.boot();
  const int me = b.rank(), n = b.size();
  peers_.resize(size_t(n));
  for (int r = 0; r < n; ++r) {
    auto p = std::make_unique<peer>();
    geometry pg = geo_;  // the peer's: its own number of lanes, the rest as ours
    if (r == me) {
      p->base = own_base_;
      if (!own_.name().empty()) p->bell_at = bell_address_of(own_.name());
    } else {
      // Map whatever the peer created, check its header, and only then rely on its size:
      // a peer with other settings gets a message naming them, not a bus error.
      const std::string seg_name = b.get(r, key("seg", ctx_.context_id(), index_));
      p->bell_at = bell_address_of(seg_name);
      p->seg.attach(seg_name, sizeof(segment_header));
      p->base = static_cast<char*>(p->seg.base());
      auto* ph = reinterpret_cast<segment_header*>(p->base);
      if (ph->magic != segment_magic || ph->layout != layout_version || ph->rank != uint32_t(r))
        util::fail("alloc_device (shm)", "peer segment of rank " + std::to_string(r),
                   std::to_string(ph->layout),
                   "not a Weft shm segment of layout version " + std::to_string(layout_version));
      if (ph->cookie != b.cookie())
        fail_foreign_segment("alloc_device (shm)", b.job_rank(r), seg_name);
      // Lanes are the peer's own choice (default_lanes depends on its host), within the
      // range the bell's mask allows; the rest must be as published and agreed.
      pg.nlanes = ph->nlanes;
      if (ph->cell_size != geo_.cell_size || ph->ncells != geo_.ncells || ph->nlanes == 0 ||
          ph->nlanes > max_lanes || ph->nchannels != geo_.nchannels)
        util::fail("alloc_device (shm)", "peer segment of rank " + std::to_string(r), "header",
                   "disagrees with the settings the peer published");
      if (p->seg.size() < pg.total())
        util::fail("alloc_device (shm)", "peer segment of rank " + std::to_string(r),
                   std::to_string(p->seg.size()) + " bytes",
                   "smaller than its header says (" + std::to_string(pg.total()) + ")");
      // The peer's staging slots, which this rank reads: mapped now, not by the first
      // large message (see docs/shm.md, "First transfer").
      p->seg.prefault(pg.channels_offset(), pg.channel_stride() * pg.nchannels);
    }
    p->bell_ = reinterpret_cast<bell*>(p->base + pg.bell_offset());
    p->channels = p->base + pg.channels_offset();
    p->lanes.resize(pg.nlanes);
    p->nlanes = pg.nlanes;
    p->ahead.resize(pg.nchannels, ahead_msg{});
    for (size_t l = 0; l < pg.nlanes; ++l) {
      p->lanes[l].tail = reinterpret_cast<ring_index*>(p->base + pg.tail_offset(l));
      p->lanes[l].cells = p->base + pg.cells_offset(l);
      p->lanes[l].bodies = p->base + pg.bodies_offset(l);
    }
    p->pid = ctx_.pid_of(r);
    if (r != me)
      reinterpret_cast<segment_header*>(p->base)->attached.fetch_add(1, std::memory_order_acq_rel);
    peers_[size_t(r)] = std::move(p);
  }
}

shm_device::~shm_device() = default;

channel_header* shm_device::channel_of(char* channels, uint32_t c) const {
  return reinterpret_cast<channel_header*>(channels + geo_.channel_stride() * c);
}

char* shm_device::slots_of(char* channels, uint32_t c) const {
  return channels + geo_.channel_stride() * c + geometry::align(sizeof(channel_header), 4096);
}

bool shm_device::enqueue_inline(int rank, uint8_t kind, const void* a, size_t alen, const void* b,
                                size_t blen) {
  peer& p = *peers_[size_t(rank)];
  // One thread's messages to one peer share a lane, so they stay in order. No division
  // while there are no more threads than lanes (a divide is tens of cycles).
  const size_t t = util::thread_index(), nlanes = p.nlanes;
  const size_t li = t < nlanes ? t : t % nlanes;
  const lane& ln = p.lanes[li];
  // The peer polls only the lanes marked in its bell (the line this send reads for `armed`
  // anyway), so the first claim in a lane marks it first. A poll that read the mask just
  // before the bit landed finds the cell at its next poll; a sleeper rereads every lane's
  // tail, not the mask, so it never sleeps over the cell.
  const uint64_t bit = uint64_t(1) << li;
  if (!(p.bell_->lanes_used.load(std::memory_order_relaxed) & bit)) [[unlikely]]
    p.bell_->lanes_used.fetch_or(bit, std::memory_order_seq_cst);
  uint64_t pos = ln.tail->value.load(std::memory_order_relaxed);
  for (;;) {
    cell_header* c = ln.cell(pos, mask_);
    uint64_t seq = c->seq.load(std::memory_order_acquire);
    int64_t dif = int64_t(seq - pos);
    if (dif == 0) {
      if (ln.tail->value.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                               std::memory_order_relaxed)) {
        // Whose claim this is, first: if this process dies before it publishes, the
        // consumer's repair() can tell the cell from one a live sender is still filling.
        c->src = uint16_t(ctx_.boot().rank());
        c->lap = uint8_t(pos >> lap_shift_);
#ifdef WEFT_TEST_HOOKS
        test_hook_after_claim();
#endif
        const size_t len = alen + blen;
        c->len = uint32_t(len);
        c->kind = kind;
        char* data = len <= inline_capacity ? reinterpret_cast<char*>(c + 1)
                                            : ln.body(pos, mask_, geo_.cell_size);
        util::small_copy(data, a, alen);
        util::small_copy(data + alen, b, blen);
        c->seq.store(pos + 1, std::memory_order_release);
        // The claim above was a sequentially consistent read-modify-write of the tail, and
        // a sleeper arms the bell before it rereads every tail: either it sees this claim
        // or this load sees the bell armed. Only the producer that disarms it wakes.
        if (p.bell_->armed.load(std::memory_order_seq_cst)) [[unlikely]]
          ring_bell(p);
        return true;
      }
    } else if (dif < 0) {
      return false;  // full
    } else {
      pos = ln.tail->value.load(std::memory_order_relaxed);
    }
  }
}

// Wakes whoever sleeps on a peer's device: futex sleepers and descriptor sleepers.
void shm_device::ring_bell(peer& p) {
  const uint32_t armed = p.bell_->armed.exchange(0, std::memory_order_seq_cst);
  if (armed & bell_futex)
    syscall(SYS_futex, &p.bell_->armed, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  if (armed & bell_fd) bell_sock_.ring(p.bell_at);
}

bool shm_device::enqueue(int rank, uint8_t kind, const void* a, size_t alen, const void* b,
                         size_t blen) {
  return enqueue_inline(rank, kind, a, alen, b, blen);
}

bool shm_device::try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                          size_t len) {
  return enqueue_inline(rank, kind_message, hdr, hdr_len, payload, len);
}

// A channel of this device for one pipelined transfer, or c == nchannels when all are busy.
uint32_t shm_device::claim_channel() {
  uint32_t c = 0;
  for (; c < geo_.nchannels; ++c) {
    uint32_t expect = 0;
    auto* ch = channel_of(own_channels_, c);
    if (ch->busy.load(std::memory_order_relaxed) == 0 &&
        ch->busy.compare_exchange_strong(expect, 1, std::memory_order_acquire))
      break;
  }
  if (c < geo_.nchannels) {
    claimed_at_[c].store(util::ticks(), std::memory_order_relaxed);
    auto* ch = channel_of(own_channels_, c);
    ch->written.store(0, std::memory_order_relaxed);
    ch->consumed.store(0, std::memory_order_relaxed);
    ch->verdict.store(verdict_pending, std::memory_order_relaxed);
  }
  return c;
}

void shm_device::send_note(int rank, const void* note, size_t len) {
  notify_msg m{};
  memcpy(m.note, note, len);
  if (!enqueue(rank, kind_notify, &m, len, nullptr, 0)) {
    local_event e{local_event::notify, rank, nullptr, true, uint32_t(len), {}};
    memcpy(e.note, note, len);
    events_.add(e);
  }
}

void shm_device::log_refusal(const char* op, int rank, rkey_t k, uint64_t addr, size_t size,
                             const char* why) {
  WEFT_LOG(warn,
           "shm: %s of %zu bytes at 0x%llx in region %llu (generation %llu) of rank %d "
           "refused: %s",
           op, size, static_cast<unsigned long long>(addr), static_cast<unsigned long long>(k.key),
           static_cast<unsigned long long>(k.generation), ctx_.boot().job_rank(rank), why);
}

const char* shm_device::check_remote(int rank, uint64_t remote_addr, size_t size, rkey_t k) {
  return ctx_.regions().check(rank, k, remote_addr, size);
}

// A put (write) or get done at once by the initiator: check and hold the target's region,
// copy (memmove to itself, cross-memory attach to a peer), release, notify the target,
// and report completion at the next poll.
void shm_device::direct_access(bool write, int rank, void* local, size_t size, uint64_t remote_addr,
                               rkey_t k, const void* note, size_t note_len, void* ctx, bool data) {
  const auto done = write ? local_event::put_done : local_event::get_done;
  auto& regions = ctx_.regions();
  uint32_t held = 0;
  const char* why = data ? nullptr : regions.acquire(rank, k, remote_addr, size, held);
  if (why) {
    log_refusal(write ? "put" : "get", rank, k, remote_addr, size, why);
    events_.add(local_event{done, rank, ctx, false, 0, {}});
    return;
  }
  int err = 0;
  if (size) {
    auto* remote = reinterpret_cast<void*>(remote_addr);
    if (rank == ctx_.boot().rank())
      write ? memmove(remote, local, size) : memmove(local, remote, size);
    else if (write)
      err = cma_write(peers_[size_t(rank)]->pid, local, remote_addr, size);
    else
      err = cma_read(peers_[size_t(rank)]->pid, local, remote_addr, size);
  }
  regions.release(rank, held);
  if (!err && rank != ctx_.boot().rank())
    bytes_cross_memory_.fetch_add(size, std::memory_order_relaxed);
  if (err == ESRCH) {  // the peer has died: the operation fails, and the core says why
    peers_[size_t(rank)]->gone.store(true, std::memory_order_relaxed);
    events_.add(local_event{done, rank, ctx, false, 0, {}});
    return;
  }
  if (err)
    util::fail(write ? "put (shm, cross-memory attach)" : "get (shm, cross-memory attach)", "rank",
               std::to_string(ctx_.boot().job_rank(rank)), strerror(err));
  if (note_len) send_note(rank, note, note_len);
  events_.add(local_event{done, rank, ctx, true, 0, {}});
}

// Claims a channel for `m` and announces it to `rank`; false when no channel is free or the
// peer's queue is full (nothing claimed then).
bool shm_device::start_stream(int rank, put_start_msg& m) {
  m.channel = claim_channel();
  if (m.channel == geo_.nchannels) return false;
  m.piece = uint32_t(piece_for(m.size, geo_.chunk_size, outgoing_.empty()));
  // Only a timed transfer's: the line is the target's (it writes `consumed` there).
  if (m.timed) channel_of(own_channels_, m.channel)->copy_ticks.store(0, std::memory_order_relaxed);
  if (enqueue(rank, kind_put_start, &m, sizeof(m), nullptr, 0)) return true;
  channel_of(own_channels_, m.channel)->busy.store(0, std::memory_order_release);
  return false;
}

// Rendezvous data moves as WEFT_SHM_PUT says; a user's put by cross-memory attach when
// permitted (WEFT_SHM_RMA), since then it needs no CPU of the target, and is checked against
// the target's region table either way.
bool shm_device::try_send_data(int rank, const void* src, size_t size, uint64_t remote_addr,
                               const void* note, size_t note_len, void* ctx) {
  return stream_out(rank, src, size, remote_addr, rkey_t{}, note, note_len, ctx, stream_data);
}

bool shm_device::try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  return stream_out(rank, src, size, remote_addr, k, note, note_len, ctx, stream_put);
}

bool shm_device::stream_out(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                            const void* note, size_t note_len, void* ctx, uint16_t kind) {
  const bool data = kind == stream_data, self = rank == ctx_.boot().rank();
  // A small notified put goes in its cell: the target progresses anyway to see the note,
  // and a cross-memory write would cost a system call (1.5 us) for a few bytes.
  if (kind == stream_put && note_len && !self && size &&
      size + sizeof(put_inline_msg) <= max_message_size())
    return put_inline(rank, src, size, remote_addr, k, note, note_len, ctx);
  // WEFT_SHM_PUT=auto: the peer's chooser picks rendezvous data's mechanism and is told
  // how long it took; WEFT_SHM_RMA=auto: a user's put's too.
  const settings& cfg = ctx_.config();
  const bool chosen = data ? cfg.mode == put_mode::automatic
                           : kind == stream_put && rma_auto_ && ctx_.cma_permitted();
  chooser* timed = chosen && !self && size ? &peers_[size_t(rank)]->choose : nullptr;
  const put_mode mode = timed               ? timed->choose(size)
                        : self || size == 0 ? put_mode::cma
                        : !data             ? rma_mechanism()
                                            : ctx_.config().mode;
  // By cross-memory attach, its time told to the chooser when it chose.
  auto by_cma = [&] {
    if (timed) timed->start(put_mode::cma, size);
    const uint64_t t0 = timed ? util::ticks() : 0;
    direct_access(true, rank, const_cast<void*>(src), size, remote_addr, k, note, note_len, ctx,
                  data);
    if (timed) timed->record(put_mode::cma, size, util::ticks() - t0);
    return true;
  };
  if (mode == put_mode::cma) return by_cma();
  put_start_msg m{remote_addr, size, k.key, k.generation, 0, 0, uint16_t(note_len), kind, {},
                  0,           0,    0};
  if (note_len) memcpy(m.note, note, note_len);
  peer& p = *peers_[size_t(rank)];
  bool store_timed = false;
  const store_mode store = choose_stores(p, size, store_timed);
  m.timed = timed != nullptr || store_timed;
  m.stores = uint8_t(store);
  if (!start_stream(rank, m)) {
    // No channel, and the oldest held by a target that computes: around them (the header).
    if (m.channel != geo_.nchannels || !timed || !bypass_channels(p, size)) return false;
    bypassed_.fetch_add(1, std::memory_order_relaxed);
    return by_cma();
  }
  if (timed) timed->start(mode, size);
  if (store_timed) p.stores.start(store, size);
  outgoing_put o{rank, m.channel, static_cast<const char*>(src), size, 0, ctx, false, {}};
  o.timed = timed != nullptr;
  o.store = store;
  o.store_timed = store_timed;
  o.piece = m.piece;
  outgoing_.add(o);
  return true;
}

bool shm_device::bypass_channels(const peer& p, size_t size) const {
  const uint64_t cma = p.choose.ticks_for(put_mode::cma, size);
  if (!cma) return false;  // no figure yet: wait for a channel
  uint64_t oldest = UINT64_MAX;
  for (uint32_t c = 0; c < geo_.nchannels; ++c)
    oldest = std::min(oldest, claimed_at_[c].load(std::memory_order_relaxed));
  // 16 times: a target that progresses keeps a channel a few copy times when transfers
  // queue behind each other (bench_weft bw, 64 transfers in flight: with 1 time, a third of
  // them went around and 64 KiB moved 11-12 GB/s against 19-21); one that computes keeps it
  // for its task, milliseconds, hundreds of times a copy.
  const uint64_t now = util::ticks();
  return now > oldest && now - oldest > 16 * cma;
}

// Rendezvous data ahead of its ready-to-send, when it would move by the pipelined copy
// anyway (WEFT_SHM_PUT, or the chooser's pick): the source fills its channel while the
// ready-to-send travels, and the target starts copying the moment it matches the message,
// without the clear-to-send and the announcement that the classic path waits for.
bool shm_device::try_send_ahead(int rank, const void* hdr, size_t hdr_len, const void* payload,
                                size_t len, const void* src, size_t size, void* ctx) {
  const settings& cfg = ctx_.config();
  // Below stream_min only: there the classic path's three messages are a tenth or more
  // of a transfer's time (9000 B to 64 KiB one at a time: +8-20% ahead), at 256 KiB and
  // above a few percent, where the target's stores are chosen by timing each transfer's
  // copy loops and a copy begun before the target accepted would enter those figures.
  if (!cfg.ahead || rank == ctx_.boot().rank() || size == 0 || size >= stream_min ||
      hdr_len + len > sizeof(ahead_msg::msg))
    return false;
  peer& p = *peers_[size_t(rank)];
  chooser* timed = cfg.mode == put_mode::automatic ? &p.choose : nullptr;
  if ((timed ? timed->choose(size) : cfg.mode) != put_mode::pipeline) return false;
  // Counted before the channel is claimed: data ahead that nobody receives yet holds its
  // channel until then.
  if (unaccepted_.fetch_add(1, std::memory_order_acq_rel) + 1 >= geo_.nchannels) {
    unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  ahead_msg m{};
  m.size = size;
  m.channel = claim_channel();
  if (m.channel == geo_.nchannels) {
    unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  m.piece = uint32_t(piece_for(size, geo_.chunk_size, outgoing_.empty()));
  bool store_timed = false;
  const store_mode store = choose_stores(p, size, store_timed);
  m.timed = timed != nullptr || store_timed;
  m.stores = uint8_t(store);
  m.msg_len = uint16_t(hdr_len + len);
  memcpy(m.msg, hdr, hdr_len);
  if (len) memcpy(m.msg + hdr_len, payload, len);
  if (m.timed) channel_of(own_channels_, m.channel)->copy_ticks.store(0, std::memory_order_relaxed);
  // In the list before the announcement goes: the target's refusal, and the cancel_ahead
  // it brings, may come back on another thread before this one returns.
  outgoing_put o{rank, m.channel, static_cast<const char*>(src), size, 0, ctx, false, {}};
  o.timed = timed != nullptr;
  o.store = store;
  o.store_timed = store_timed;
  o.piece = m.piece;
  o.ahead = true;
  outgoing_.add(o);
  if (!enqueue(rank, kind_ahead, &m, sizeof(m), nullptr, 0)) {
    cancel_ahead(rank, ctx);  // the peer's queue is full: nothing went
    return false;
  }
  if (timed) timed->start(put_mode::pipeline, size);
  if (store_timed) p.stores.start(store, size);
  return true;
}

// The target refused our data ahead (its refusal message is here): the channel is ours again.
void shm_device::cancel_ahead(int rank, void* ctx) {
  outgoing_.remove_if([&](const outgoing_put& o) {
    if (!o.ahead || o.rank != rank || o.ctx != ctx) return false;
    channel_of(own_channels_, o.channel)->busy.store(0, std::memory_order_release);
    if (!o.accepted) unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    return true;
  });
}

// The target's side of data sent ahead: its announcement, kept until the core decides.
bool shm_device::accept_ahead(int rank, uint32_t id, void* dst, size_t size, size_t accept,
                              const void* note, size_t note_len) {
  peer& p = *peers_[size_t(rank)];
  ahead_msg m;
  if (!take_announcement(p, id, &m)) return false;  // its source died
  // Its two announcements disagree (a corrupt peer), or the note cannot be carried: refused.
  if (m.size != size || note_len > max_note_size) {
    channel_of(p.channels, id)->verdict.store(verdict_refused, std::memory_order_release);
    return false;
  }
  auto* ch = channel_of(p.channels, id);
  ch->verdict.store(verdict_accepted, std::memory_order_release);
  incoming_put in{rank,
                  ch,
                  slots_of(p.channels, id),
                  static_cast<char*>(dst),
                  m.size,
                  0,
                  0,
                  0,
                  false,
                  uint32_t(note_len),
                  {}};
  if (note_len) memcpy(in.note, note, note_len);
  in.timed = m.timed != 0;
  in.piece = m.piece;
  in.keep = std::min<size_t>(accept, m.size);
  in.store =
      m.stores == uint8_t(store_mode::streaming) ? store_mode::streaming : store_mode::cached;
  incoming_.add(in);
  return true;
}

void shm_device::refuse_ahead(int rank, uint32_t id) {
  peer& p = *peers_[size_t(rank)];
  if (take_announcement(p, id, nullptr))
    channel_of(p.channels, id)->verdict.store(verdict_refused, std::memory_order_release);
}

bool shm_device::take_announcement(peer& p, uint32_t id, ahead_msg* out) {
  util::lock_guard<util::spinlock> g(p.ahead_lock);
  if (id >= p.ahead.size() || p.ahead[id].size == 0) return false;
  if (out) *out = p.ahead[id];
  p.ahead[id].size = 0;
  return true;
}

// A user's put: by cross-memory attach when permitted and WEFT_SHM_RMA asks for it.
put_mode shm_device::rma_mechanism() const {
  const settings& cfg = ctx_.config();
  return cfg.rma_by_cma && ctx_.cma_permitted() ? put_mode::cma : put_mode::pipeline;
}

bool shm_device::try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t k,
                         const void* note, size_t note_len, void* ctx) {
  if (rank == ctx_.boot().rank() || size == 0 || rma_mechanism() == put_mode::cma) {
    direct_access(false, rank, dst, size, remote_addr, k, note, note_len, ctx);
    return true;
  }
  // Pipelined: the target streams the region back through one of its channels.
  get_request_msg m{remote_addr,
                    size,
                    k.key,
                    k.generation,
                    reinterpret_cast<uint64_t>(dst),
                    reinterpret_cast<uint64_t>(ctx),
                    uint32_t(note_len),
                    0,
                    {}};
  if (note_len) memcpy(m.note, note, note_len);
  {
    util::lock_guard<util::spinlock> g(gets_lock_);
    gets_.push_back(pending_get{rank, m.ctx, static_cast<char*>(dst), size});
  }
  if (!enqueue(rank, kind_get_request, &m, sizeof(m), nullptr, 0)) {
    take_get(rank, m.ctx);
    return false;
  }
  return true;
}

bool shm_device::put_inline(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t k,
                            const void* note, size_t note_len, void* ctx) {
  put_inline_msg m{
      remote_addr, k.key, k.generation, reinterpret_cast<uint64_t>(ctx), uint32_t(note_len), 0, {}};
  memcpy(m.note, note, note_len);
  {  // remembered first: the acknowledgment may come before enqueue returns
    util::lock_guard<util::spinlock> g(gets_lock_);
    puts_.push(put_ring::entry{rank, m.ctx});
  }
  if (enqueue(rank, kind_put_inline, &m, sizeof(m), src, size)) return true;
  take_put(rank, m.ctx);
  return false;
}

// The target's side of an inline put: check and hold the region, copy, deliver the note,
// acknowledge. False when the sink refused the note: the cell is offered again later (the
// copy then repeats, the same bytes to the same place).
bool shm_device::apply_put_inline(sink& s, int src, const put_inline_msg& m, const char* data,
                                  size_t size) {
  const int me = ctx_.boot().rank();
  rkey_t k{m.key, m.generation};
  uint32_t held = 0;
  const char* why = ctx_.regions().acquire(me, k, m.remote_addr, size, held);
  if (why) {
    log_refusal("put from a peer", me, k, m.remote_addr, size, why);
  } else {
    memcpy(reinterpret_cast<void*>(m.remote_addr), data, size);
    ctx_.regions().release(me, held);
    if (!s.on_remote_notify(src, m.note, m.note_len)) return false;
  }
  put_ack_msg a{m.ctx, why ? 0u : 1u, 0};
  if (!enqueue(src, kind_put_ack, &a, sizeof(a), nullptr, 0))
    events_.add(
        local_event{local_event::put_ack, src, reinterpret_cast<void*>(m.ctx), !why, 0, {}});
  return true;
}

bool shm_device::take_put(int rank, uint64_t ctx) {
  util::lock_guard<util::spinlock> g(gets_lock_);
  return puts_.take(rank, ctx);
}

bool shm_device::take_get(int rank, uint64_t ctx, pending_get* out) {
  util::lock_guard<util::spinlock> g(gets_lock_);
  for (size_t i = 0; i < gets_.size(); ++i) {
    if (gets_[i].rank == rank && gets_[i].ctx == ctx) {
      if (out) *out = gets_[i];
      gets_[i] = gets_.back();
      gets_.pop_back();
      return true;
    }
  }
  return false;
}

// The target of a pipelined get, its region already held: stream the region back.
bool shm_device::serve_get(int rank, const get_request_msg& m, uint32_t held) {
  put_start_msg p{m.dst, m.size, 0, 0, m.ctx, 0, 0, stream_get_reply, {}, 0, 0, 0};
  if (!start_stream(rank, p)) return false;
  outgoing_put o{rank, p.channel, reinterpret_cast<const char*>(m.remote_addr), m.size, 0, nullptr,
                 true, held};
  o.note_len = m.note_len;
  memcpy(o.note, m.note, sizeof(o.note));
  o.piece = p.piece;
  outgoing_.add(o);
  return true;
}

// How the target of a pipelined transfer to `p` will store it (WEFT_SHM_STORES); `timed`
// says whether the transfer's time goes to p's store_chooser. Chosen here, at the source,
// because only the source sees both copy loops (its own and, in copy_ticks, the target's):
// streaming stores can speed the target's loop and slow the source's, and the transfer
// goes at the pace of the slower one.
store_mode shm_device::choose_stores(peer& p, size_t size, bool& timed) {
  const settings& cfg = ctx_.config();
  timed = false;
  if (!cfg.stores_auto) return cfg.stores;
  if (size < stream_min) return store_mode::cached;
  timed = true;
  return p.stores.choose(size);
}

// One piece into the destination. Streaming stores are weakly ordered: the fence keeps
// them ahead of the `consumed` store that hands the slot back and, at the last piece, of
// the notification that completes the receive.
void shm_device::copy_in(store_mode m, char* dst, const char* src, size_t n) {
  if (m == store_mode::streaming) {
    util::stream_copy(dst, src, n);
    util::stream_fence();
  } else {
    memcpy(dst, src, n);
  }
}

// Inline into drain_lane: one call fewer per message.
[[gnu::always_inline]] inline bool shm_device::handle_cell(sink& s, const cell_header* c,
                                                           const char* body) {
  const char* data = c->len <= inline_capacity ? reinterpret_cast<const char*>(c + 1) : body;
  if (c->kind == kind_message && c->src < peers_.size() && c->len <= max_message_size())
    return s.on_message(c->src, data, c->len);
  return handle_other_cell(s, c, data);
}

bool shm_device::handle_other_cell(sink& s, const cell_header* c, const char* data) {
  const int src = c->src;
  const int me = ctx_.boot().rank();
  if (src >= int(peers_.size()) || c->len > max_message_size()) {
    WEFT_LOG(error, "shm: dropped a cell with source %d and length %u (corrupt queue?)", src,
             c->len);
    return true;
  }
  switch (c->kind) {
    case kind_message: break;     // handle_cell's own path: not reached here
    case kind_hole: return true;  // repair() skipped it; it said so then
    case kind_put_start: {
      put_start_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.channel >= geo_.nchannels || m.note_len > sizeof(m.note) || !piece_ok(m.piece)) break;
      char* channels = peers_[size_t(src)]->channels;
      auto* ch = channel_of(channels, m.channel);
      char* dst = reinterpret_cast<char*>(m.remote_addr);
      rkey_t k{m.key, m.generation};
      uint32_t held = 0;
      if (m.kind == stream_get_reply) {
        // The answer to our own get: the destination is the one we asked for.
        pending_get g;
        if (!take_get(src, m.get_ctx, &g) || g.size != m.size) {
          WEFT_LOG(error, "shm: rank %d streams an answer to an unknown get",
                   ctx_.boot().job_rank(src));
          ch->verdict.store(verdict_refused, std::memory_order_release);
          return true;
        }
        dst = g.dst;
      } else if (m.kind == stream_data) {  // rendezvous data: only into the buffer offered
        if (!s.expects_data(src, m.remote_addr, m.size, m.note, m.note_len)) {
          WEFT_LOG(error,
                   "shm: rank %d streams %llu bytes of rendezvous data to %#llx, which "
                   "no receive of its offered: refused",
                   ctx_.boot().job_rank(src), static_cast<unsigned long long>(m.size),
                   static_cast<unsigned long long>(m.remote_addr));
          ch->verdict.store(verdict_refused, std::memory_order_release);
          return true;
        }
      } else {  // a user's put: only into a registered region
        if (const char* why = ctx_.regions().acquire(me, k, m.remote_addr, m.size, held)) {
          log_refusal("put from a peer", me, k, m.remote_addr, m.size, why);
          ch->verdict.store(verdict_refused, std::memory_order_release);
          return true;
        }
      }
      ch->verdict.store(verdict_accepted, std::memory_order_release);
      if (m.kind == stream_data) WEFT_TSAN_ACQUIRE(dst);  // offered in our clear-to-send
      incoming_put in{src,  ch,        slots_of(channels, m.channel), dst,        m.size, 0,
                      held, m.get_ctx, m.kind == stream_get_reply,    m.note_len, {}};
      memcpy(in.note, m.note, sizeof(in.note));
      in.timed = m.timed != 0;
      in.piece = m.piece;
      in.store =
          m.stores == uint8_t(store_mode::streaming) ? store_mode::streaming : store_mode::cached;
      incoming_.add(in);
      return true;
    }
    case kind_ahead: {
      ahead_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.channel >= geo_.nchannels || m.size == 0 || !piece_ok(m.piece) ||
          m.msg_len > sizeof(m.msg))
        break;
      peer& p = *peers_[size_t(src)];
      {
        util::lock_guard<util::spinlock> g(p.ahead_lock);
        if (p.ahead[m.channel].size != 0) break;  // the channel carries data ahead already
        p.ahead[m.channel] = m;
      }
      if (s.on_ahead(src, m.channel, m.msg, m.msg_len)) return true;
      // Not taken now: offered again later, as a message is (unless the core decided).
      util::lock_guard<util::spinlock> g(p.ahead_lock);
      p.ahead[m.channel].size = 0;
      return false;
    }
    case kind_notify: {
      if (c->len == 0 || c->len > sizeof(notify_msg)) break;
      return s.on_remote_notify(src, data, c->len);
    }
    case kind_get_request: {
      get_request_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.note_len > sizeof(m.note)) break;
      rkey_t k{m.key, m.generation};
      uint32_t held;  // key 0 names no region: refused below, and the getter told
      if (const char* why = ctx_.regions().acquire(me, k, m.remote_addr, m.size, held)) {
        log_refusal("get by a peer", me, k, m.remote_addr, m.size, why);
        get_refused_msg r{m.ctx};
        if (!enqueue(src, kind_get_refused, &r, sizeof(r), nullptr, 0))
          deferred_.add(deferred{src, true, 0, m});
        return true;
      }
      if (!serve_get(src, m, held)) deferred_.add(deferred{src, false, held, m});
      return true;
    }
    case kind_put_inline: {
      put_inline_msg m;
      if (c->len < sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.note_len == 0 || m.note_len > sizeof(m.note)) break;
      return apply_put_inline(s, src, m, data + sizeof(m), c->len - sizeof(m));
    }
    case kind_put_ack: {
      put_ack_msg a;
      if (c->len != sizeof(a)) break;
      memcpy(&a, data, sizeof(a));
      if (take_put(src, a.ctx)) s.on_put_local_done(reinterpret_cast<void*>(a.ctx), a.ok != 0);
      return true;
    }
    case kind_get_refused: {
      get_refused_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (take_get(src, m.ctx)) s.on_get_done(reinterpret_cast<void*>(m.ctx), false);
      return true;
    }
    default: break;
  }
  WEFT_LOG(error, "shm: dropped a malformed backend cell of kind %u and length %u from rank %d",
           unsigned(c->kind), c->len, ctx_.boot().job_rank(src));
  return true;
}

size_t shm_device::drain_lane(sink& s, const lane& ln, lane_hold& hold, size_t max) {
  // With refused cells held, the lane is drained under its lock, sender by sender in order.
  if (hold.active.load(std::memory_order_acquire)) return drain_holding(s, ln, hold, max);
  // Cells are claimed in runs: the ready cells' sequence words are read with plain loads
  // (so their misses overlap) and one compare-and-swap on the head takes them all, instead
  // of one locked instruction, and one exposed miss, per message.
  constexpr size_t run_max = 16;
  size_t n = 0;
  uint64_t pos = ln.head->value.load(std::memory_order_relaxed);
  while (n < max) {
    const size_t limit = std::min(run_max, max - n);
    size_t k = 0;
    while (k < limit && ln.cell(pos + k, mask_)->seq.load(std::memory_order_acquire) == pos + k + 1)
      ++k;
    if (k == 0) {
      const uint64_t seq = ln.cell(pos, mask_)->seq.load(std::memory_order_relaxed);
      if (int64_t(seq - (pos + 1)) < 0) break;               // empty
      pos = ln.head->value.load(std::memory_order_relaxed);  // another consumer took it
      continue;
    }
    if (!ln.head->value.compare_exchange_weak(pos, pos + k, std::memory_order_relaxed)) continue;
    for (size_t i = 0; i < k; ++i) {
      cell_header* c = ln.cell(pos + i, mask_);
      if (!handle_cell(s, c, ln.body(pos + i, mask_, geo_.cell_size))) {
        hold_run(hold, ln, pos + i, pos + k);  // the rest of the run is offered again soon
        return n + i;
      }
      c->seq.store(pos + i + geo_.ncells, std::memory_order_release);
    }
    n += k;
    pos += k;
  }
  return n;
}

// Keeps the claimed cells [from, to) of a lane, the first of them refused by the sink. A
// cell released out of order is safe in this ring: each has its own sequence word, and a
// producer stops at the first cell not yet released.
void shm_device::hold_run(lane_hold& hold, const lane& ln, uint64_t from, uint64_t to) {
  util::lock_guard<util::spinlock> g(hold.lock);
  for (uint64_t pos = from; pos < to; ++pos) {
    const uint16_t src = ln.cell(pos, mask_)->src;
    hold.cells.insert(std::upper_bound(hold.cells.begin(), hold.cells.end(), pos), pos);
    if (src < hold.from.size()) ++hold.from[src];
  }
  hold.active.store(true, std::memory_order_release);
}

bool shm_device::offer_cell(sink& s, const lane& ln, lane_hold& hold, uint64_t pos) {
  cell_header* c = ln.cell(pos, mask_);
  const uint16_t src = c->src;
  const bool known = src < hold.from.size();
  if ((!known || !hold.from[src]) && handle_cell(s, c, ln.body(pos, mask_, geo_.cell_size))) {
    c->seq.store(pos + geo_.ncells, std::memory_order_release);
    return true;
  }
  hold.cells.push_back(pos);
  if (known) ++hold.from[src];
  return false;
}

// Offers the held cells again, oldest first (a sender's cells after one the sink still
// refuses wait), then claims new cells, holding those whose sender has cells held.
size_t shm_device::drain_holding(sink& s, const lane& ln, lane_hold& hold, size_t max) {
  if (!hold.lock.try_lock()) return 0;
  util::lock_guard<util::spinlock> g(hold.lock, util::adopt_lock);
  size_t n = 0, kept = 0;
  std::fill(hold.refused.begin(), hold.refused.end(), 0);
  for (uint64_t pos : hold.cells) {
    cell_header* c = ln.cell(pos, mask_);
    const uint16_t src = c->src;
    const bool known = src < hold.refused.size();
    if (n < max && (!known || !hold.refused[src]) &&
        handle_cell(s, c, ln.body(pos, mask_, geo_.cell_size))) {
      c->seq.store(pos + geo_.ncells, std::memory_order_release);
      if (known) --hold.from[src];
      ++n;
      continue;
    }
    if (known) hold.refused[src] = 1;
    hold.cells[kept++] = pos;
  }
  hold.cells.resize(kept);
  // New cells: one at a time under the lock (this path is the slow one anyway).
  uint64_t pos = ln.head->value.load(std::memory_order_relaxed);
  while (n < max) {
    const uint64_t seq = ln.cell(pos, mask_)->seq.load(std::memory_order_acquire);
    if (seq != pos + 1) {
      if (int64_t(seq - (pos + 1)) < 0) break;               // empty
      pos = ln.head->value.load(std::memory_order_relaxed);  // another consumer took it
      continue;
    }
    if (!ln.head->value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) continue;
    if (offer_cell(s, ln, hold, pos)) ++n;
    ++pos;
  }
  if (hold.cells.empty()) hold.active.store(false, std::memory_order_release);
  return n;
}

// Several lanes in use. A thread drains its own lane first and the others only with
// budget left: taking the messages of a thread that is itself polling costs more than they
// are worth (measured: two loopback threads on one device reach 1.0x one thread when every
// poll shares its budget across lanes, 1.9x when it does not). Every 64th poll starts at
// the next lane instead, so a lane whose own thread never polls still drains while others
// are busy.
size_t shm_device::poll_lanes(sink& s, uint64_t used, size_t max) {
  size_t first = util::thread_index();
  if (uint32_t polls = util::thread_polls(); (polls & 63) == 0) first += polls >> 6;
  if (first >= geo_.nlanes) first %= geo_.nlanes;  // no divide with no more threads than lanes
  // Only the lanes marked used, in order from `first` round to it: the marked ones at or
  // above it, then those below (an idle poll of one used lane is a few instructions, where
  // visiting every lane with a modulo each was 48).
  const uint64_t from_first = ~uint64_t(0) << first;
  size_t n = 0;
  for (uint64_t part : {used & from_first, used & ~from_first})
    for (; part && n < max; part &= part - 1) {
      const size_t l = size_t(__builtin_ctzll(part));
      if (lane_idle(own_lanes_[l], holds_[l])) continue;  // no call for an empty lane
      n += drain_lane(s, own_lanes_[l], holds_[l], max - n);
    }
  return n;
}

size_t shm_device::poll(sink& s, size_t max) {
  const uint64_t used = own_bell_->lanes_used.load(std::memory_order_acquire);
  size_t n = 0;
  if (used & (used - 1)) [[unlikely]] {
    n = poll_lanes(s, used, max);
  } else if (used) {  // one lane in use (one sending thread): the usual case
    const size_t l = size_t(__builtin_ctzll(used));
    if (!lane_idle(own_lanes_[l], holds_[l])) n = drain_lane(s, own_lanes_[l], holds_[l], max);
  }
  // Transfers and local events in hand, out of line: an idle poll tests four counts.
  if (!outgoing_.empty() || !incoming_.empty() || !deferred_.empty() || !events_.empty())
      [[unlikely]]
    n += advance_work(s);
  return n;
}

// The transfers and events of poll: pipelined puts and gets in both directions, gets whose
// serving was deferred, and local events for the sink.
size_t shm_device::advance_work(sink& s) {
  size_t n = 0;
  const int me = ctx_.boot().rank();
  const size_t slot = geo_.chunk_size, nslots = geo_.nslots;
  n += outgoing_.advance([&](outgoing_put& o) {
    // A get served and streamed whose notification our sink refused: offer it again.
    if (o.finished) return s.on_remote_notify(o.rank, o.note, o.note_len);
    auto* ch = channel_of(own_channels_, o.channel);
    char* slots = slots_of(own_channels_, o.channel);
    const uint32_t verdict = ch->verdict.load(std::memory_order_acquire);
    if (o.ahead && !o.accepted && verdict != verdict_pending) {
      o.accepted = true;  // decided: no longer holds a channel for a message not yet matched
      unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (verdict == verdict_refused) {
      if (o.ahead) return false;  // ended by the refusal message (cancel_ahead)
      ch->busy.store(0, std::memory_order_release);
      if (o.get_reply)
        ctx_.regions().release(me, o.held);
      else
        s.on_put_local_done(o.ctx, false);
      return true;
    }
    const uint64_t total = npieces(o.size, o.piece);
    auto room = [&] {
      return o.next_chunk < total &&
             o.next_chunk - ch->consumed.load(std::memory_order_acquire) < nslots;
    };
    // Timed only when it copies: a poll that finds no room reads no clock (two time-stamp
    // reads per waiting transfer per poll were a third of this function's time).
    const bool timing = o.timed || o.store_timed;
    if (room()) {
      const uint64_t t0 = timing ? util::ticks() : 0;
      do {
        const size_t off = o.next_chunk * o.piece;
        memcpy(slots + (o.next_chunk % nslots) * slot, o.src + off,
               std::min(o.piece, o.size - off));
        ++o.next_chunk;
        ch->written.store(o.next_chunk, std::memory_order_release);
      } while (room());
      if (timing) o.ticks += util::ticks() - t0;
    }
    // Done once the target has accepted the region and copied every byte out: a put is
    // complete at its source only when its data is visible at the target.
    if (o.next_chunk < total || verdict != verdict_accepted ||
        ch->consumed.load(std::memory_order_acquire) < total)
      return false;
    ch->busy.store(0, std::memory_order_release);
    bytes_pipelined_.fetch_add(o.size, std::memory_order_relaxed);
    if (timing) {  // the two copy loops ran side by side: the longer one is the time
      const uint64_t took = std::max(o.ticks, ch->copy_ticks.load(std::memory_order_relaxed));
      peer& p = *peers_[size_t(o.rank)];
      if (o.timed) p.choose.record(put_mode::pipeline, o.size, took);
      if (o.store_timed) p.stores.record(o.store, o.size, took);
    }
    if (!o.get_reply) {
      s.on_put_local_done(o.ctx, true);
      return true;
    }
    ctx_.regions().release(me, o.held);
    o.finished = true;
    return !o.note_len || s.on_remote_notify(o.rank, o.note, o.note_len);
  });

  n += incoming_.advance([&](incoming_put& in) {
    // The data is in but our sink refused the notification: offer it again.
    if (in.copied) return s.on_remote_notify(in.rank, in.note, in.note_len);
    const uint64_t total = npieces(in.size, in.piece);
    const uint64_t w = in.channel->written.load(std::memory_order_acquire);
    if (in.consumed < w) {  // timed only when it copies, as above
      const uint64_t t0 = in.timed ? util::ticks() : 0;
      const size_t end = std::min(in.size, in.keep);  // data ahead: past a shorter buffer
      do {
#ifdef WEFT_TEST_HOOKS
        if (ctx_.config().test_delay_us) usleep(useconds_t(ctx_.config().test_delay_us));
#endif
        const size_t off = in.consumed * in.piece;
        if (off < end)  // what lies past `end` is dropped
          copy_in(in.store, in.dst + off, in.slots + (in.consumed % nslots) * slot,
                  std::min(in.piece, end - off));
        if (++in.consumed == total && in.timed)  // before the store that releases it
          in.channel->copy_ticks.store(in.ticks + (util::ticks() - t0), std::memory_order_relaxed);
        in.channel->consumed.store(in.consumed, std::memory_order_release);
      } while (in.consumed < w);
      if (in.timed) in.ticks += util::ticks() - t0;
    }
    if (in.consumed < total) return false;
    if (in.store == store_mode::streaming)
      bytes_streamed_.fetch_add(in.size, std::memory_order_relaxed);
    ctx_.regions().release(me, in.held);
    // The channel stays busy: its owner frees it once it has seen the transfer complete.
    // Freed here, the owner could claim it for a new transfer first and lose the old one.
    if (in.get_reply) {
      s.on_get_done(reinterpret_cast<void*>(in.get_ctx), true);
      return true;
    }
    in.copied = true;
    return !in.note_len || s.on_remote_notify(in.rank, in.note, in.note_len);
  });

  n += deferred_.advance([&](deferred& d) {
    if (!d.refuse) return serve_get(d.rank, d.req, d.held);
    get_refused_msg r{d.req.ctx};
    return enqueue(d.rank, kind_get_refused, &r, sizeof(r), nullptr, 0);
  });

  n += events_.advance([&](local_event& e) {
    switch (e.kind) {
      case local_event::put_done: s.on_put_local_done(e.ctx, e.ok); return true;
      case local_event::get_done: s.on_get_done(e.ctx, e.ok); return true;
      case local_event::put_ack: {
        put_ack_msg a{reinterpret_cast<uint64_t>(e.ctx), e.ok ? 1u : 0u, 0};
        return enqueue(e.rank, kind_put_ack, &a, sizeof(a), nullptr, 0);
      }
      case local_event::notify: {
        notify_msg m{};
        memcpy(m.note, e.note, e.note_len);
        return enqueue(e.rank, kind_notify, &m, e.note_len, nullptr, 0);
      }
    }
    return true;
  });
  return n;
}

// Arms the bell for a sleeper of kind `bit` (bell_futex, bell_fd) and says whether it may
// sleep: not with work in hand or anything claimed in a lane (published or not yet).
// Several threads may sleep on one device: each arms the bell (a read-modify-write, so it
// is ordered against the producers' claims), and the waking producer wakes them all.
uint32_t shm_device::arm_bell(uint32_t bit) {
  if (!outgoing_.empty() || !incoming_.empty() || !events_.empty()) return 0;  // work in hand
  const uint32_t armed = own_bell_->armed.fetch_or(bit, std::memory_order_seq_cst) | bit;
  for (const lane& ln : own_lanes_)
    if (ln.tail->value.load(std::memory_order_seq_cst) !=
        ln.head->value.load(std::memory_order_seq_cst))
      return 0;
  return armed;
}

void shm_device::wait_for_message(uint32_t timeout_us) {
  const uint32_t armed = arm_bell(bell_futex);
  if (!armed) return;
  timespec ts{time_t(timeout_us / 1000000), long(timeout_us % 1000000) * 1000};
  syscall(SYS_futex, &own_bell_->armed, FUTEX_WAIT, armed, &ts, nullptr, 0);
}

bool shm_device::arm_wake() {
  return bell_sock_.fd() >= 0 && arm_bell(bell_fd) != 0;
}

void shm_device::forget_peer(int rank) {
  const int me = ctx_.boot().rank();
  outgoing_.remove_if([&](const outgoing_put& o) {
    if (o.rank != rank) return false;
    if (o.ahead && !o.accepted) unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    if (o.finished) return true;  // channel and region given back already
    channel_of(own_channels_, o.channel)->busy.store(0, std::memory_order_release);
    if (o.get_reply) ctx_.regions().release(me, o.held);
    return true;
  });
  incoming_.remove_if([&](const incoming_put& in) {
    if (in.rank != rank) return false;
    if (!in.copied) ctx_.regions().release(me, in.held);
    return true;
  });
  deferred_.remove_if([&](const deferred& d) {
    if (d.rank != rank) return false;
    if (!d.refuse) ctx_.regions().release(me, d.held);
    return true;
  });
  events_.remove_if(
      [rank](const local_event& e) { return e.rank == rank && e.kind == local_event::notify; });
  events_.remove_if(
      [rank](const local_event& e) { return e.rank == rank && e.kind == local_event::put_ack; });
  {
    peer& p = *peers_[size_t(rank)];
    util::lock_guard<util::spinlock> g(p.ahead_lock);
    for (auto& m : p.ahead) m.size = 0;
  }
  util::lock_guard<util::spinlock> g(gets_lock_);
  std::erase_if(gets_, [rank](const pending_get& p) { return p.rank == rank; });
  puts_.erase_if([rank](const put_ring::entry& p) { return p.rank == rank; });
}

// A cell at a lane's head that a sender claimed and never published stops the lane for
// every sender. When the claim's stamp names a local process that has died, the cell is
// published as a hole that the consumers skip; its message died with its sender. A sender
// killed in the two stores between its claim and its stamp leaves an older stamp: such a
// cell is skipped once it has stayed unpublished for hole_grace_ns while a local peer has
// died (a live sender publishes within microseconds unless stopped).
size_t shm_device::repair() {
  constexpr int64_t settle_ns = 100 * 1000 * 1000, hole_grace_ns = 2000 * 1000 * 1000ll;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  size_t fixed = 0;
  for (size_t l = 0; l < geo_.nlanes; ++l) {
    const lane& ln = own_lanes_[l];
    lane_hold& h = holds_[l];
    const uint64_t head = ln.head->value.load(std::memory_order_acquire);
    cell_header* c = ln.cell(head, mask_);
    if (ln.tail->value.load(std::memory_order_acquire) == head ||
        c->seq.load(std::memory_order_acquire) != head) {  // empty, or published
      h.stuck_since_ns.store(0, std::memory_order_relaxed);
      continue;
    }
    const int64_t since = h.stuck_since_ns.load(std::memory_order_relaxed);
    if (since == 0 || h.stuck_at.load(std::memory_order_relaxed) != head) {
      h.stuck_at.store(head, std::memory_order_relaxed);
      h.stuck_since_ns.store(now, std::memory_order_relaxed);
      continue;
    }
    const int64_t stuck = now - since;
    if (stuck < settle_ns) continue;
    const int src = c->src;
    const bool stamped = c->lap == uint8_t(head >> lap_shift_) && src < int(peers_.size());
    const bool writer_dead = stamped && src != ctx_.boot().rank() && !peer_alive(src);
    if (!writer_dead && !(stuck > hole_grace_ns && any_local_peer_dead())) continue;
    WEFT_LOG(warn,
             "shm: lane %zu of this device stopped at a message %s claimed and never published; "
             "skipping it (the message is lost with its sender)",
             l,
             writer_dead ? ("rank " + std::to_string(ctx_.boot().job_rank(src))).c_str()
                         : "a sender that died");
    c->kind = kind_hole;
    c->len = 0;
    c->seq.store(head + 1, std::memory_order_release);
    h.stuck_since_ns.store(0, std::memory_order_relaxed);
    ++fixed;
  }
  return fixed;
}

bool shm_device::any_local_peer_dead() {
  for (size_t r = 0; r < peers_.size(); ++r)
    if (int(r) != ctx_.boot().rank() && !peer_alive(int(r))) return true;
  return false;
}

#ifdef WEFT_TEST_HOOKS
namespace {
// Claims left before the test hook kills this process; 0: never (set by the context).
std::atomic<int64_t> claims_to_kill{0};
}  // namespace

// Test builds only: WEFT_TEST_KILL_AFTER_CLAIM=R:N makes rank R kill itself with SIGKILL
// right after its N-th claim of an inbox cell, stamped but not yet published.
void shm_device::arm_test_hook() {
  const std::string v = util::get_text(util::setting::test_kill_after_claim);
  const std::string me = util::get_text(util::setting::rank);
  int r = -1;
  long long n = 0;
  if (sscanf(v.c_str(), "%d:%lld", &r, &n) == 2 && !me.empty() && atoi(me.c_str()) == r && n > 0)
    claims_to_kill.store(n, std::memory_order_relaxed);
}

void shm_device::test_hook_after_claim() {
  if (claims_to_kill.load(std::memory_order_relaxed) > 0 && claims_to_kill.fetch_sub(1) == 1)
    raise(SIGKILL);
}
#endif

uint64_t shm_device::count(counter_t c) const {
  if (c == counter_t::bytes_pipelined) return bytes_pipelined_.load(std::memory_order_relaxed);
  if (c == counter_t::bytes_streamed) return bytes_streamed_.load(std::memory_order_relaxed);
  if (c == counter_t::channels_bypassed) return bypassed_.load(std::memory_order_relaxed);
  if (c == counter_t::bytes_cross_memory)
    return bytes_cross_memory_.load(std::memory_order_relaxed);
  return 0;
}

bool shm_device::peer_alive(int rank) {
  const peer& p = *peers_[size_t(rank)];
  return !p.gone.load(std::memory_order_relaxed) && util::process_exists(p.pid);
}

}  // namespace weft::net::shm

namespace weft::net {
std::unique_ptr<context> make_shm_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id) {
  return std::make_unique<shm::shm_context>(std::move(boot), context_id);
}
}  // namespace weft::net
