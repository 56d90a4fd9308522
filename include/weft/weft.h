/* SPDX-License-Identifier: BSD-3-Clause */
/* Weft C API: the whole of the C++ interface (weft/weft.hpp) for C99 programs.
 *
 * Conventions
 *  - Handles are opaque pointers; NULL is the empty handle and means "the default"
 *    wherever an optional runtime, device, matching engine or packet pool is taken.
 *  - Every call that can fail returns an int: WEFT_OK (0), or a negative code when the call
 *    itself was refused (a bad argument, a call in the wrong state, a call after finalize).
 *    weft_strerror(code) names the code and weft_last_error() gives the full message of the
 *    last refusal on this thread: "weft: <call>: <argument> = <value>: <reason>". A refused
 *    call changes nothing.
 *  - Operations report how they went in a weft_status_t: its errorcode is WEFT_DONE
 *    (finished now), WEFT_POSTED (the completion object will be signalled), WEFT_RETRY*
 *    (post again later) or an error code, exactly as status_t in C++ (docs/api.md).
 *  - Optional arguments are structs filled by their *_init() function (which sets every
 *    default), then changed field by field and passed to the *_x call; NULL means defaults.
 *
 *    weft_g_runtime_init();
 *    weft_comp_t cq; weft_alloc_cq(&cq);
 *    weft_rcomp_t rc; weft_register_rcomp(cq, &rc);
 *    weft_status_t st;
 *    weft_post_am(peer, buf, len, NULL, rc, &st);   // NULL local completion: none wanted
 *    do { weft_progress(); weft_cq_pop(cq, &st); } while (st.errorcode == WEFT_RETRY);
 *    free(st.buf);
 *    weft_free_comp(&cq);
 *    weft_g_runtime_fina();
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_C_API __attribute__((visibility("default")))
#else
#define WEFT_C_API
#endif

/* ---- return codes of the calls ------------------------------------------------------ */
#define WEFT_OK 0
#define WEFT_ERR_USAGE (-1)    /* a bad argument or state; see weft_last_error() */
#define WEFT_ERR_NOMEM (-2)    /* memory ran out inside the call */
#define WEFT_ERR_INTERNAL (-3) /* anything else; see weft_last_error() */

/* ---- status error codes (the ranges give the category, as in C++) ------------------- */
typedef enum {
  WEFT_DONE = 0,         /* finished; the status carries the completion data */
  WEFT_DONE_BACKLOG = 1, /* a backlogged operation finished (completion objects only) */
  WEFT_POSTED = 16,      /* posted; the completion object will be signalled */
  WEFT_POSTED_BACKLOG = 17,
  WEFT_RETRY = 32, /* a temporary shortage: post again later */
  WEFT_RETRY_LOCK = 33,
  WEFT_RETRY_NOPACKET = 34,
  WEFT_RETRY_NOMEM = 35,
  WEFT_RETRY_BACKLOG = 36, /* the device's backlog is at its bound: progress first */
  WEFT_CANCELLED = 48,
  WEFT_ERROR = 64,
  WEFT_ERROR_TRUNCATED = 65,
  WEFT_ERROR_PEER_DEAD = 66,
  WEFT_ERROR_NOMEM = 67,
  WEFT_ERROR_REGION = 68
} weft_errorcode_t;

#define WEFT_IS_DONE(code) ((code) >= 0 && (code) < WEFT_POSTED)
#define WEFT_IS_POSTED(code) ((code) >= WEFT_POSTED && (code) < WEFT_RETRY)
#define WEFT_IS_RETRY(code) ((code) >= WEFT_RETRY && (code) < WEFT_CANCELLED)
#define WEFT_IS_ERROR(code) ((code) >= WEFT_ERROR)

/* The name of a call return code (negative) or of a status error code. */
WEFT_C_API const char* weft_strerror(int code);
/* The message of the last refused call on this thread ("" if none). */
WEFT_C_API const char* weft_last_error(void);
/* The library's version, "MAJOR.MINOR.PATCH". */
WEFT_C_API const char* weft_get_version(void);

