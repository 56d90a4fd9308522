/* SPDX-License-Identifier: BSD-3-Clause */
/* The communication engine of a task runtime (docs/engine.md): the layer between a
 * runtime's scheduler and the network that sends task activations (active messages on
 * registered tags), moves task data (put and get between registered regions, with a local
 * callback at the initiator and a tagged callback at the target once the data is there)
 * and runs the callbacks that release successor tasks. Its calls follow the shape of
 * PaRSEC's comm engine, so a runtime written against one plugs into the other.
 *
 * Two implementations sit behind one interface:
 *  - weft_engine_alloc: on Weft (this library): a progress thread that only drives Weft
 *    and a communication thread that runs callbacks and starts deferred operations, both
 *    optional; put with remote completion is Weft's put with notification.
 *  - weft_engine_alloc_mpi (weft/engine_mpi.h, library weft-engine-mpi-<mpich|openmpi>):
 *    the MPI baseline as PaRSEC's own MPI engine does it (persistent receives per tag, one
 *    request array polled with MPI_Testsome, handshake then send/receive for puts).
 *
 * Conventions are the C API's (weft/weft.h): calls return WEFT_OK or a negative code with
 * the message in weft_last_error(); posts return WEFT_DONE (finished, the buffer may be
 * reused), WEFT_POSTED (the callback will run; for a post the engine had to defer, it
 * starts later in order) or WEFT_RETRY (no room: the engine's bounded queues are full;
 * progress, then post again). Nothing is dropped and no queue grows without bound: each
 * one's bound is an attribute below.
 *
 * Callbacks run inside weft_engine_progress, or on the communication thread when it runs
 * (then never concurrently with each other). They may post to the engine; they must not
 * call weft_engine_progress, free or disable. */
#ifndef WEFT_ENGINE_H
#define WEFT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "weft/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_engine_s* weft_engine_t;
typedef uint32_t weft_engine_tag_t;
/* A registered region, local to the process that registered it. */
typedef struct weft_engine_mem_s* weft_engine_mem_t;

/* Bytes of a packed region handle (weft_engine_pack_memory): what a peer gives to put and
   get as the remote region. The same size for every engine, so a runtime's messages carry
   a fixed field. */
#define WEFT_ENGINE_MEM_PACKED 64
/* Tags a runtime may register: 0 .. WEFT_ENGINE_MAX_TAGS - 1. */
#define WEFT_ENGINE_MAX_TAGS 64

/* An active message arrived on `tag` from `src`. `msg` is valid until the callback
   returns. The return value is ignored (PaRSEC's shape). */
typedef int (*weft_engine_am_fn)(weft_engine_t engine, weft_engine_tag_t tag, void* msg,
                                 size_t size, int src, void* cb_data);
/* A put or get finished at its initiator: the local region's bytes may be reused (put) or
   hold the data (get). `remote` is the peer. */
typedef int (*weft_engine_onesided_fn)(weft_engine_t engine, weft_engine_mem_t lreg,
                                       ptrdiff_t ldispl, const void* rreg, ptrdiff_t rdispl,
                                       size_t size, int remote, void* cb_data);
/* An operation failed for good (a dead peer, a refused region): `rank` is the peer and
   `what` says which operation and why. Without a handler, weft_engine_progress returns
   WEFT_ERR_INTERNAL with the same text in weft_last_error(). */
typedef void (*weft_engine_error_fn)(weft_engine_t engine, int rank, const char* what, void* data);

/* Attributes, set by weft_engine_attr_init from the WEFT_ENGINE_* settings
   (docs/configuration.md), then changed field by field. */
typedef struct {
  int progress_thread; /* 1: a thread that only calls Weft's progress (Weft engine) */
  int comm_thread;     /* 1: a thread that runs callbacks and starts deferred posts;
                          for both, negative: auto, 1 unless the machine is oversubscribed
                          (as below), decided by the allocation (get_attr reads 0 or 1) */
  int progress_cpu;    /* the progress thread's CPU, -1: not pinned */
  int comm_cpu;        /* the communication thread's CPU, -1: not pinned */
  size_t am_batch;     /* AM callbacks per round before all bulk completions (seed: 5) */
  size_t put_eager;    /* puts of at most this many bytes travel in one active message */
  size_t queue_depth;  /* entries of each completion FIFO (AM, bulk) */
  size_t deferred;     /* posts that may wait for resources; past it, WEFT_RETRY */
  size_t max_am;       /* largest active message a tag may register (its max length) */
  int peers_progress;  /* 1: every rank keeps its engine progressing; the Weft engine's
                          device then has peers_progress (weft::alloc_device_x) */
  int oversubscribed;  /* reported by weft_engine_get_attr, ignored by alloc: 1 when this
                          machine runs more ranks of the job than it has CPUs online (the
                          rule of WEFT_YIELD, which also forces it on or off) */
} weft_engine_attr_t;

