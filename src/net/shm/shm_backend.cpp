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

#include "bootstrap/bootstrap.hpp"
#include "net/shm/cma.hpp"
#include "util/env.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/mpmc_queue.hpp"
#include "util/thread_index.hpp"

namespace weft::net::shm {
namespace {

// Read by peers through cross-memory attach at start-up to learn whether it is permitted.
volatile uint64_t cma_probe_cookie = 0x57454654434d4121ull;

std::string key(const char* what, int ctx, int index, int rank) {
  return std::string("shm-") + what + "-" + std::to_string(ctx) + "-" + std::to_string(index) +
         "-" + std::to_string(rank);
}

settings read_settings() {
  settings s{};
  std::string mode = util::env_string("WEFT_SHM_PUT", "pipeline");
  if (mode == "pipeline")
    s.mode = put_mode::pipeline;
  else if (mode == "cma")
    s.mode = put_mode::cma;
  else
    util::fail("shm backend", "WEFT_SHM_PUT", mode, "must be pipeline or cma");
  s.nchannels = util::env_size("WEFT_SHM_CHANNELS", 4);
  s.chunk_size = util::env_size("WEFT_SHM_CHUNK", 64 * 1024);
  s.nslots = util::env_size("WEFT_SHM_SLOTS", 8);
  s.nlanes = util::env_size("WEFT_SHM_LANES", 4);
  if (s.nchannels < 1 || s.nchannels > 1024)
    util::fail("shm backend", "WEFT_SHM_CHANNELS", std::to_string(s.nchannels), "must be 1..1024");
  if (s.chunk_size < 4096 || s.chunk_size % 64)
    util::fail("shm backend", "WEFT_SHM_CHUNK", std::to_string(s.chunk_size),
               "must be a multiple of 64 and at least 4096");
  if (s.nlanes < 1 || s.nlanes > 64)
    util::fail("shm backend", "WEFT_SHM_LANES", std::to_string(s.nlanes), "must be 1..64");
  if (s.nslots < 2 || s.nslots > 4096)
    util::fail("shm backend", "WEFT_SHM_SLOTS", std::to_string(s.nslots), "must be 2..4096");
  return s;
}

}  // namespace

// ---- context ------------------------------------------------------------------------------

shm_context::shm_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id)
    : boot_(std::move(boot)), context_id_(context_id), settings_(read_settings()) {
  auto& b = *boot_;
  if (b.local_size() != b.size())
    util::fail("shm backend", "ranks", std::to_string(b.size()),
               "shared memory reaches only the " + std::to_string(b.local_size()) +
                   " ranks on this host; network backends arrive with a later release");
  char info[64];
  snprintf(info, sizeof(info), "%d %llx", int(getpid()),
           static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&cma_probe_cookie)));
  b.put(key("pid", context_id_, 0, b.rank()), info);
  pids_.resize(size_t(b.size()));
  // WEFT_SHM_CMA=0 forbids cross-memory attach outright, as a kernel policy would.
  cma_ok_ = util::env_bool("WEFT_SHM_CMA", true);
  for (int r = 0; r < b.size(); ++r) {
    std::string v = b.get(key("pid", context_id_, 0, r));
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
  if (settings_.mode == put_mode::cma && !cma_ok_) {
    WEFT_LOG(warn,
             "WEFT_SHM_PUT=cma but cross-memory attach is not permitted here; "
             "falling back to the pipelined copy");
    settings_.mode = put_mode::pipeline;
  }
  WEFT_LOG(info, "shm context %d: %s", context_id_, describe().c_str());
}

std::string shm_context::describe() const {
  std::string s = "shm: large transfers by ";
  s += settings_.mode == put_mode::cma ? "cross-memory attach" : "pipelined copy";
  s += " (channels " + std::to_string(settings_.nchannels) + ", chunk " +
       std::to_string(settings_.chunk_size) + " B x " + std::to_string(settings_.nslots) +
       " slots); " + std::to_string(settings_.nlanes) + " inbox lanes; cross-memory attach " +
       (cma_ok_ ? "permitted" : "not permitted");
  return s;
}

std::unique_ptr<device> shm_context::alloc_device(int index, const device_config& cfg) {
  return std::make_unique<shm_device>(*this, index, cfg);
}