/* ---- handles and value types ---------------------------------------------------------- */
typedef struct weft_runtime_s* weft_runtime_t;
typedef struct weft_device_s* weft_device_t;
typedef struct weft_comp_s* weft_comp_t; /* cq, synchronizer, handler or graph */
typedef struct weft_matching_engine_s* weft_matching_engine_t;
typedef struct weft_packet_pool_s* weft_packet_pool_t;
typedef struct weft_mr_s* weft_mr_t;
typedef struct weft_graph_node_s* weft_graph_node_t;
typedef uint32_t weft_rcomp_t;
#define WEFT_RCOMP_NULL UINT32_MAX
#define WEFT_MAX_BUFFERS 64

typedef struct {
  int errorcode; /* weft_errorcode_t */
  int rank;
  uint64_t tag;
  void* buf;
  size_t size;
  void* user_context;
} weft_status_t;

typedef struct {
  uint64_t base, size, key, generation;
} weft_rmr_t;

typedef struct {
  void* base;
  size_t size;
} weft_buffer_t;

typedef struct {
  weft_rmr_t rmr;
  uint64_t disp;
  size_t size;
} weft_rbuffer_t;

typedef enum { WEFT_OUT = 0, WEFT_IN = 1 } weft_direction_t;
typedef enum {
  WEFT_MATCH_NONE = 0,
  WEFT_MATCH_RANK_ONLY = 1,
  WEFT_MATCH_TAG_ONLY = 2,
  WEFT_MATCH_RANK_TAG = 3
} weft_matching_policy_t;

/* ---- runtime --------------------------------------------------------------------------- */
/* One field per runtime attribute (the WEFT_ATTR rows of weft/settings.def: packet_size,
   npackets, ...; docs/configuration.md gives each one's meaning, default and range). Sizes
   are size_t, flags int. A field left WEFT_UNSET_SIZE (a size) or WEFT_UNSET_FLAG (a flag)
   takes its WEFT_* environment variable, else its default. */
#define WEFT_C_TYPE_size size_t
#define WEFT_C_TYPE_flag int
#define WEFT_UNSET_SIZE SIZE_MAX
#define WEFT_UNSET_FLAG (-1)
typedef struct {
#define WEFT_ATTR(type, name, ...) WEFT_C_TYPE_##type name;
#include "weft/settings.def"
} weft_runtime_opts_t;
/* Sets every field of *opts to unset. Call it before setting the fields you choose. */
WEFT_C_API void weft_runtime_opts_init(weft_runtime_opts_t* opts);

/* Sets up the global runtime with every attribute from the environment or its default;
   collective. WEFT_ERR_USAGE when one is active, a setting is bad or differs between ranks. */
WEFT_C_API int weft_g_runtime_init(void);
/* The same with attributes from *opts (NULL: none set). */
WEFT_C_API int weft_g_runtime_init_x(const weft_runtime_opts_t* opts);
/* Frees the global runtime and everything allocated from it; collective. */
WEFT_C_API int weft_g_runtime_fina(void);
/* The global runtime; NULL when none is active. */
WEFT_C_API weft_runtime_t weft_get_g_runtime(void);
/* An extra runtime with attributes from *opts (NULL: none set) in *runtime; collective,
   in the same order on every rank. */
WEFT_C_API int weft_alloc_runtime(const weft_runtime_opts_t* opts, weft_runtime_t* runtime);
/* Frees a runtime from weft_alloc_runtime and sets *runtime to NULL; collective. */
WEFT_C_API int weft_free_runtime(weft_runtime_t* runtime);
/* The attributes fixed at allocation (the environment defaults resolved). */
WEFT_C_API int weft_runtime_get_attr(weft_runtime_t runtime, weft_runtime_opts_t* attr);

/* This process's rank in the global runtime (-1 when there is none). */
WEFT_C_API int weft_get_rank_me(void);
/* The number of ranks of the global runtime (-1 when there is none). */
WEFT_C_API int weft_get_rank_n(void);
/* This process's rank among those on its host (-1 when there is no runtime). */
WEFT_C_API int weft_get_rank_local(void);
/* The number of processes on this host (-1 when there is no runtime). */
WEFT_C_API int weft_get_rank_local_n(void);
/* This process's rank in `runtime` (-1 for a bad handle). */
WEFT_C_API int weft_get_rank_me_x(weft_runtime_t runtime);
/* The number of ranks of `runtime` (-1 for a bad handle). */
WEFT_C_API int weft_get_rank_n_x(weft_runtime_t runtime);

