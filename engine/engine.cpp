// SPDX-License-Identifier: BSD-3-Clause
// The engine interface (weft/engine.h): every weft_engine_* call checks what all engines
// share (the engine, tags, ranks, lengths, local bounds) and then dispatches through the
// engine's ops (weft/engine_ops.h), so each implementation sees only valid arguments and
// every refusal reads the same whichever engine runs.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "c_api/guard.hpp"
#include "core/runtime.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"
#include "weft/engine_ops.h"

namespace {

using weft::util::setting;

int fail(const char* call, const char* argument, const std::string& value, const std::string& why) {
  return weft_engine_fail(call, argument, value.c_str(), why.c_str());
}

int cpu_setting(setting s) {
  const std::string v = weft::util::get_text(s);
  if (v.empty()) return -1;
  char* end = nullptr;
  const long cpu = std::strtol(v.c_str(), &end, 10);
  if (*end || cpu < 0 || cpu > 65535)
    throw weft::fatal_error("weft_engine_attr_init", weft::util::row_of(s).env, v,
                            "not a CPU number");
  return int(cpu);
}

// auto (-1: the engine decides when it is allocated), else the flag's 1 or 0.
int thread_setting(setting s) {
  const std::string v = weft::util::current_text(s);
  if (v == "auto") return -1;
  try {
    return weft::util::get_flag(s) ? 1 : 0;
  } catch (const weft::fatal_error&) {
    throw weft::fatal_error("environment", weft::util::row_of(s).env, v,
                            "expected auto, or 1/0, true/false, yes/no or on/off");
  }
}

bool bad_engine(weft_engine_t e, const char* call) {
  if (e) return false;
  fail(call, "engine", "NULL", "not an engine from weft_engine_alloc");
  return true;
}

bool bad_rank(weft_engine_t e, int rank, const char* call) {
  if (rank >= 0 && rank < e->rank_n) return false;
  fail(call, "rank", std::to_string(rank), "out of range [0, " + std::to_string(e->rank_n) + ")");
  return true;
}

// A tag that must be registered, with `size` bytes within its max length.
bool bad_tag(weft_engine_t e, weft_engine_tag_t tag, size_t size, const char* call,
             const char* argument) {
  if (tag >= WEFT_ENGINE_MAX_TAGS) {
    fail(call, argument, std::to_string(tag),
         "out of range [0, " + std::to_string(WEFT_ENGINE_MAX_TAGS) + ")");
    return true;
  }
  const size_t max = e->tags[tag].max_len;
  if (!max && !e->tags[tag].fn) {
    fail(call, argument, std::to_string(tag), "not registered (weft_engine_register_tag)");
    return true;
  }
  if (size > max) {
    fail(call, "size", std::to_string(size),
         "over the max length " + std::to_string(max) + " tag " + std::to_string(tag) +
             " registered");
    return true;
  }
  return false;
}

void lock(int* word) {
  while (__atomic_exchange_n(word, 1, __ATOMIC_ACQUIRE)) {
  }
}
void unlock(int* word) {
  __atomic_store_n(word, 0, __ATOMIC_RELEASE);
}

}  // namespace