/* A bad WEFT_ENGINE_* setting leaves the defaults, with a warning on stderr and the message
   in weft_last_error(); an allocation given NULL attributes refuses it (WEFT_ERR_USAGE). */
WEFT_C_API void weft_engine_attr_init(weft_engine_attr_t* attr);
/* The attributes `engine` runs with (those of an engine that does not have a thread are 0:
   the MPI engine has no progress thread). A runtime reads progress_thread and comm_thread
   to learn whether its own threads must call weft_engine_progress, and oversubscribed to
   learn whether its idle threads may keep a core (yield) or must give it up (sleep). */
WEFT_C_API int weft_engine_get_attr(weft_engine_t engine, weft_engine_attr_t* attr);

/* A Weft engine on the global runtime (weft_g_runtime_init first), with a device of its
   own. `attr` NULL: the defaults. */
WEFT_C_API int weft_engine_alloc(const weft_engine_attr_t* attr, weft_engine_t* engine);
/* Stops the engine's threads and frees it; *engine becomes NULL. WEFT_ERR_USAGE while
   operations are in flight (progress until none is) or regions are registered. */
WEFT_C_API int weft_engine_free(weft_engine_t* engine);
/* "weft", "mpi" or "mpi-cont" (the MPI engine finding completions through continuations). */
WEFT_C_API const char* weft_engine_name(weft_engine_t engine);
WEFT_C_API int weft_engine_rank_me(weft_engine_t engine);
WEFT_C_API int weft_engine_rank_n(weft_engine_t engine);
WEFT_C_API void weft_engine_set_error_handler(weft_engine_t engine, weft_engine_error_fn fn,
                                              void* data);

/* Registers `fn` for active messages on `tag`, each at most `max_len` bytes. Every rank
   registers the same tags before any is sent to it. */
WEFT_C_API int weft_engine_register_tag(weft_engine_t engine, weft_engine_tag_t tag,
                                        weft_engine_am_fn fn, void* cb_data, size_t max_len);
WEFT_C_API int weft_engine_deregister_tag(weft_engine_t engine, weft_engine_tag_t tag);
/* Sends `size` bytes to `tag` at `rank`. WEFT_DONE: sent (the buffer may be reused);
   WEFT_POSTED: copied and deferred, sent in order later; WEFT_RETRY: the deferred queue is
   full. A size past the tag's max_len is refused (WEFT_ERR_USAGE). */
WEFT_C_API int weft_engine_post_am(weft_engine_t engine, weft_engine_tag_t tag, int rank,
                                   const void* buf, size_t size);

WEFT_C_API int weft_engine_register_memory(weft_engine_t engine, void* base, size_t size,
                                           weft_engine_mem_t* mem);
WEFT_C_API int weft_engine_deregister_memory(weft_engine_t engine, weft_engine_mem_t* mem);
/* Allocates `size` zeroed bytes and registers them: *base the memory, *mem the region. The
   memory suits the engine's puts best: the Weft engine's comes from alloc_memory (peers on
   this host put into it with one memcpy, docs/shm.md), the MPI engine's is on huge pages
   where the system allows. Give it back with weft_engine_free_memory. */
WEFT_C_API int weft_engine_alloc_memory(weft_engine_t engine, size_t size, void** base,
                                        weft_engine_mem_t* mem);
/* Deregisters and frees a region of weft_engine_alloc_memory; empties *mem. */
WEFT_C_API int weft_engine_free_memory(weft_engine_t engine, weft_engine_mem_t* mem);
/* Writes WEFT_ENGINE_MEM_PACKED bytes at `out` that name the region to peers. */
WEFT_C_API int weft_engine_pack_memory(weft_engine_t engine, weft_engine_mem_t mem, void* out);
/* The base and size of a local region. */
WEFT_C_API int weft_engine_memory_info(weft_engine_t engine, weft_engine_mem_t mem, void** base,
                                       size_t* size);