typedef void (*weft_allgather_fn_t)(const void* send, void* recv, size_t len, void* arg);
/* The program's own collectives (an MPI communicator, say) as Weft's bootstrap; call before
 * weft_g_runtime_init. allgather gathers len bytes from every rank into recv (size * len
 * bytes, rank order); local_rank -1 and local_size 0 let Weft work out the ranks on this host.
 * With MPI:
 *   static void gather(const void* s, void* r, size_t len, void* comm) {
 *     MPI_Allgather(s, (int)len, MPI_BYTE, r, (int)len, MPI_BYTE, *(MPI_Comm*)comm);
 *   }
 *   weft_set_bootstrap(rank, size, -1, 0, gather, &comm); */
WEFT_C_API int weft_set_bootstrap(int rank, int size, int local_rank, int local_size,
                                  weft_allgather_fn_t allgather, void* arg);

typedef void (*weft_error_handler_fn_t)(int rank_me, int peer, const char* what);
/* Errors found at a target with nothing to signal (a malformed message...). One handler for
 * the whole process; NULL restores the default (log and drop). */
WEFT_C_API int weft_set_error_handler(weft_error_handler_fn_t fn, weft_runtime_t runtime);

/* ---- resources ------------------------------------------------------------------------- */
WEFT_C_API int weft_alloc_device(weft_device_t* device);
/* A device of `runtime` drawing packets from `pool` (NULL: the runtime's), with
   inbox_depth messages per lane (0: the runtime's attribute). */
WEFT_C_API int weft_alloc_device_x(weft_runtime_t runtime, weft_packet_pool_t pool,
                                   size_t inbox_depth, weft_device_t* device);
/* Every named argument of weft::alloc_device_x, for weft_alloc_device_attr. */
typedef struct weft_device_attr_t {
  weft_runtime_t runtime;         /* NULL: the global runtime */
  weft_packet_pool_t packet_pool; /* NULL: the runtime's */
  size_t inbox_depth;             /* 0: the runtime's attribute */
  int peers_progress;             /* 1: every rank progresses this device continuously, so
                                     its puts may take a mechanism that needs the target's
                                     CPU when it measures faster (docs/api.md) */
  int shared;                     /* 1: many threads post on and progress it at once, as on
                                     the default device; a backend may spread it wider */
} weft_device_attr_t;
/* The defaults: NULL, NULL, 0, 0, 0. */
WEFT_C_API void weft_device_attr_init(weft_device_attr_t* attr);
/* A device with the options of `attr` (NULL: the defaults). */
WEFT_C_API int weft_alloc_device_attr(const weft_device_attr_t* attr, weft_device_t* device);
/* Frees a device and sets *device to NULL; WEFT_ERR_USAGE while operations on it are
   pending. */
WEFT_C_API int weft_free_device(weft_device_t* device);
/* The runtime's own device (runtime NULL: the global one); NULL on error. */
WEFT_C_API weft_device_t weft_get_default_device(weft_runtime_t runtime);
/* The device's index (0 for the default device); -1 for a bad handle. */
WEFT_C_API int weft_device_get_attr_index(weft_device_t device);
/* 1 when it was allocated with peers_progress, else 0. */
WEFT_C_API int weft_device_get_attr_peers_progress(weft_device_t device);
/* 1 when it is shared (weft_device_attr_t.shared, or the default device), else 0. */
WEFT_C_API int weft_device_get_attr_shared(weft_device_t device);
/* Messages each lane of the device's inbox holds; 0 for a bad handle. */
WEFT_C_API size_t weft_device_get_attr_inbox_depth(weft_device_t device);
/* A device's performance counters: one per row of weft/counters.def. */
typedef enum {
#define WEFT_COUNTER(name, NAME, doc) WEFT_COUNTER_##NAME,
#include "weft/counters.def"
  WEFT_COUNTER_COUNT
} weft_counter_t;
/* Stores counter `counter` of `device` (NULL: the global runtime's default device), summed
   over the threads that used it, in *value. WEFT_ERR_USAGE for an unknown counter or a
   freed device. */
