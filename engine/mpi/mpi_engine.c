/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI engine's life and its plain calls: allocation on a duplicate communicator, tags
 * (their persistent receives), active messages (a blocking MPI_Send, as the seed's MPI
 * engine does), regions, the communication thread and the ops table. The request array,
 * puts and gets are in mpi_progress.c. */
#include "engine/mpi/mpi_engine.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static mpi_engine* self(weft_engine_t e) {
  return (mpi_engine*)e;
}

static int mpi_failed(const char* call, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return weft_engine_fail(call, "MPI", text, "the MPI call failed");
}

static int tag_added(weft_engine_t e, weft_engine_tag_t tag) {
  mpi_engine* m = self(e);
  pthread_mutex_lock(&m->lock);
  int rc = WEFT_OK;
  for (int i = 0; i < mpi_per_tag && rc == WEFT_OK; ++i)
    rc = mpi_add_receive(m, entry_am, tag, e->tags[tag].max_len);
  if (rc != WEFT_OK) mpi_remove_receives(m, tag);
  pthread_mutex_unlock(&m->lock);
  return rc;
}

/* Removing entries moves the array: never while a progress holds indices into it. */
static int tag_removed(weft_engine_t e, weft_engine_tag_t tag) {
  mpi_engine* m = self(e);
  while (__atomic_exchange_n(&m->progressing, 1, __ATOMIC_ACQUIRE)) sched_yield();
  pthread_mutex_lock(&m->lock);
  mpi_remove_receives(m, tag);
  pthread_mutex_unlock(&m->lock);
  __atomic_store_n(&m->progressing, 0, __ATOMIC_RELEASE);
  return WEFT_OK;
}

static int post_am(weft_engine_t e, weft_engine_tag_t tag, int rank, const void* buf, size_t size) {
  if (size > (size_t)INT32_MAX)
    return weft_engine_fail("weft_engine_post_am", "size", "over 2^31", "MPI counts are int");
  const int rc = mpi_send_progressing(self(e), buf, size, rank, (int)tag);
  if (rc != MPI_SUCCESS) return mpi_failed("weft_engine_post_am", rc);
  __atomic_fetch_add(&e->stats.am_sent, 1, __ATOMIC_RELAXED);
  return WEFT_DONE;
}

static int register_memory(weft_engine_t e, void* base, size_t size, weft_engine_mem_t* mem) {
  mpi_region* r = malloc(sizeof(*r));
  if (!r) return WEFT_ERR_NOMEM;
  mpi_engine* m = self(e);
  r->base = base;
  r->size = size;
  r->allocated = 0;
  pthread_mutex_lock(&m->lock);
  r->next = m->regions;
  m->regions = r;
  pthread_mutex_unlock(&m->lock);
  *mem = (weft_engine_mem_t)r;
  return WEFT_OK;
}

/* Takes `mem` off the engine's list and frees its record, and its memory when it was
   allocated; `call` (deregister or free) refuses a region of the other kind. The record is
   read only once found on the list. */
static int forget_region(weft_engine_t e, weft_engine_mem_t mem, int allocated, const char* call) {
  mpi_engine* m = self(e);
  pthread_mutex_lock(&m->lock);
  mpi_region** at = &m->regions;
  while (*at && *at != (mpi_region*)mem) at = &(*at)->next;
  mpi_region* r = *at;
  const int kind_ok = r && r->allocated == allocated;
  if (kind_ok) *at = r->next;
  pthread_mutex_unlock(&m->lock);
  if (!r) return weft_engine_fail(call, "mem", "?", "not a region registered with this engine");
  if (!kind_ok) return weft_engine_fail_region_kind(call, allocated);
  if (allocated) free(r->base);
  free(r);
  return WEFT_OK;
}

static int deregister_memory(weft_engine_t e, weft_engine_mem_t mem) {
  return forget_region(e, mem, 0, "weft_engine_deregister_memory");
}

/* On huge pages where the system allows them (transparent huge pages, "madvise"): a
   peer's cross-memory write (shared memory's large transfers in MPICH and Open MPI too)
   pins every page it touches, and 4 KiB pages made that pinning most of a fragment's
   cost (docs/engine.md). Touched here, not by the first transfer into it. */