extern "C" {

int weft_engine_fail(const char* call, const char* argument, const char* value,
                     const char* reason) {
  weft::capi::last_error() = weft::fatal_error(call, argument, value, reason).what();
  return WEFT_ERR_USAGE;
}

int weft_engine_fail_region_kind(const char* call, int allocated) {
  return allocated ? weft_engine_fail(call, "mem", "registered",
                                      "the program owns that memory: "
                                      "weft_engine_deregister_memory")
                   : weft_engine_fail(call, "mem", "allocated",
                                      "a region of weft_engine_alloc_memory: "
                                      "weft_engine_free_memory");
}

void weft_engine_report(weft_engine_t e, int rank, const char* what) {
  __atomic_fetch_add(&e->stats.errors, 1, __ATOMIC_RELAXED);
  if (e->error_fn) return e->error_fn(e, rank, what, e->error_data);
  lock(&e->report_lock);
  if (!e->has_report) {
    std::snprintf(e->report, sizeof(e->report), "weft: weft_engine_progress: rank = %d: %s", rank,
                  what);
    e->has_report = 1;
  }
  unlock(&e->report_lock);
}

int weft_engine_take_report(weft_engine_t e) {
  if (!__atomic_load_n(&e->has_report, __ATOMIC_ACQUIRE)) return WEFT_OK;
  lock(&e->report_lock);
  weft::capi::last_error() = e->report;
  e->has_report = 0;
  unlock(&e->report_lock);
  return WEFT_ERR_INTERNAL;
}

void weft_engine_init_base(weft_engine_t e, const weft_engine_ops_t* ops,
                           const weft_engine_attr_t* attr, int rank_me, int rank_n) {
  std::memset(static_cast<void*>(e), 0, sizeof(*e));
  e->ops = ops;
  e->attr = *attr;
  e->rank_me = rank_me;
  e->rank_n = rank_n;
}

void weft_engine_boot_id(char out[WEFT_ENGINE_BOOT_ID_LEN]) {
  std::memset(out, 0, WEFT_ENGINE_BOOT_ID_LEN);
  const std::string id = weft::bootstrap::kernel_boot_id();
  std::memcpy(out, id.data(), std::min(id.size(), size_t(WEFT_ENGINE_BOOT_ID_LEN - 1)));
}

// The core's WEFT_YIELD rule, for an engine that counts the ranks of its machine itself
// (the MPI engine, which has no Weft runtime to ask).
int weft_engine_oversubscribed(int machine_ranks) {
  int over = 0;
  const int rc = weft::capi::guard([&] { over = weft::impl::yield_rule(machine_ranks); });
  return rc == WEFT_OK ? over : rc;
}

void weft_engine_attr_init(weft_engine_attr_t* attr) {
  if (weft_engine_attr_init_checked(attr) != WEFT_OK)
    WEFT_LOG(warn, "%s (the engine attributes keep their defaults)", weft_last_error());
}

int weft_engine_attr_init_checked(weft_engine_attr_t* attr) {
  if (!attr) return WEFT_OK;
  weft_engine_attr_t a{};
  // A bad setting leaves the defaults below and the message for weft_last_error().
  a.progress_cpu = a.comm_cpu = -1;
  a.progress_thread = a.comm_thread = -1;
  a.am_batch = 5;
  a.put_eager = 4096;
  a.queue_depth = a.deferred = 4096;
  a.max_am = 65536;
  a.peers_progress = 0;
  a.oversubscribed = 0;  // reported by each engine, never read from here
  const int rc = weft::capi::guard([&] {
    using weft::util::get_flag;
    using weft::util::get_size;
    a.progress_thread = thread_setting(setting::engine_progress_thread);
    a.comm_thread = thread_setting(setting::engine_comm_thread);
    a.progress_cpu = cpu_setting(setting::engine_progress_cpu);
    a.comm_cpu = cpu_setting(setting::engine_comm_cpu);
    a.am_batch = *get_size(setting::engine_am_batch);
    a.put_eager = *get_size(setting::engine_put_eager);
    a.queue_depth = *get_size(setting::engine_queue_depth);
    a.deferred = *get_size(setting::engine_deferred);
    a.max_am = *get_size(setting::engine_max_am);
    a.peers_progress = get_flag(setting::engine_peers_progress);
  });
  *attr = a;
  return rc;
}

int weft_engine_free(weft_engine_t* engine) {
  if (!engine || bad_engine(*engine, "weft_engine_free")) return WEFT_ERR_USAGE;
  const int rc = (*engine)->ops->free_(*engine);
  if (rc == WEFT_OK) *engine = nullptr;
  return rc;
}

const char* weft_engine_name(weft_engine_t e) {
  return e ? e->ops->name : "none";
}
int weft_engine_rank_me(weft_engine_t e) {
  return e ? e->rank_me : -1;
}
int weft_engine_rank_n(weft_engine_t e) {
  return e ? e->rank_n : 0;
}
void weft_engine_set_error_handler(weft_engine_t e, weft_engine_error_fn fn, void* data) {
  if (!e) return;
  e->error_data = data;
  e->error_fn = fn;
}

int weft_engine_register_tag(weft_engine_t e, weft_engine_tag_t tag, weft_engine_am_fn fn,
                             void* cb_data, size_t max_len) {
  const char* call = "weft_engine_register_tag";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (tag >= WEFT_ENGINE_MAX_TAGS)
    return fail(call, "tag", std::to_string(tag),
                "out of range [0, " + std::to_string(WEFT_ENGINE_MAX_TAGS) + ")");
  if (!fn) return fail(call, "fn", "NULL", "a tag needs a callback");
  if (max_len > e->attr.max_am)
    return fail(
        call, "max_len", std::to_string(max_len),
        "over the engine's max_am " + std::to_string(e->attr.max_am) + " (WEFT_ENGINE_MAX_AM)");
  if (e->tags[tag].fn)
    return fail(call, "tag", std::to_string(tag), "registered already (deregister it first)");
  e->tags[tag].data = cb_data;
  e->tags[tag].max_len = max_len;
  __atomic_store_n(&e->tags[tag].fn, fn, __ATOMIC_RELEASE);
  const int rc = e->ops->tag_added ? e->ops->tag_added(e, tag) : WEFT_OK;
  if (rc != WEFT_OK) {
    __atomic_store_n(&e->tags[tag].fn, nullptr, __ATOMIC_RELEASE);
    e->tags[tag].max_len = 0;
  }
  return rc;
}

int weft_engine_deregister_tag(weft_engine_t e, weft_engine_tag_t tag) {
  const char* call = "weft_engine_deregister_tag";
  if (bad_engine(e, call) || bad_tag(e, tag, 0, call, "tag")) return WEFT_ERR_USAGE;
  if (e->ops->tag_removed) {
    const int rc = e->ops->tag_removed(e, tag);
    if (rc != WEFT_OK) return rc;
  }
  __atomic_store_n(&e->tags[tag].fn, nullptr, __ATOMIC_RELEASE);
  e->tags[tag].max_len = 0;
  return WEFT_OK;
}

int weft_engine_post_am(weft_engine_t e, weft_engine_tag_t tag, int rank, const void* buf,
                        size_t size) {
  const char* call = "weft_engine_post_am";
  if (bad_engine(e, call) || bad_rank(e, rank, call) || bad_tag(e, tag, size, call, "tag"))
    return WEFT_ERR_USAGE;
  if (size && !buf) return fail(call, "buf", "NULL", "with size " + std::to_string(size));
  return e->ops->post_am(e, tag, rank, buf, size);
}

int weft_engine_register_memory(weft_engine_t e, void* base, size_t size, weft_engine_mem_t* mem) {
  const char* call = "weft_engine_register_memory";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!mem) return fail(call, "mem", "NULL", "this call needs somewhere to write");
  if (!base && size) return fail(call, "base", "NULL", "with size " + std::to_string(size));
  return e->ops->register_memory(e, base, size, mem);
}