WEFT_C_API int weft_device_get_counter(weft_device_t device, weft_counter_t counter,
                                       uint64_t* value);
/* Stores in *alive whether peer `rank` is alive, asked of the transport now; a peer found
   gone ends every operation with it (WEFT_ERROR_PEER_DEAD statuses), as progress would.
   NULL: the global runtime's default device. WEFT_ERR_USAGE for a rank out of range or a
   freed device (device_t::test_peer). */
WEFT_C_API int weft_device_test_peer(weft_device_t device, int rank, int* alive);
/* The counter's name as counters.def spells it ("sent_eager"); "" for an unknown one. */
WEFT_C_API const char* weft_counter_name(weft_counter_t counter);

/* A pool of `npackets` packets of `packet_size` bytes (0: the runtime's attributes) in
 *pool. */
WEFT_C_API int weft_alloc_packet_pool(weft_runtime_t runtime, size_t packet_size, size_t npackets,
                                      weft_packet_pool_t* pool);
/* Frees a packet pool and sets *pool to NULL; WEFT_ERR_USAGE while a device uses it. */
WEFT_C_API int weft_free_packet_pool(weft_packet_pool_t* pool);
/* The runtime's own packet pool; NULL on error. */
WEFT_C_API weft_packet_pool_t weft_get_default_packet_pool(weft_runtime_t runtime);
/* Bytes in each packet of the pool; 0 for a bad handle. */
WEFT_C_API size_t weft_packet_pool_get_attr_packet_size(weft_packet_pool_t pool);
/* Packets in the pool; 0 for a bad handle. */
WEFT_C_API size_t weft_packet_pool_get_attr_npackets(weft_packet_pool_t pool);
/* A packet to fill and send with buffer_is_packet; *packet is NULL when the pool is empty. */
WEFT_C_API int weft_get_upacket(weft_packet_pool_t pool, void** packet);
/* Returns a packet (or frees a delivered active-message buffer that is not a packet). */
WEFT_C_API int weft_put_upacket(void* packet);

typedef uint64_t (*weft_make_key_fn_t)(int rank, uint64_t tag, uint8_t policy);
/* A matching engine of `nbuckets` buckets (0: the runtime's attribute), keys made by
   `make_key` (NULL: Weft's), in *engine; ordered like devices. */
WEFT_C_API int weft_alloc_matching_engine(weft_runtime_t runtime, size_t nbuckets,
                                          weft_make_key_fn_t make_key,
                                          weft_matching_engine_t* engine);
/* Frees a matching engine and sets *engine to NULL; WEFT_ERR_USAGE while receives are
   posted on it. */
WEFT_C_API int weft_free_matching_engine(weft_matching_engine_t* engine);
/* The runtime's own matching engine; NULL on error. */
WEFT_C_API weft_matching_engine_t weft_get_default_matching_engine(weft_runtime_t runtime);
/* Buckets of the engine; 0 for a bad handle. */
WEFT_C_API size_t weft_matching_engine_get_attr_nbuckets(weft_matching_engine_t engine);

/* ---- completion objects ---------------------------------------------------------------- */
typedef void (*weft_handler_fn_t)(weft_status_t status, void* arg);
/* A completion queue of cq_depth entries of the global runtime in *cq. */
WEFT_C_API int weft_alloc_cq(weft_comp_t* cq);
/* A completion queue of `depth` entries (0: cq_depth) of `runtime` in *cq. */
WEFT_C_API int weft_alloc_cq_x(weft_runtime_t runtime, size_t depth, weft_comp_t* cq);
/* A synchronizer ready after `threshold` signals in *sync. */
WEFT_C_API int weft_alloc_sync(size_t threshold, weft_comp_t* sync);
/* The handler runs on the thread that progresses; `arg` is passed back. */
WEFT_C_API int weft_alloc_handler(weft_handler_fn_t fn, void* arg, weft_comp_t* handler);
typedef struct {
  int (*signal)(weft_status_t status, void* ctx);
  void* ctx;
} weft_comp_ops_t;
/* A completion object of the program's own kind: `signal` runs on the signalling thread
   (inside progress or a post) with each status and ctx, must not block, and returns 1 when
   it took the status or 0 when it cannot now (Weft signals again later, from the backlog).
   The table is copied. */
