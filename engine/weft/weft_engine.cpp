// SPDX-License-Identifier: BSD-3-Clause
// The Weft engine's life and its plain calls: allocation (its device, FIFOs and remote
// completions), the ops table weft/engine.h dispatches through, active messages and
// registered regions. Puts and gets are in rma.cpp, the FIFOs and threads in drive.cpp.
#include "engine/weft/weft_engine.hpp"

#include <cstdlib>
#include <cstring>

#include "c_api/guard.hpp"

namespace weft::engine {

// The attributes with auto's threads decided: none on an oversubscribed machine.
static weft_engine_attr_t resolved(weft_engine_attr_t a) {
  a.oversubscribed = get_g_runtime().get_attr_yield_when_idle() ? 1 : 0;
  if (a.progress_thread < 0) a.progress_thread = !a.oversubscribed;
  if (a.comm_thread < 0) a.comm_thread = !a.oversubscribed;
  return a;
}

weft_engine::weft_engine(const weft_engine_attr_t& given) {
  const weft_engine_attr_t a = resolved(given);
  weft_engine_init_base(this, nullptr, &a, get_rank_me(), get_rank_n());
  // Only on the runtime's word: a pipelined put needs its target to progress, and a rank
  // busy in a long task (a Cholesky's GEMM) holds it up, where cross-memory attach does not
  // wait (docs/engine.md: 2 MiB tiles 56-82 GFLOP/s pipelined against 89-98).
  // Shared: the runtime's threads post on it while the engine's threads progress it.
  dev_ = alloc_device_x().peers_progress(a.peers_progress != 0).shared(true)();
  am_cq_ = alloc_cq_x().depth(a.queue_depth)();
  bulk_cq_ = alloc_cq_x().depth(a.queue_depth)();
  am_rc_ = register_rcomp_x(am_cq_).packet_delivery(true)();
  bulk_rc_ = register_rcomp(bulk_cq_);
  eager_limit_ = get_g_runtime().get_attr_eager_size();
  reported_dead_.reset(new std::atomic<bool>[size_t(rank_n)]());
}

weft_engine::~weft_engine() {
  for (const status_t& s : parked_)
    if (s.buf) put_upacket(s.buf);
  deregister_rcomp(am_rc_);
  deregister_rcomp(bulk_rc_);
  free_comp(&am_cq_);
  free_comp(&bulk_cq_);
  free_device(&dev_);
}

// An active message of Weft tag `tag`: eager ones are copied by Weft and done at once;
// a longer one is copied here and freed when its bulk completion comes back.
status_t weft_engine::send(int rank, tag_t tag, const void* buf, size_t size) {
  void* data = const_cast<void*>(buf);
  if (size <= eager_limit_)
    return post_am_x(rank, data, size, comp_t{}, am_rc_).tag(tag).device(dev_)();
  void* copy = std::malloc(size);
  if (!copy) throw std::bad_alloc();
  std::memcpy(copy, buf, size);
  // The low bit tells a buffer to free from a put or get (rma_op, aligned) in bulk_cq.
  void* ctx = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(copy) | 1);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  status_t s =
      post_am_x(rank, copy, size, bulk_cq_, am_rc_).tag(tag).device(dev_).user_context(ctx)();
  if (!s.error.is_posted()) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    std::free(copy);
  }
  return s;
}

int weft_engine::post_am(weft_engine_tag_t tag, int rank, const void* buf, size_t size) {
  const tag_t t = make_tag(msg_kind::am, tag);
  if (ndeferred_.load(std::memory_order_acquire) == 0) {
    status_t s = send(rank, t, buf, size);
    if (!s.error.is_retry()) {
      if (s.error.is_error())
        return s.error.errorcode == errorcode_t::error_peer_dead ? WEFT_ERROR_PEER_DEAD
                                                                 : WEFT_ERROR;
      __atomic_fetch_add(&stats.am_sent, 1, __ATOMIC_RELAXED);
      return WEFT_DONE;
    }
  }
  deferred_post d;
  d.rank = rank;
  d.tag = t;
  d.bytes.assign(static_cast<const char*>(buf), static_cast<const char*>(buf) + size);
  return defer(std::move(d));
}