// Shared memory needs no registration: the target copies into its own memory, or a peer
// writes through cross-memory attach. The key is unused.
mr_t shm_context::register_memory(void* base, size_t size) {
  return mr_t{base, size, 0, nullptr};
}
void shm_context::deregister_memory(mr_t& mr) {
  mr = mr_t{};
}
rkey_t shm_context::get_rkey(const mr_t&) {
  return rkey_t{};
}

// ---- device -------------------------------------------------------------------------------

shm_device::shm_device(shm_context& ctx, int index, const device_config& cfg)
    : ctx_(ctx), index_(index) {
  const auto& st = ctx.config();
  geo_.cell_size = util::round_up_pow2(std::max<size_t>(cfg.cell_size, 128));
  geo_.ncells = util::round_up_pow2(std::max<size_t>(cfg.inbox_depth, 2));
  geo_.nchannels = st.nchannels;
  geo_.chunk_size = st.chunk_size;
  geo_.nslots = st.nslots;
  geo_.nlanes = st.nlanes;
  mask_ = geo_.ncells - 1;

  auto& b = ctx.boot();
  const int me = b.rank(), n = b.size();
  std::string name;
  if (n > 1) {
    name = "/weft-" + b.job_id() + "-" + std::to_string(ctx.context_id()) + "-" +
           std::to_string(index) + "-" + std::to_string(me);
  }
  own_.create(name, geo_.total());
  own_base_ = static_cast<char*>(own_.base());
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
  own_bell_ = new (own_base_ + geo_.bell_offset()) bell{};
  own_bell_->armed.store(0);
  own_lanes_.resize(geo_.nlanes);
  for (size_t l = 0; l < geo_.nlanes; ++l) {
    lane& ln = own_lanes_[l];
    ln.head = new (own_base_ + geo_.head_offset(l)) ring_index{};
    ln.head->value.store(0);
    ln.tail = new (own_base_ + geo_.tail_offset(l)) ring_index{};
    ln.tail->value.store(0);
    ln.cells = own_base_ + geo_.cells_offset(l);
    for (size_t i = 0; i < geo_.ncells; ++i) {
      auto* c = new (ln.cells + i * geo_.cell_size) cell_header{};
      c->seq.store(i, std::memory_order_relaxed);
    }
  }
  for (uint32_t c = 0; c < geo_.nchannels; ++c) {
    auto* ch = new (channel_of(own_base_, c)) channel_header{};
    ch->busy.store(0);
    ch->written.store(0);
    ch->consumed.store(0);
  }
  // Peers learn the segment name only through the bootstrap (a socket round trip), which
  // orders these initialising stores before their first access.

  peers_.resize(size_t(n));
  if (n > 1) b.put(key("seg", ctx.context_id(), index, me), name);
  for (int r = 0; r < n; ++r) {
    auto p = std::make_unique<peer>();
    if (r == me) {
      p->base = own_base_;
    } else {
      // Map whatever the peer created, check its header, and only then rely on its size:
      // a peer with other settings gets a message naming them, not a bus error.
      p->seg.attach(b.get(key("seg", ctx.context_id(), index, r)), sizeof(segment_header));
      p->base = static_cast<char*>(p->seg.base());
      auto* ph = reinterpret_cast<segment_header*>(p->base);
      if (ph->magic != segment_magic || ph->layout != layout_version || ph->rank != uint32_t(r))
        util::fail("alloc_device (shm)", "peer segment of rank " + std::to_string(r),
                   std::to_string(ph->layout),
                   "not a Weft shm segment of layout version " + std::to_string(layout_version));
      auto describe = [](int rank, uint64_t cell, uint64_t cells, uint64_t lanes, uint64_t chans,
                         uint64_t chunk, uint64_t slots) {
        return "rank " + std::to_string(rank) + " has " + std::to_string(cells) + " cells of " +
               std::to_string(cell) + " B in " + std::to_string(lanes) + " lanes, " +
               std::to_string(chans) + " channels of " + std::to_string(slots) + " x " +
               std::to_string(chunk) + " B";
      };
      if (ph->cell_size != geo_.cell_size || ph->ncells != geo_.ncells ||
          ph->chunk_size != geo_.chunk_size || ph->nslots != geo_.nslots ||
          ph->nchannels != geo_.nchannels || ph->nlanes != geo_.nlanes)
        util::fail("alloc_device (shm)", "device geometry",
                   describe(me, geo_.cell_size, geo_.ncells, geo_.nlanes, geo_.nchannels,
                            geo_.chunk_size, geo_.nslots) +
                       "; " +
                       describe(r, ph->cell_size, ph->ncells, ph->nlanes, ph->nchannels,
                                ph->chunk_size, ph->nslots),
                   "devices of the same index must be allocated with the same settings "
                   "(WEFT_PACKET_SIZE, WEFT_INBOX_DEPTH, WEFT_SHM_*)");
      if (p->seg.size() < geo_.total())
        util::fail("alloc_device (shm)", "peer segment of rank " + std::to_string(r),
                   std::to_string(p->seg.size()) + " bytes",
                   "smaller than its header says (" + std::to_string(geo_.total()) + ")");
    }
    p->bell_ = reinterpret_cast<bell*>(p->base + geo_.bell_offset());
    p->lanes.resize(geo_.nlanes);
    for (size_t l = 0; l < geo_.nlanes; ++l) {
      p->lanes[l].tail = reinterpret_cast<ring_index*>(p->base + geo_.tail_offset(l));
      p->lanes[l].cells = p->base + geo_.cells_offset(l);
    }
    p->pid = ctx.pid_of(r);
    if (r != me)
      reinterpret_cast<segment_header*>(p->base)->attached.fetch_add(1, std::memory_order_acq_rel);
    peers_[size_t(r)] = std::move(p);
  }
  if (n > 1) {
    // Once every peer has mapped this segment its name can go: a crash from now on leaves
    // no file in /dev/shm.
    auto* hdr = reinterpret_cast<segment_header*>(own_base_);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (hdr->attached.load(std::memory_order_acquire) < uint32_t(n - 1)) {
      if (std::chrono::steady_clock::now() > deadline)
        util::fail("alloc_device (shm)", "peers attached",
                   std::to_string(hdr->attached.load()) + " of " + std::to_string(n - 1),
                   "peers did not map this device's segment within 120 s");
      sched_yield();
    }
    own_.unlink();
  }
}