WEFT_C_API int weft_alloc_custom_comp(const weft_comp_ops_t* ops, weft_comp_t* comp);
/* Frees a completion object and sets *comp to NULL; WEFT_ERR_USAGE while operations that
   will signal it are pending. */
WEFT_C_API int weft_free_comp(weft_comp_t* comp);
/* Collective and ordered: the same sequence on every rank gives the same handles. */
WEFT_C_API int weft_register_rcomp(weft_comp_t comp, weft_rcomp_t* rcomp);
/* delivery: where arriving active messages reach the program. */
#define WEFT_DELIVERY_MALLOC 0 /* a malloc'd buffer (or the allocator's), the program's to free */
#define WEFT_DELIVERY_PACKET 1 /* a packet when the message fits in one (put_upacket it) */
#define WEFT_DELIVERY_IN_PLACE                               \
  2 /* lent to a handler where it arrived, until the handler \
       returns (comp from weft_alloc_handler; not freed) */
WEFT_C_API int weft_register_rcomp_x(weft_comp_t comp, weft_runtime_t runtime, int delivery,
                                     weft_rcomp_t* rcomp);
/* Where arriving active messages' buffers come from (docs/api.md, "For runtime authors"):
   allocate returns size bytes or NULL; deallocate takes back a buffer Weft could not
   deliver; both get ctx. allocate NULL: malloc and free. */
typedef struct {
  void* (*allocate)(size_t size, void* ctx);
  void (*deallocate)(void* buf, void* ctx);
  void* ctx;
} weft_allocator_t;
/* The allocator for every remote completion `runtime` (NULL: the global one) registers from
   now on without its own; NULL restores malloc. WEFT_ERR_USAGE when only one function is
   given. */
WEFT_C_API int weft_set_allocator(weft_runtime_t runtime, const weft_allocator_t* allocator);
/* weft_register_rcomp_x with the allocator of this handle's arriving messages (NULL: the
   runtime's). */
WEFT_C_API int weft_register_rcomp_allocator(weft_comp_t comp, weft_runtime_t runtime, int delivery,
                                             const weft_allocator_t* allocator,
                                             weft_rcomp_t* rcomp);
/* Withdraws a remote completion handle; messages naming it later are refused. Either order
   works: weft_free_comp releases every handle to the object, and deregistering a handle
   already released does nothing; only a handle the runtime never gave out is refused. */
WEFT_C_API int weft_deregister_rcomp(weft_rcomp_t rcomp, weft_runtime_t runtime);
/* status->errorcode is WEFT_RETRY when the queue is empty. */
WEFT_C_API int weft_cq_pop(weft_comp_t cq, weft_status_t* status);
/* The number of entries waiting in the queue, in *size. */
WEFT_C_API int weft_cq_size(weft_comp_t cq, size_t* size);
/* *ready = 1 once the synchronizer got its threshold of signals; statuses (threshold
 * entries, or NULL) receives them and the synchronizer resets. */
WEFT_C_API int weft_sync_test(weft_comp_t sync, weft_status_t* statuses, int* ready);
/* Progresses the global runtime until the synchronizer is ready; statuses as
   weft_sync_test. */
WEFT_C_API int weft_sync_wait(weft_comp_t sync, weft_status_t* statuses);
/* The same, progressing `device` of `runtime` (NULL: defaults). */
WEFT_C_API int weft_sync_wait_x(weft_comp_t sync, weft_status_t* statuses, weft_runtime_t runtime,
                                weft_device_t device);
/* WEFT_OK, or WEFT_RETRY_NOMEM when the object cannot take it now (a full queue): signal
 * again later; it never waits. */
WEFT_C_API int weft_comp_signal(weft_comp_t comp, weft_status_t status);

/* ---- continuations (weft/cont.hpp; docs/continuations.md) ------------------------------ */
/* A continuation's body: its operations' statuses in completion order (the array given to
 * weft_alloc_cont, or NULL), their number, and the user data. */