int weft_engine::register_memory(void* base, size_t size, weft_engine_mem_t* mem) {
  auto r = std::make_unique<mem_region>();
  r->base = base;
  r->size = size;
  r->mr = weft::register_memory(base, size);
  return add_region(std::move(r), mem);
}

// Weft's alloc_memory: over shared memory a peer's put into it is one memcpy through the
// peer's mapping of it (no system call, no CPU of this rank).
int weft_engine::alloc_memory(size_t size, void** base, weft_engine_mem_t* mem) {
  auto r = std::make_unique<mem_region>();
  r->mr = weft::alloc_memory(size);
  r->base = r->mr.get_attr_base();
  r->size = size;
  r->allocated = true;
  *base = r->base;
  return add_region(std::move(r), mem);
}

int weft_engine::add_region(std::unique_ptr<mem_region> r, weft_engine_mem_t* mem) {
  util::lock_guard<util::spinlock> g(regions_lock_);
  if (free_ids_.empty()) {
    free_ids_.push_back(uint32_t(regions_.size()));
    regions_.push_back(nullptr);
  }
  r->id = free_ids_.back();
  free_ids_.pop_back();
  r->generation = next_generation_++;
  regions_[r->id] = r.get();
  *mem = reinterpret_cast<weft_engine_mem_t>(r.release());
  return WEFT_OK;
}

int weft_engine::deregister_memory(weft_engine_mem_t mem) {
  return forget_region(mem, false, "weft_engine_deregister_memory");
}

int weft_engine::free_memory(weft_engine_mem_t mem) {
  return forget_region(mem, true, "weft_engine_free_memory");
}

// Takes `mem` out of the table and deregisters it (and frees it, when allocated); `call`
// (deregister or free) refuses a region of the other kind.
int weft_engine::forget_region(weft_engine_mem_t mem, bool allocated, const char* call) {
  std::unique_ptr<mem_region> r(reinterpret_cast<mem_region*>(mem));
  {
    util::lock_guard<util::spinlock> g(regions_lock_);
    if (r->id >= regions_.size() || regions_[r->id] != r.get()) {
      r.release();
      return weft_engine_fail(call, "mem", "?", "not a region registered with this engine");
    }
    if (r->allocated != allocated) {
      r.release();
      return weft_engine_fail_region_kind(call, allocated);
    }
    regions_[r->id] = nullptr;
    free_ids_.push_back(r->id);
  }
  r->allocated ? weft::free_memory(&r->mr) : weft::deregister_memory(&r->mr);
  return WEFT_OK;
}

int weft_engine::pack(weft_engine_mem_t mem, void* out) {
  const mem_region& r = *reinterpret_cast<const mem_region*>(mem);
  packed_region p{};
  p.magic = packed_magic;
  p.owner = rank_me;
  p.id = r.id;
  p.generation = r.generation;
  p.rmr = get_rmr(r.mr);
  std::memcpy(out, &p, sizeof(p));
  return WEFT_OK;
}

int weft_engine::release() {
  disable();
  if (in_flight_.load() || ndeferred_.load())
    return weft_engine_fail(
        "weft_engine_free", "engine", "busy",
        (std::to_string(in_flight_.load()) + " operations in flight and " +
         std::to_string(ndeferred_.load()) + " deferred: progress until they finish")
            .c_str());
  {
    util::lock_guard<util::spinlock> g(regions_lock_);
    if (free_ids_.size() != regions_.size())
      return weft_engine_fail("weft_engine_free", "engine", "busy",
                              "regions are still registered (weft_engine_deregister_memory)");
  }
  delete this;
  return WEFT_OK;
}

}  // namespace weft::engine