static int alloc_memory(weft_engine_t e, size_t size, void** base, weft_engine_mem_t* mem) {
  const size_t huge = (size_t)2 << 20, span = (size + huge - 1) & ~(huge - 1);
  void* p = aligned_alloc(huge, span);
  if (!p) return WEFT_ERR_NOMEM;
  (void)madvise(p, span, MADV_HUGEPAGE);
  memset(p, 0, size);
  const int rc = register_memory(e, p, size, mem);
  if (rc != WEFT_OK) {
    free(p);
    return rc;
  }
  ((mpi_region*)*mem)->allocated = 1;
  *base = p;
  return WEFT_OK;
}

static int free_memory(weft_engine_t e, weft_engine_mem_t mem) {
  return forget_region(e, mem, 1, "weft_engine_free_memory");
}

static int pack_memory(weft_engine_t e, weft_engine_mem_t mem, void* out) {
  const mpi_region* r = (const mpi_region*)mem;
  mpi_packed p;
  memset(&p, 0, sizeof(p));
  p.magic = mpi_packed_magic;
  p.owner = e->rank_me;
  p.base = (uint64_t)(uintptr_t)r->base;
  p.size = r->size;
  memcpy(out, &p, sizeof(p));
  return WEFT_OK;
}

static int memory_info(weft_engine_t e, weft_engine_mem_t mem, void** base, size_t* size) {
  (void)e;
  *base = ((const mpi_region*)mem)->base;
  *size = ((const mpi_region*)mem)->size;
  return WEFT_OK;
}

static void* comm_loop(void* arg) {
  mpi_engine* m = arg;
  int idle = 0;
  while (!__atomic_load_n(&m->stop, __ATOMIC_RELAXED)) {
    if (mpi_engine_progress(&m->base) > 0) {
      idle = 0;
    } else if (++idle == 64) { /* as the Weft engine: yield a shared core when idle */
      idle = 0;
      sched_yield();
    }
  }
  return NULL;
}

static int enable(weft_engine_t e) {
  mpi_engine* m = self(e);
  if (!e->attr.comm_thread || m->comm_running) return WEFT_OK;
  __atomic_store_n(&m->stop, 0, __ATOMIC_RELAXED);
  if (pthread_create(&m->comm_thread, NULL, comm_loop, m) != 0)
    return weft_engine_fail("weft_engine_enable", "comm_thread", "1", "pthread_create failed");
  if (e->attr.comm_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(e->attr.comm_cpu, &set);
    pthread_setaffinity_np(m->comm_thread, sizeof(set), &set);
  }
  m->comm_running = 1;
  return WEFT_OK;
}

static int disable(weft_engine_t e) {
  mpi_engine* m = self(e);
  if (!m->comm_running) return WEFT_OK;
  __atomic_store_n(&m->stop, 1, __ATOMIC_RELAXED);
  pthread_join(m->comm_thread, NULL);
  m->comm_running = 0;
  return WEFT_OK;
}

static int can_serve(weft_engine_t e) {
  mpi_engine* m = self(e);
  pthread_mutex_lock(&m->lock);
  const int ok = m->ndata < mpi_max_data || m->deferred.n + (size_t)m->reserved < e->attr.deferred;
  pthread_mutex_unlock(&m->lock);
  return ok;
}

static int progress(weft_engine_t e) {
  return self(e)->comm_running ? 0 : mpi_engine_progress(e);
}

static int release(weft_engine_t e) {
  mpi_engine* m = self(e);
  disable(e);
  pthread_mutex_lock(&m->lock);
  const int busy = m->ndata || m->deferred.n || m->dynamic.n || m->reserved;
  const int regions = m->regions != NULL;
  pthread_mutex_unlock(&m->lock);
  if (busy)
    return weft_engine_fail("weft_engine_free", "engine", "busy",
                            "transfers are in flight: progress until they finish");
  if (regions)
    return weft_engine_fail("weft_engine_free", "engine", "busy",
                            "regions are still registered (weft_engine_deregister_memory)");
  for (uint32_t t = 0; t < WEFT_ENGINE_MAX_TAGS + 2; ++t) mpi_remove_receives(m, t);
  mpi_slots_fini(m);
  MPI_Comm_free(&m->comm);
  pthread_mutex_destroy(&m->lock);
  free(m);
  return WEFT_OK;
}

/* The ranks of `comm` on this rank's machine (the same kernel boot id), counted only when
   some rank's machine could be oversubscribed (the job has more ranks than its CPUs):
   the counting gathers every rank's boot id. Collective. */