typedef void (*weft_cont_fn_t)(weft_status_t* statuses, size_t count, void* user_data);
/* A continuation request's options, the seed's info keys: see weft::alloc_cont_request_x. */
typedef struct weft_cont_request_attr_t {
  int poll_only;         /* mpi_continue_poll_only */
  int enqueue_complete;  /* mpi_continue_enqueue_complete */
  int64_t max_poll;      /* mpi_continue_max_poll; -1: unlimited */
  int thread_any;        /* mpi_continue_thread: 0 application, 1 any */
  int async_signal_safe; /* mpi_continue_async_signal_safe (a hint; changes nothing) */
} weft_cont_request_attr_t;
/* The defaults: every flag 0, max_poll -1. */
WEFT_C_API void weft_cont_request_attr_init(weft_cont_request_attr_t* attr);
/* A continuation request in the global runtime; attr NULL: the defaults. Free it with
 * weft_free_comp (released once its active continuations have run). */
WEFT_C_API int weft_alloc_cont_request(const weft_cont_request_attr_t* attr, weft_comp_t* request);
/* A continuation of `request`: pass it as the local completion of the posts it covers, then
 * arm it. statuses: capacity entries for their statuses (NULL, 0: none kept). */
WEFT_C_API int weft_alloc_cont(weft_comp_t request, weft_cont_fn_t fn, void* user_data,
                               weft_status_t* statuses, size_t capacity, weft_comp_t* cont);
/* Arms a continuation with the number of its posts that returned WEFT_POSTED; *flag = 1 when
 * they have all completed already (the callback will not run; the seed's flag), else 0. */
WEFT_C_API int weft_arm_cont(weft_comp_t cont, size_t nposted, int* flag);
/* Progresses, runs ready continuations (up to max_poll); *flag = 1 when none is left active. */
WEFT_C_API int weft_cont_request_test(weft_comp_t request, int* flag);
/* Tests until none is left active. */
WEFT_C_API int weft_cont_request_wait(weft_comp_t request);
/* Signals `comp` once when `request` has no active continuation; *flag = 1 when it has none
 * now (nothing will be signalled). */
WEFT_C_API int weft_watch_cont_request(weft_comp_t request, weft_comp_t comp, int* flag);

/* ---- memory registration ---------------------------------------------------------------- */
WEFT_C_API int weft_register_memory(void* base, size_t size, weft_mr_t* mr);
/* The same in `runtime` (NULL: the global one). */
WEFT_C_API int weft_register_memory_x(void* base, size_t size, weft_runtime_t runtime,
                                      weft_mr_t* mr);
/* Deregisters and sets *mr to NULL: waits for accesses in progress (progressing
   meanwhile); every handle to the region is refused from then on. */
WEFT_C_API int weft_deregister_memory(weft_mr_t* mr);
/* Allocates `size` zeroed bytes and registers them (the base: weft_mr_get_attr_base): peers
   on this host map such memory, so their puts and gets into it are one memcpy each.
   `runtime` NULL: the global one. Give it back with weft_free_memory. */
WEFT_C_API int weft_alloc_memory(size_t size, weft_runtime_t runtime, weft_mr_t* mr);
/* Deregisters an allocation of weft_alloc_memory, frees it, and sets *mr to NULL. */
WEFT_C_API int weft_free_memory(weft_mr_t* mr);
/* The remote handle of a registration in *rmr: plain data to send to peers. */
WEFT_C_API int weft_get_rmr(weft_mr_t mr, weft_rmr_t* rmr);
/* The registered region's start; NULL for a bad handle. */
WEFT_C_API void* weft_mr_get_attr_base(weft_mr_t mr);
/* The registered region's size; 0 for a bad handle. */
WEFT_C_API size_t weft_mr_get_attr_size(weft_mr_t mr);