shm_device::~shm_device() = default;

channel_header* shm_device::channel_of(char* base, uint32_t c) const {
  return reinterpret_cast<channel_header*>(base + geo_.channels_offset() +
                                           geo_.channel_stride() * c);
}

char* shm_device::slots_of(char* base, uint32_t c) const {
  return base + geo_.channels_offset() + geo_.channel_stride() * c +
         geometry::align(sizeof(channel_header), 4096);
}

bool shm_device::enqueue(int rank, uint8_t kind, const void* a, size_t alen, const void* b,
                         size_t blen) {
  peer& p = *peers_[size_t(rank)];
  // One thread's messages to one peer share a lane, so they stay in order.
  const lane& ln = p.lanes[util::thread_index() % geo_.nlanes];
  uint64_t pos = ln.tail->value.load(std::memory_order_relaxed);
  for (;;) {
    auto* c = reinterpret_cast<cell_header*>(ln.cells + (pos & mask_) * geo_.cell_size);
    uint64_t seq = c->seq.load(std::memory_order_acquire);
    int64_t dif = int64_t(seq - pos);
    if (dif == 0) {
      if (ln.tail->value.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                               std::memory_order_relaxed)) {
        c->len = uint32_t(alen + blen);
        c->src = uint16_t(ctx_.boot().rank());
        c->kind = kind;
        char* data = reinterpret_cast<char*>(c + 1);
        if (alen) memcpy(data, a, alen);
        if (blen) memcpy(data + alen, b, blen);
        c->seq.store(pos + 1, std::memory_order_release);
        // The claim above was a sequentially consistent read-modify-write of the tail, and
        // a sleeper arms the bell before it rereads every tail: either it sees this claim
        // or this load sees the bell armed. Only the producer that disarms it wakes.
        if (p.bell_->armed.load(std::memory_order_seq_cst) &&
            p.bell_->armed.exchange(0, std::memory_order_seq_cst))
          syscall(SYS_futex, &p.bell_->armed, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
        return true;
      }
    } else if (dif < 0) {
      return false;  // full
    } else {
      pos = ln.tail->value.load(std::memory_order_relaxed);
    }
  }
}

bool shm_device::try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                          size_t len) {
  return enqueue(rank, kind_message, hdr, hdr_len, payload, len);
}