int weft_engine_deregister_memory(weft_engine_t e, weft_engine_mem_t* mem) {
  const char* call = "weft_engine_deregister_memory";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!mem || !*mem) return fail(call, "mem", "NULL", "not a registered region");
  const int rc = e->ops->deregister_memory(e, *mem);
  if (rc == WEFT_OK) *mem = nullptr;
  return rc;
}

int weft_engine_alloc_memory(weft_engine_t e, size_t size, void** base, weft_engine_mem_t* mem) {
  const char* call = "weft_engine_alloc_memory";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!base) return fail(call, "base", "NULL", "this call needs somewhere to write");
  if (!mem) return fail(call, "mem", "NULL", "this call needs somewhere to write");
  if (size == 0) return fail(call, "size", "0", "an empty region");
  return e->ops->alloc_memory(e, size, base, mem);
}

int weft_engine_free_memory(weft_engine_t e, weft_engine_mem_t* mem) {
  const char* call = "weft_engine_free_memory";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!mem || !*mem) return fail(call, "mem", "NULL", "not an allocated region");
  const int rc = e->ops->free_memory(e, *mem);
  if (rc == WEFT_OK) *mem = nullptr;
  return rc;
}

int weft_engine_pack_memory(weft_engine_t e, weft_engine_mem_t mem, void* out) {
  const char* call = "weft_engine_pack_memory";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!mem) return fail(call, "mem", "NULL", "not a registered region");
  if (!out) return fail(call, "out", "NULL", "this call needs somewhere to write");
  return e->ops->pack_memory(e, mem, out);
}

int weft_engine_memory_info(weft_engine_t e, weft_engine_mem_t mem, void** base, size_t* size) {
  const char* call = "weft_engine_memory_info";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!mem) return fail(call, "mem", "NULL", "not a registered region");
  void* b = nullptr;
  size_t n = 0;
  const int rc = e->ops->memory_info(e, mem, &b, &n);
  if (base) *base = b;
  if (size) *size = n;
  return rc;
}

}  // extern "C"