/* ---- operations ------------------------------------------------------------------------- */
typedef struct {
  weft_runtime_t runtime;
  weft_device_t device;
  weft_matching_engine_t matching_engine;
  int matching_policy; /* weft_matching_policy_t; default WEFT_MATCH_RANK_TAG */
  uint64_t tag;
  weft_rcomp_t remote_comp; /* default WEFT_RCOMP_NULL */
  weft_packet_pool_t packet_pool;
  void* user_context;
  int allow_done, allow_posted, allow_retry; /* default 1 */
  int buffer_is_packet;
  int has_remote_buffer; /* set with remote_buffer for put and get through post_comm_x */
  weft_rmr_t remote_buffer;
  uint64_t remote_disp;
  const weft_buffer_t* buffers; /* a buffer list instead of buf/size (copied by the post) */
  size_t nbuffers;
  const weft_rbuffer_t* remote_buffers; /* put/get: a remote list instead of one region */
  size_t nremote_buffers;
} weft_comm_opts_t;
/* Sets *opts to every default: no runtime, device, engine or pool (the defaults),
   WEFT_MATCH_RANK_TAG, tag 0, no remote completion, allow_done/posted/retry 1. */
WEFT_C_API void weft_comm_opts_init(weft_comm_opts_t* opts);

/* The general operation (Table 1): direction, rank, local buffer, local completion, and
 * the optional arguments. The others are post_comm with some of them fixed. */
WEFT_C_API int weft_post_comm_x(weft_direction_t direction, int rank, void* buf, size_t size,
                                weft_comp_t comp, const weft_comm_opts_t* opts,
                                weft_status_t* status);
/* Sends `size` bytes to `rank` with `tag`, matched by a weft_post_recv there; *status:
   WEFT_DONE (eager: the buffer is free), WEFT_POSTED (comp is signalled) or a retry code. */
WEFT_C_API int weft_post_send(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                              weft_status_t* status);
/* The same with optional arguments (NULL: defaults). */
WEFT_C_API int weft_post_send_x(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                                const weft_comm_opts_t* opts, weft_status_t* status);
/* Receives a send from `rank` with `tag` into `buf` (at most `size` bytes, more is
   WEFT_ERROR_TRUNCATED); *status: WEFT_DONE, WEFT_POSTED or a retry code. */
WEFT_C_API int weft_post_recv(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                              weft_status_t* status);
/* The same with optional arguments (NULL: defaults). */
WEFT_C_API int weft_post_recv_x(int rank, void* buf, size_t size, uint64_t tag, weft_comp_t comp,
                                const weft_comm_opts_t* opts, weft_status_t* status);
/* Sends an active message: it arrives at `rank` in a buffer Weft allocates and signals
   the completion object registered there as `remote_comp`; *status as weft_post_send. */
WEFT_C_API int weft_post_am(int rank, void* buf, size_t size, weft_comp_t comp,
                            weft_rcomp_t remote_comp, weft_status_t* status);
/* The same with optional arguments (NULL: defaults). */
WEFT_C_API int weft_post_am_x(int rank, void* buf, size_t size, weft_comp_t comp,
                              weft_rcomp_t remote_comp, const weft_comm_opts_t* opts,
                              weft_status_t* status);
/* Writes `size` bytes to offset `remote_disp` of the peer's region `rmr`; *status:
   WEFT_POSTED (comp signalled when the source may be reused) or a retry code; the
   completion carries WEFT_ERROR_REGION or WEFT_ERROR_PEER_DEAD when the access failed. */
WEFT_C_API int weft_post_put(int rank, void* buf, size_t size, weft_comp_t comp,
                             uint64_t remote_disp, weft_rmr_t rmr, weft_status_t* status);
/* The same with optional arguments (NULL: defaults). */
WEFT_C_API int weft_post_put_x(int rank, void* buf, size_t size, weft_comp_t comp,
                               uint64_t remote_disp, weft_rmr_t rmr, const weft_comm_opts_t* opts,
                               weft_status_t* status);
/* Reads `size` bytes from offset `remote_disp` of the peer's region `rmr` into `buf`;
 *status as weft_post_put. */
WEFT_C_API int weft_post_get(int rank, void* buf, size_t size, weft_comp_t comp,
                             uint64_t remote_disp, weft_rmr_t rmr, weft_status_t* status);
/* The same with optional arguments (NULL: defaults). */
WEFT_C_API int weft_post_get_x(int rank, void* buf, size_t size, weft_comp_t comp,
                               uint64_t remote_disp, weft_rmr_t rmr, const weft_comm_opts_t* opts,
                               weft_status_t* status);