bool shm_device::try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t,
                         bool notify, uint64_t imm, void* ctx) {
  const int me = ctx_.boot().rank();
  if (ctx_.config().mode == put_mode::cma || size == 0) {
    if (size) {
      int err = rank == me ? (memmove(reinterpret_cast<void*>(remote_addr), src, size), 0)
                           : cma_write(peers_[size_t(rank)]->pid, src, remote_addr, size);
      if (err)
        util::fail("put (shm, cross-memory attach)", "rank", std::to_string(rank), strerror(err));
    }
    if (notify) {
      put_done_msg m{imm};
      if (!enqueue(rank, kind_put_done, &m, sizeof(m), nullptr, 0))
        events_.add(local_event{local_event::notify, rank, nullptr, imm});
    }
    events_.add(local_event{local_event::put_done, rank, ctx, 0});
    return true;
  }
  uint32_t c = 0;
  for (; c < geo_.nchannels; ++c) {
    uint32_t expect = 0;
    auto* ch = channel_of(own_base_, c);
    if (ch->busy.load(std::memory_order_relaxed) == 0 &&
        ch->busy.compare_exchange_strong(expect, 1, std::memory_order_acquire))
      break;
  }
  if (c == geo_.nchannels) return false;
  auto* ch = channel_of(own_base_, c);
  ch->written.store(0, std::memory_order_relaxed);
  ch->consumed.store(0, std::memory_order_relaxed);
  put_start_msg m{remote_addr, size, imm, c, notify ? 1u : 0u};
  if (!enqueue(rank, kind_put_start, &m, sizeof(m), nullptr, 0)) {
    ch->busy.store(0, std::memory_order_release);
    return false;
  }
  outgoing_.add(outgoing_put{rank, c, static_cast<const char*>(src), size, 0, ctx});
  return true;
}

bool shm_device::try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t,
                         void* ctx) {
  if (!ctx_.cma_permitted() && rank != ctx_.boot().rank())
    util::fail("get (shm)", "rank", std::to_string(rank),
               "get needs cross-memory attach, which this system does not permit");
  if (size) {
    int err = rank == ctx_.boot().rank()
                  ? (memmove(dst, reinterpret_cast<void*>(remote_addr), size), 0)
                  : cma_read(peers_[size_t(rank)]->pid, dst, remote_addr, size);
    if (err)
      util::fail("get (shm, cross-memory attach)", "rank", std::to_string(rank), strerror(err));
  }
  events_.add(local_event{local_event::get_done, rank, ctx, 0});
  return true;
}

void shm_device::handle_cell(sink& s, const cell_header* c) {
  const char* data = reinterpret_cast<const char*>(c + 1);
  const int src = c->src;
  if (src >= int(peers_.size()) || c->len > max_message_size()) {
    WEFT_LOG(error, "shm: dropped a cell with source %d and length %u (corrupt queue?)", src,
             c->len);
    return;
  }
  switch (c->kind) {
    case kind_message: s.on_message(src, data, c->len); return;
    case kind_put_start: {
      put_start_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      if (m.channel >= geo_.nchannels) break;
      char* base = peers_[size_t(src)]->base;
      auto* ch = channel_of(base, m.channel);
      if (m.size == 0) {
        ch->busy.store(0, std::memory_order_release);
        if (m.notify) s.on_put_remote_done(src, m.imm);
        return;
      }
      incoming_.add(incoming_put{src, ch, slots_of(base, m.channel),
                                 reinterpret_cast<char*>(m.remote_addr), m.size, 0, m.notify != 0,
                                 m.imm});
      return;
    }
    case kind_put_done: {
      put_done_msg m;
      if (c->len != sizeof(m)) break;
      memcpy(&m, data, sizeof(m));
      s.on_put_remote_done(src, m.imm);
      return;
    }
    default: break;
  }
  WEFT_LOG(error, "shm: dropped a malformed backend cell of kind %u and length %u from rank %d",
           unsigned(c->kind), c->len, src);
}

size_t shm_device::drain_lane(sink& s, const lane& ln, size_t max) {
  size_t n = 0;
  uint64_t pos = ln.head->value.load(std::memory_order_relaxed);
  while (n < max) {
    auto* c = reinterpret_cast<cell_header*>(ln.cells + (pos & mask_) * geo_.cell_size);
    uint64_t seq = c->seq.load(std::memory_order_acquire);
    int64_t dif = int64_t(seq - (pos + 1));
    if (dif == 0) {
      if (ln.head->value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        handle_cell(s, c);
        c->seq.store(pos + geo_.ncells, std::memory_order_release);
        ++n;
        pos = ln.head->value.load(std::memory_order_relaxed);
      }
    } else if (dif < 0) {
      break;  // empty
    } else {
      pos = ln.head->value.load(std::memory_order_relaxed);
    }
  }
  return n;
}