namespace {

using weft::engine::weft_engine;

weft_engine* self(weft_engine_t e) {
  return static_cast<weft_engine*>(e);
}

// Runs an engine call, turning an exception into a return code and its message.
template <typename Fn>
int call(Fn&& fn) {
  int r = 0;
  const int rc = weft::capi::guard([&] { r = fn(); });
  return rc == WEFT_OK ? r : rc;
}

const weft_engine_ops_t weft_ops = {
    "weft",
    [](weft_engine_t e) { return call([&] { return self(e)->release(); }); },
    [](weft_engine_t e, weft_engine_tag_t tag, int rank, const void* buf, size_t size) {
      return call([&] { return self(e)->post_am(tag, rank, buf, size); });
    },
    [](weft_engine_t e, void* base, size_t size, weft_engine_mem_t* mem) {
      return call([&] { return self(e)->register_memory(base, size, mem); });
    },
    [](weft_engine_t e, weft_engine_mem_t mem) {
      return call([&] { return self(e)->deregister_memory(mem); });
    },
    [](weft_engine_t e, weft_engine_mem_t mem, void* out) { return self(e)->pack(mem, out); },
    [](weft_engine_t, weft_engine_mem_t mem, void** base, size_t* size) {
      const auto* r = reinterpret_cast<const weft::engine::mem_region*>(mem);
      *base = r->base;
      *size = r->size;
      return WEFT_OK;
    },
    [](weft_engine_t e, int is_get, weft_engine_mem_t lreg, ptrdiff_t ldispl, const void* rreg,
       ptrdiff_t rdispl, size_t size, int rank, weft_engine_onesided_fn l_fn, void* l_data,
       weft_engine_tag_t r_tag, const void* r_data, size_t r_size) {
      return call([&] {
        return self(e)->post_rma(is_get, lreg, ldispl, rreg, rdispl, size, rank, l_fn, l_data,
                                 r_tag, r_data, r_size);
      });
    },
    [](weft_engine_t e) { return call([&] { return self(e)->progress(); }); },
    [](weft_engine_t e) { return call([&] { return self(e)->enable(); }); },
    [](weft_engine_t e) { return call([&] { return self(e)->disable(); }); },
    [](weft_engine_t e) { return self(e)->can_serve(); },
    nullptr,
    nullptr,
    [](weft_engine_t e, size_t size, void** base, weft_engine_mem_t* mem) {
      return call([&] { return self(e)->alloc_memory(size, base, mem); });
    },
    [](weft_engine_t e, weft_engine_mem_t mem) {
      return call([&] { return self(e)->free_memory(mem); });
    },
    [](weft_engine_t e, uint32_t timeout_us) {
      return call([&] { return self(e)->progress_wait(timeout_us); });
    },
    [](weft_engine_t e, int on) { return self(e)->watch_peers(on); },
};

}  // namespace

extern "C" int weft_engine_alloc(const weft_engine_attr_t* attr, weft_engine_t* engine) {
  if (!engine)
    return weft_engine_fail("weft_engine_alloc", "engine", "NULL",
                            "this call needs somewhere to write");
  weft_engine_attr_t a;
  if (attr)
    a = *attr;
  else if (const int rc = weft_engine_attr_init_checked(&a); rc != WEFT_OK)
    return rc;  // a bad WEFT_ENGINE_* setting: refused, named in weft_last_error()
  if (a.am_batch == 0)
    return weft_engine_fail("weft_engine_alloc", "attr.am_batch", "0", "at least 1");
  if (a.queue_depth < 2)
    return weft_engine_fail("weft_engine_alloc", "attr.queue_depth",
                            std::to_string(a.queue_depth).c_str(), "at least 2");
  if (a.deferred == 0)
    return weft_engine_fail("weft_engine_alloc", "attr.deferred", "0", "at least 1");
  return call([&] {
    auto* e = new weft_engine(a);
    e->ops = &weft_ops;
    const int rc = e->enable();
    *engine = e;
    return rc;
  });
}