/* *cancelled = 1 when the receive was removed (its completion gets WEFT_CANCELLED). opts:
 * runtime, device, matching_engine, matching_policy. */
WEFT_C_API int weft_cancel_recv(int rank, void* buf, uint64_t tag, weft_comp_t comp,
                                const weft_comm_opts_t* opts, int* cancelled);

/* ---- progress and barrier ----------------------------------------------------------------- */
/* Returns WEFT_DONE when it moved anything, WEFT_RETRY when idle, or a negative code. */
WEFT_C_API int weft_progress(void);
/* block_us: when idle, sleep up to that long for a message (0: never). */
WEFT_C_API int weft_progress_x(weft_runtime_t runtime, weft_device_t device, uint32_t block_us);
/* Waits, progressing, until every rank of the global runtime has entered the barrier. */
WEFT_C_API int weft_barrier(void);
/* With comp: returns at once (status WEFT_POSTED) and signals comp when all ranks entered. */
WEFT_C_API int weft_barrier_x(weft_runtime_t runtime, weft_device_t device, weft_comp_t comp,
                              weft_status_t* status);

/* ---- completion graphs ------------------------------------------------------------------ */
/* A function node returns WEFT_DONE (finished), an error, WEFT_RETRY (called again at the
 * next test) or WEFT_POSTED (finished later with weft_graph_node_mark_complete). */
typedef weft_status_t (*weft_graph_node_fn_t)(void* value);
typedef void (*weft_graph_edge_fn_t)(weft_status_t source_status, void* source_value,
                                     void* target_value);
/* comp (may be NULL) is signalled with the graph's status each time it finishes. */
WEFT_C_API int weft_alloc_graph(weft_comp_t comp, void* user_context, weft_comp_t* graph);
/* name may be NULL ("node <i>"); it is copied. */
WEFT_C_API int weft_graph_add_node(weft_comp_t graph, weft_graph_node_fn_t fn, void* value,
                                   const char* name, weft_graph_node_t* node);
/* An operation node: the arguments of weft_post_comm_x, posted when the node starts. */
WEFT_C_API int weft_graph_add_node_comm(weft_comp_t graph, weft_direction_t direction, int rank,
                                        void* buf, size_t size, const weft_comm_opts_t* opts,
                                        const char* name, weft_graph_node_t* node);
/* `target` starts once `source` (and its other sources) finished; `fn` (may be NULL)
   runs between them with the source's status and both values. */
WEFT_C_API int weft_graph_add_edge(weft_comp_t graph, weft_graph_node_t source,
                                   weft_graph_node_t target, weft_graph_edge_fn_t fn);
/* Starts a run of the graph: its nodes without sources first. */
WEFT_C_API int weft_graph_start(weft_comp_t graph);
/* *finished = 1 once the graph finished; status: WEFT_DONE or the failing node's status. */
WEFT_C_API int weft_graph_test(weft_comp_t graph, weft_status_t* status, int* finished);
/* Progresses the global runtime until the graph finished; *status as weft_graph_test. */
WEFT_C_API int weft_graph_wait(weft_comp_t graph, weft_status_t* status);
/* The same, progressing `device` of `runtime` (NULL: defaults). */
WEFT_C_API int weft_graph_wait_x(weft_comp_t graph, weft_runtime_t runtime, weft_device_t device,
                                 weft_status_t* status);
/* Finishes a function node that returned WEFT_POSTED, with `status`. */
WEFT_C_API int weft_graph_node_mark_complete(weft_graph_node_t node, weft_status_t status);
/* The first node that failed in the last run; NULL when none did. */
WEFT_C_API weft_graph_node_t weft_graph_get_failed_node(weft_comp_t graph);
/* The node's name ("node <i>" when none was given); "" for a bad handle. */
WEFT_C_API const char* weft_graph_node_get_name(weft_graph_node_t node);
/* The node's value as given; NULL for a bad handle. */
WEFT_C_API void* weft_graph_node_get_value(weft_graph_node_t node);
/* The status of the node's last run in *status. */
WEFT_C_API int weft_graph_node_get_status(weft_graph_node_t node, weft_status_t* status);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_WEFT_H */