size_t shm_device::poll(sink& s, size_t max) {
  // A thread drains its own lane first and the others only with budget left: taking the
  // messages of a thread that is itself polling costs more than they are worth (measured:
  // two loopback threads on one device reach 1.0x one thread when every poll shares its
  // budget across lanes, 1.9x when it does not). Every 64th poll starts at the next lane
  // instead, so a lane whose own thread never polls still drains while others are busy.
  size_t first = util::thread_index();
  if (uint32_t polls = util::next_thread_poll(); (polls & 63) == 0) first += polls >> 6;
  first %= geo_.nlanes;
  size_t n = 0;
  for (size_t k = 0; k < geo_.nlanes && n < max; ++k)
    n += drain_lane(s, own_lanes_[(first + k) % geo_.nlanes], max - n);

  const size_t chunk = geo_.chunk_size, nslots = geo_.nslots;
  n += outgoing_.advance([&](outgoing_put& o) {
    auto* ch = channel_of(own_base_, o.channel);
    char* slots = slots_of(own_base_, o.channel);
    const uint64_t total = nchunks(o.size);
    while (o.next_chunk < total &&
           o.next_chunk - ch->consumed.load(std::memory_order_acquire) < nslots) {
      size_t off = o.next_chunk * chunk;
      memcpy(slots + (o.next_chunk % nslots) * chunk, o.src + off, std::min(chunk, o.size - off));
      ++o.next_chunk;
      ch->written.store(o.next_chunk, std::memory_order_release);
    }
    if (o.next_chunk < total) return false;
    s.on_put_local_done(o.ctx);
    return true;
  });

  n += incoming_.advance([&](incoming_put& in) {
    const uint64_t total = nchunks(in.size);
    uint64_t w = in.channel->written.load(std::memory_order_acquire);
    while (in.consumed < w) {
      size_t off = in.consumed * chunk;
      memcpy(in.dst + off, in.slots + (in.consumed % nslots) * chunk,
             std::min(chunk, in.size - off));
      ++in.consumed;
      in.channel->consumed.store(in.consumed, std::memory_order_release);
    }
    if (in.consumed < total) return false;
    in.channel->busy.store(0, std::memory_order_release);
    if (in.notify) s.on_put_remote_done(in.rank, in.imm);
    return true;
  });

  n += events_.advance([&](local_event& e) {
    switch (e.kind) {
      case local_event::put_done: s.on_put_local_done(e.ctx); return true;
      case local_event::get_done: s.on_get_done(e.ctx); return true;
      case local_event::notify: {
        put_done_msg m{e.imm};
        return enqueue(e.rank, kind_put_done, &m, sizeof(m), nullptr, 0);
      }
    }
    return true;
  });
  return n;
}

void shm_device::wait_for_message(uint32_t timeout_us) {
  if (!outgoing_.empty() || !incoming_.empty() || !events_.empty()) return;  // work in hand
  // Several threads may sleep on one device: each arms the bell (a read-modify-write, so
  // it is ordered against the producers' claims), and the waking producer wakes them all.
  own_bell_->armed.exchange(1, std::memory_order_seq_cst);
  // Anything claimed in a lane (published or not yet) means: do not sleep.
  for (const lane& ln : own_lanes_)
    if (ln.tail->value.load(std::memory_order_seq_cst) !=
        ln.head->value.load(std::memory_order_seq_cst))
      return;
  timespec ts{time_t(timeout_us / 1000000), long(timeout_us % 1000000) * 1000};
  syscall(SYS_futex, &own_bell_->armed, FUTEX_WAIT, 1, &ts, nullptr, 0);
}

void shm_device::forget_peer(int rank) {
  outgoing_.remove_if([&](const outgoing_put& o) {
    if (o.rank != rank) return false;
    channel_of(own_base_, o.channel)->busy.store(0, std::memory_order_release);
    return true;
  });
  incoming_.remove_if([rank](const incoming_put& in) { return in.rank == rank; });
  events_.remove_if([rank](const local_event& e) { return e.rank == rank; });
}

bool shm_device::peer_alive(int rank) {
  pid_t pid = peers_[size_t(rank)]->pid;
  return kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace weft::net::shm

namespace weft::net {
std::unique_ptr<context> make_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id) {
  return std::make_unique<shm::shm_context>(std::move(boot), context_id);
}
}  // namespace weft::net
