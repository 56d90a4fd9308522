/* SPDX-License-Identifier: BSD-3-Clause */
/* For implementers of an engine (weft/engine.h): every engine is a struct that begins with
 * weft_engine_s, whose `ops` the weft_engine_* calls dispatch through after checking the
 * arguments every engine shares (tags in range, a registered tag's max length, non-NULL
 * outputs). weft_engine_fail sets the message weft_last_error() returns, in the C API's
 * form, and returns WEFT_ERR_USAGE. The Weft engine (engine/weft) and the MPI engine
 * (engine/mpi) are the two implementations. */
#ifndef WEFT_ENGINE_OPS_H
#define WEFT_ENGINE_OPS_H

#include "weft/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  weft_engine_am_fn fn;
  void* data;
  size_t max_len; /* 0: not registered */
} weft_engine_tag_entry_t;

typedef struct {
  const char* name;
  int (*free_)(weft_engine_t e);
  int (*post_am)(weft_engine_t e, weft_engine_tag_t tag, int rank, const void* buf, size_t size);
  int (*register_memory)(weft_engine_t e, void* base, size_t size, weft_engine_mem_t* mem);
  int (*deregister_memory)(weft_engine_t e, weft_engine_mem_t mem);
  int (*pack_memory)(weft_engine_t e, weft_engine_mem_t mem, void* out);
  int (*memory_info)(weft_engine_t e, weft_engine_mem_t mem, void** base, size_t* size);
  /* put (is_get 0) or get (1); arguments checked */
  int (*post_rma)(weft_engine_t e, int is_get, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                  const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                  weft_engine_onesided_fn l_fn, void* l_data, weft_engine_tag_t r_tag,
                  const void* r_data, size_t r_size);
  int (*progress)(weft_engine_t e);
  int (*enable)(weft_engine_t e);
  int (*disable)(weft_engine_t e);
  int (*can_serve)(weft_engine_t e);
  /* Optional (NULL: nothing to do): called after a tag is entered in `tags` and before it
     is removed, for an engine that posts receives per tag. */
  int (*tag_added)(weft_engine_t e, weft_engine_tag_t tag);
  int (*tag_removed)(weft_engine_t e, weft_engine_tag_t tag);
  /* Memory the engine allocates and registers (arguments checked); free_memory refuses a
     region from register_memory. */
  int (*alloc_memory)(weft_engine_t e, size_t size, void** base, weft_engine_mem_t* mem);
  int (*free_memory)(weft_engine_t e, weft_engine_mem_t mem);
  /* Optional (NULL: progress): weft_engine_progress_wait. */
  int (*progress_wait)(weft_engine_t e, uint32_t timeout_us);
  /* Optional (NULL: the engine cannot watch its peers): weft_engine_watch_peers. */
  int (*watch_peers)(weft_engine_t e, int on);
} weft_engine_ops_t;

struct weft_engine_s {
  const weft_engine_ops_t* ops;
  weft_engine_attr_t attr;
  int rank_me, rank_n;
  /* Written by register/deregister (before traffic on the tag), read by receivers. */
  weft_engine_tag_entry_t tags[WEFT_ENGINE_MAX_TAGS];
  weft_engine_error_fn error_fn;
  void* error_data;
  weft_engine_stats_t stats; /* each implementation counts its own (atomic adds) */
  /* The first failure not yet returned by weft_engine_progress (no error handler). */
  char report[256];
  int has_report, report_lock;
};

/* Sets weft_last_error() to "weft: <call>: <argument> = <value>: <reason>"; returns
   WEFT_ERR_USAGE. */
WEFT_C_API int weft_engine_fail(const char* call, const char* argument, const char* value,
                                const char* reason);
/* weft_engine_fail for a region given to the wrong release: `call` frees allocated regions
   (allocated = 1) or deregisters the program's own (0), and names the right call. */
WEFT_C_API int weft_engine_fail_region_kind(const char* call, int allocated);
/* Reports a failed operation: the engine's error handler, else the message kept for the
   next weft_engine_progress to return (WEFT_ERR_INTERNAL). */
WEFT_C_API void weft_engine_report(weft_engine_t e, int rank, const char* what);
/* Returns (and clears) the report kept for progress: WEFT_ERR_INTERNAL with its message set
   as the last error, or WEFT_OK. */
WEFT_C_API int weft_engine_take_report(weft_engine_t e);
/* The kernel's boot id (NUL-terminated, empty when unreadable): ranks that report the same
   one share a machine's CPUs, whatever host name or network namespace they have. */
#define WEFT_ENGINE_BOOT_ID_LEN 40
WEFT_C_API void weft_engine_boot_id(char out[WEFT_ENGINE_BOOT_ID_LEN]);
/* Whether a rank whose machine runs `machine_ranks` ranks of the job is oversubscribed:
   WEFT_YIELD on 1, off 0, auto: more ranks than CPUs online. WEFT_ERR_USAGE for a bad
   WEFT_YIELD, with the message set. */
WEFT_C_API int weft_engine_oversubscribed(int machine_ranks);
/* weft_engine_attr_init that returns WEFT_ERR_USAGE for a bad WEFT_ENGINE_* setting (the
   message in weft_last_error(), the defaults in *attr) instead of warning: what an
   allocation given no attributes refuses. */
WEFT_C_API int weft_engine_attr_init_checked(weft_engine_attr_t* attr);
/* Initialises the shared part of a new engine. */
WEFT_C_API void weft_engine_init_base(weft_engine_t e, const weft_engine_ops_t* ops,
                                      const weft_engine_attr_t* attr, int rank_me, int rank_n);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_ENGINE_OPS_H */
