// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend, set up: the context (settings, the peers' process ids and
// whether cross-memory attach is permitted) and a device's segment, agreed geometry and
// attached peers.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/cma.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/mpmc_queue.hpp"
#include "util/settings.hpp"

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
  s.map = util::get_flag(setting::shm_map);
  // Each size is checked against its row's range in settings.def.
  s.nchannels = *util::get_size(setting::shm_channels);
  s.chunk_size = *util::get_size(setting::shm_chunk);
  s.nslots = *util::get_size(setting::shm_slots);
  s.nlanes = util::get_size(setting::shm_lanes).value_or(0);
  s.nregions = *util::get_size(setting::shm_regions);
  s.split_min = *util::get_size(setting::shm_split);
#ifdef WEFT_TEST_HOOKS
  s.test_delay_us = *util::get_size(setting::test_pipeline_delay);
  s.test_split_unread = util::get_flag(setting::test_split_unread);
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
  if (settings_.map && cma_ok_) maps_ = std::make_unique<peer_maps>(*regions_, pids_, b.rank());
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
       "; cross-memory attach " + (cma_ok_ ? "permitted" : "not permitted") +
       "; alloc_memory's regions " + (maps_ ? "mapped by peers" : "not mapped");
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
    init_lane(own_lanes_[l], geo_.head_offset(l));
    own_lanes_[l].bodies = own_base_ + geo_.bodies_offset(l);
  }
  init_lane(own_answers_, geo_.answers_offset());
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

// An empty lane of our own whose head line is at `offset` (its tail on the next line, its
// cells on the next page), every cell free for the first lap.
void shm_device::init_lane(lane& ln, size_t offset) {
  ln.head = new (own_base_ + offset) ring_index{};
  ln.head->value.store(0);
  ln.tail = new (own_base_ + offset + sizeof(ring_index)) ring_index{};
  ln.tail->value.store(0);
  ln.cells = own_base_ + offset + 4096;
  for (size_t i = 0; i < geo_.ncells; ++i) {
    auto* c = new (ln.cells + i * cell_line) cell_header{};
    c->seq.store(i, std::memory_order_relaxed);
  }
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
    p->answers.tail =
        reinterpret_cast<ring_index*>(p->base + pg.answers_offset() + sizeof(ring_index));
    p->answers.cells = p->base + pg.answers_offset() + 4096;
    p->pid = ctx_.pid_of(r);
    if (r != me)
      reinterpret_cast<segment_header*>(p->base)->attached.fetch_add(1, std::memory_order_acq_rel);
    peers_[size_t(r)] = std::move(p);
  }
}

// Acknowledgments still waiting for a poll go now (a program may free a device right after
// the poll that applied its peers' puts). One whose initiator's answer lane is full cannot
// go: that put ends with error_peer_dead once its initiator sees this rank gone.
shm_device::~shm_device() {
  send_acks();
}

}  // namespace weft::net::shm

namespace weft::net {
std::unique_ptr<context> make_shm_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id) {
  return std::make_unique<shm::shm_context>(std::move(boot), context_id);
}
}  // namespace weft::net