/* Writes `size` bytes at `ldispl` of `lreg` to `rdispl` of the peer's region `rreg` (packed
   by that peer). When the data is at the target, the target runs the callback of its tag
   `r_tag` with the `r_size` bytes at `r_data` as the message (r_tag WEFT_ENGINE_NO_TAG: no
   remote callback); `l_fn` runs at the initiator when the local bytes may be reused (for a
   put of at most put_eager bytes: before this call returns). WEFT_POSTED or WEFT_RETRY. */
#define WEFT_ENGINE_NO_TAG UINT32_MAX
WEFT_C_API int weft_engine_post_put(weft_engine_t engine, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                                    const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                                    weft_engine_onesided_fn l_fn, void* l_data,
                                    weft_engine_tag_t r_tag, const void* r_data, size_t r_size);
/* Reads `size` bytes at `rdispl` of the peer's region into `ldispl` of `lreg`; `l_fn` runs
   when they are there, and the peer runs `r_tag`'s callback with `r_data` once its bytes
   were read. */
WEFT_C_API int weft_engine_post_get(weft_engine_t engine, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                                    const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                                    weft_engine_onesided_fn l_fn, void* l_data,
                                    weft_engine_tag_t r_tag, const void* r_data, size_t r_size);

/* Drives the engine: progress (when no progress thread runs), callbacks (when no
   communication thread runs: up to am_batch AM callbacks, then every bulk completion, and
   again while any ran), deferred posts. Returns the callbacks run (>= 0) or a negative
   code. With a communication thread it only reports errors and returns 0. */
WEFT_C_API int weft_engine_progress(weft_engine_t engine);
/* weft_engine_progress that, finding nothing to do, first sleeps until a message arrives
   for the engine or `timeout_us` passes, then drives the engine again. Only an engine
   that can be woken by the network sleeps: the Weft engine without its threads (on its
   device's wait object, as Weft's blocking progress); the MPI engine, or an engine whose
   threads drive it, just progresses. Work that rings no bell (a post made by another
   thread meanwhile) waits for the timeout. For a runtime thread with nothing else to do on
   an oversubscribed machine (weft_engine_get_attr), where yielding in a loop would take
   the core from the workers. */
WEFT_C_API int weft_engine_progress_wait(weft_engine_t engine, uint32_t timeout_us);
/* While on (1), the engine's progress looks at every peer every 50 ms and reports each
   one that died through the error handler (or, without one, weft_engine_progress's
   WEFT_ERR_INTERNAL naming it), once per peer, even when no operation waits on it: for a
   runtime that waits for its peers' messages by a protocol of its own (a task waiting for
   a peer's ACTIVATE), which otherwise waits forever. A peer that exits on purpose is
   reported too: turn it off (0, the default) before peers may leave. The Weft engine
   watches; the MPI engine cannot (a stock MPI ends the job when a rank dies) and returns
   WEFT_ERR_USAGE saying so. */
WEFT_C_API int weft_engine_watch_peers(weft_engine_t engine, int on);
/* Starts (enable) or stops and joins (disable) the engine's threads; a disabled engine
   still works through weft_engine_progress. A new engine is enabled. */
WEFT_C_API int weft_engine_enable(weft_engine_t engine);
WEFT_C_API int weft_engine_disable(weft_engine_t engine);
/* 1 when a post now would not be refused with WEFT_RETRY, else 0. */
WEFT_C_API int weft_engine_can_serve(weft_engine_t engine);

/* Counters of an engine, for benchmarks and tests. */
typedef struct {
  uint64_t am_sent, am_received, puts, gets, puts_eager, deferred, callbacks, errors;
  /* Weft engine: remote callbacks too long for their put's or get's notification (over 5
     bytes), sent ahead in a message of their own. */
  uint64_t announces;
} weft_engine_stats_t;
WEFT_C_API int weft_engine_get_stats(weft_engine_t engine, weft_engine_stats_t* stats);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_ENGINE_H */