static int machine_ranks(MPI_Comm comm, int n) {
  enum { len = WEFT_ENGINE_BOOT_ID_LEN };
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char* all = malloc((size_t)n * len);
  int mine_flags[2] = {cpus > 0 && n > cpus, all == NULL}, any[2] = {0, 0};
  MPI_Allreduce(mine_flags, any, 2, MPI_INT, MPI_MAX, comm); /* a failure anywhere: all stop */
  int k = any[1] ? WEFT_ERR_NOMEM : 1;
  if (any[0] && !any[1]) {
    char mine[len];
    weft_engine_boot_id(mine);
    MPI_Allgather(mine, len, MPI_CHAR, all, len, MPI_CHAR, comm);
    k = 0;
    for (int i = 0; i < n; ++i) k += mine[0] && !strncmp(all + (size_t)i * len, mine, len);
    if (k == 0) k = 1; /* no boot id: this rank alone */
  }
  free(all);
  return k;
}

static const weft_engine_ops_t mpi_ops = {
#ifdef WEFT_MPI_ENGINE_CONT
    "mpi-cont",
#else
    "mpi",
#endif
    release,
    post_am,
    register_memory,
    deregister_memory,
    pack_memory,
    memory_info,
    mpi_engine_post_rma,
    progress,
    enable,
    disable,
    can_serve,
    tag_added,
    tag_removed,
    alloc_memory,
    free_memory,
    NULL, /* progress_wait: MPI cannot be slept on until a message comes */
    NULL, /* watch_peers: a stock MPI ends the job when a rank dies */
};

int weft_engine_alloc_mpi(MPI_Comm comm, const weft_engine_attr_t* attr, weft_engine_t* engine) {
  int rc0;
  if (!engine)
    return weft_engine_fail("weft_engine_alloc_mpi", "engine", "NULL",
                            "this call needs somewhere to write");
  weft_engine_attr_t a;
  if (attr)
    a = *attr;
  else if ((rc0 = weft_engine_attr_init_checked(&a)) != WEFT_OK)
    return rc0; /* a bad WEFT_ENGINE_* setting: refused, named in weft_last_error() */
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return weft_engine_fail("weft_engine_alloc_mpi", "MPI", "not initialised",
                            "call MPI_Init_thread first");
  mpi_engine* m = calloc(1, sizeof(*m));
  if (!m) return WEFT_ERR_NOMEM;
  int me = 0, n = 0, rc = MPI_Comm_dup(comm, &m->comm);
  if (rc != MPI_SUCCESS) {
    free(m);
    return mpi_failed("weft_engine_alloc_mpi", rc);
  }
  MPI_Comm_rank(m->comm, &me);
  MPI_Comm_size(m->comm, &n);
  a.progress_thread = 0; /* the MPI engine has none: MPI progresses inside its calls */
  a.progress_cpu = -1;
  const int local = machine_ranks(m->comm, n);
  a.oversubscribed = local < 0 ? local : weft_engine_oversubscribed(local);
  if (a.oversubscribed < 0) {
    rc = a.oversubscribed;
    MPI_Comm_free(&m->comm);
    free(m);
    return rc;
  }
  if (a.comm_thread < 0) a.comm_thread = !a.oversubscribed; /* auto */
  weft_engine_init_base(&m->base, &mpi_ops, &a, me, n);
  pthread_mutex_init(&m->lock, NULL);
  int* ub = NULL;
  int found = 0;
  MPI_Comm_get_attr(m->comm, MPI_TAG_UB, &ub, &found);
  m->tag_ub = found && ub ? *ub : 32767;
  m->next_data_tag = mpi_first_data_tag;
  const size_t hs = sizeof(mpi_handshake) + a.max_am;
  rc = mpi_slots_init(m);
  if (rc != WEFT_OK) {
    MPI_Comm_free(&m->comm);
    free(m);
    return rc;
  }
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < mpi_per_tag && rc == WEFT_OK; ++i) {
    rc = mpi_add_receive(m, entry_handshake, mpi_tag_put, hs);
    if (rc == WEFT_OK) rc = mpi_add_receive(m, entry_handshake, mpi_tag_get, hs);
  }
  pthread_mutex_unlock(&m->lock);
  if (rc == WEFT_OK) rc = enable(&m->base);
  if (rc != WEFT_OK) {
    for (uint32_t t = 0; t < WEFT_ENGINE_MAX_TAGS + 2; ++t) mpi_remove_receives(m, t);
    mpi_slots_fini(m);
    MPI_Comm_free(&m->comm);
    free(m);
    return rc;
  }
  *engine = &m->base;
  return WEFT_OK;
}