namespace {

int post_rma(const char* call, int is_get, weft_engine_t e, weft_engine_mem_t lreg,
             ptrdiff_t ldispl, const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
             weft_engine_onesided_fn l_fn, void* l_data, weft_engine_tag_t r_tag,
             const void* r_data, size_t r_size) {
  if (bad_engine(e, call) || bad_rank(e, rank, call)) return WEFT_ERR_USAGE;
  if (!lreg) return fail(call, "lreg", "NULL", "not a registered region");
  if (!rreg) return fail(call, "rreg", "NULL", "not a packed region (weft_engine_pack_memory)");
  if (r_tag != WEFT_ENGINE_NO_TAG && bad_tag(e, r_tag, r_size, call, "r_tag"))
    return WEFT_ERR_USAGE;
  if (r_size && !r_data)
    return fail(call, "r_data", "NULL", "with r_size " + std::to_string(r_size));
  void* base = nullptr;
  size_t n = 0;
  if (e->ops->memory_info(e, lreg, &base, &n) != WEFT_OK) return WEFT_ERR_USAGE;
  if (ldispl < 0 || size_t(ldispl) > n || size > n - size_t(ldispl))
    return fail(call, "ldispl", std::to_string(ldispl),
                "an access of " + std::to_string(size) + " bytes there overruns the region of " +
                    std::to_string(n) + " bytes");
  if (rdispl < 0) return fail(call, "rdispl", std::to_string(rdispl), "negative");
  return e->ops->post_rma(e, is_get, lreg, ldispl, rreg, rdispl, size, rank, l_fn, l_data, r_tag,
                          r_data, r_size);
}

}  // namespace

extern "C" {

int weft_engine_post_put(weft_engine_t e, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                         const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                         weft_engine_onesided_fn l_fn, void* l_data, weft_engine_tag_t r_tag,
                         const void* r_data, size_t r_size) {
  return post_rma("weft_engine_post_put", 0, e, lreg, ldispl, rreg, rdispl, size, rank, l_fn,
                  l_data, r_tag, r_data, r_size);
}

int weft_engine_post_get(weft_engine_t e, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                         const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                         weft_engine_onesided_fn l_fn, void* l_data, weft_engine_tag_t r_tag,
                         const void* r_data, size_t r_size) {
  return post_rma("weft_engine_post_get", 1, e, lreg, ldispl, rreg, rdispl, size, rank, l_fn,
                  l_data, r_tag, r_data, r_size);
}

int weft_engine_progress(weft_engine_t e) {
  if (bad_engine(e, "weft_engine_progress")) return WEFT_ERR_USAGE;
  const int n = e->ops->progress(e);
  if (n < 0) return n;
  const int rc = weft_engine_take_report(e);
  return rc == WEFT_OK ? n : rc;
}

int weft_engine_progress_wait(weft_engine_t e, uint32_t timeout_us) {
  if (bad_engine(e, "weft_engine_progress_wait")) return WEFT_ERR_USAGE;
  const int n = e->ops->progress_wait ? e->ops->progress_wait(e, timeout_us) : e->ops->progress(e);
  if (n < 0) return n;
  const int rc = weft_engine_take_report(e);
  return rc == WEFT_OK ? n : rc;
}

int weft_engine_watch_peers(weft_engine_t e, int on) {
  const char* call = "weft_engine_watch_peers";
  if (bad_engine(e, call)) return WEFT_ERR_USAGE;
  if (!e->ops->watch_peers)
    return weft_engine_fail(call, "engine", "mpi",
                            "this engine cannot watch its peers (MPI ends the job when a rank "
                            "dies)");
  return e->ops->watch_peers(e, on);
}

int weft_engine_enable(weft_engine_t e) {
  return bad_engine(e, "weft_engine_enable") ? WEFT_ERR_USAGE : e->ops->enable(e);
}
int weft_engine_disable(weft_engine_t e) {
  return bad_engine(e, "weft_engine_disable") ? WEFT_ERR_USAGE : e->ops->disable(e);
}
int weft_engine_can_serve(weft_engine_t e) {
  return e ? e->ops->can_serve(e) : 0;
}

int weft_engine_get_attr(weft_engine_t e, weft_engine_attr_t* attr) {
  if (bad_engine(e, "weft_engine_get_attr")) return WEFT_ERR_USAGE;
  if (!attr)
    return fail("weft_engine_get_attr", "attr", "NULL", "this call needs somewhere to write");
  *attr = e->attr;
  return WEFT_OK;
}

int weft_engine_get_stats(weft_engine_t e, weft_engine_stats_t* stats) {
  if (bad_engine(e, "weft_engine_get_stats")) return WEFT_ERR_USAGE;
  if (!stats)
    return fail("weft_engine_get_stats", "stats", "NULL", "this call needs somewhere to write");
  // Counted by several threads with atomic adds: read the same way.
  const uint64_t* from = &e->stats.am_sent;
  uint64_t* to = &stats->am_sent;
  for (size_t i = 0; i < sizeof(*stats) / sizeof(uint64_t); ++i)
    to[i] = __atomic_load_n(from + i, __ATOMIC_RELAXED);
  return WEFT_OK;
}

}  // extern "C"
