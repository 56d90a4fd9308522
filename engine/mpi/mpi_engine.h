/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI engine (weft/engine_mpi.h), as PaRSEC's MPI engine is built (seed 000 section
 * 4.2): active messages are blocking MPI_Send on the tag, received by five persistent
 * receives per registered tag (MPI_ANY_SOURCE); a put or get is a handshake message
 * followed by MPI_Isend/MPI_Irecv on a tag unique to the transfer. Every request lives in
 * one array of 5 x (tags + 2 handshake tags) + 30 entries polled with MPI_Testsome, with a
 * parallel array saying what each completion means; at most 30 data transfers are in the
 * array, the others wait in FIFOs: sends not started yet (deferred), receives posted with
 * a request of their own but not polled until promoted (dynamic). Both FIFOs are bounded by
 * the engine's `deferred` attribute. */
#ifndef WEFT_ENGINE_MPI_IMPL_H
#define WEFT_ENGINE_MPI_IMPL_H

#include <pthread.h>

#include "weft/engine_mpi.h"
#include "weft/engine_ops.h"

enum {
  mpi_per_tag = 5,                        /* persistent receives per tag (seed: five) */
  mpi_max_data = 30,                      /* data transfers polled at once (seed: 30) */
  mpi_tag_put = WEFT_ENGINE_MAX_TAGS,     /* the put handshake's MPI tag */
  mpi_tag_get = WEFT_ENGINE_MAX_TAGS + 1, /* the get handshake's */
  mpi_first_data_tag = 128,
  mpi_array_max = mpi_per_tag * (WEFT_ENGINE_MAX_TAGS + 2) + mpi_max_data
};

/* A handshake: where the data goes (or comes from) at its target, and the remote callback. */
typedef struct {
  uint64_t addr, size;
  int32_t data_tag;
  uint32_t r_tag, r_size, pad;
} mpi_handshake;

/* A region as peers see it (WEFT_ENGINE_MEM_PACKED bytes). */
typedef struct {
  uint32_t magic; /* mpi_packed_magic */
  int32_t owner;
  uint64_t base, size;
  uint64_t pad[5];
} mpi_packed;
#define mpi_packed_magic 0x4d504920u /* "MPI " */

typedef struct mpi_region {
  void* base;
  size_t size;
  int allocated; /* by weft_engine_alloc_memory: freed with the region */
  struct mpi_region* next;
} mpi_region;

enum transfer_kind { put_origin, put_target, get_origin, get_target };

/* One data transfer and what its completion runs. */
typedef struct mpi_transfer {
  int kind, is_send, rank, mpi_tag;
  void* buf;
  size_t size;
  MPI_Request req; /* a dynamic receive's, until promoted */
  weft_engine_onesided_fn l_fn;
  void* l_data;
  weft_engine_mem_t lreg;
  ptrdiff_t ldispl, rdispl;
  unsigned char rreg[WEFT_ENGINE_MEM_PACKED];
  uint32_t r_tag;
  size_t r_size;
  struct mpi_transfer* next;
  char r_data[]; /* r_size bytes */
} mpi_transfer;

enum entry_kind { entry_free, entry_am, entry_handshake, entry_data };

typedef struct {
  int kind;
  uint32_t tag; /* entry_am, entry_handshake: the MPI tag */
  void* buf;    /* a persistent receive's buffer */
  size_t cap;
  mpi_transfer* t; /* entry_data */
  /* the continuation-based variant: */
  void* owner; /* the engine */
  int watched; /* a continuation is attached */
  MPI_Status st;
} mpi_entry;

typedef struct {
  mpi_transfer *head, *tail;
  size_t n;
} mpi_fifo;

typedef struct {
  struct weft_engine_s base;
  MPI_Comm comm;
  pthread_mutex_t lock; /* the arrays, the FIFOs, the regions */
  int progressing;      /* one thread runs progress at a time */
  MPI_Request reqs[mpi_array_max];
  mpi_entry ents[mpi_array_max];
  int n, ndata, reserved;
  mpi_fifo deferred, dynamic;
  int next_data_tag, tag_ub;
  mpi_region* regions;
  /* a pass's completions (under the lock): MPI_Testsome's outputs, or what continuations
   * recorded (nout of them) */
  int idx[mpi_array_max];
  MPI_Status st[mpi_array_max];
  int nout;
  MPI_Request cr; /* the continuation-based variant's continuation request */
  int free_slots[mpi_array_max], nfree;
  pthread_t comm_thread;
  int comm_running, stop;
} mpi_engine;

/* mpi_progress.c */
/* A blocking send, as the seed's engine sends its messages, that progresses the engine
   while it waits when no other thread does: two ranks sending rendezvous-sized messages to
   each other would otherwise each wait for the other's receive to be started again. */
int mpi_send_progressing(mpi_engine* m, const void* buf, size_t size, int rank, int tag);
int mpi_engine_progress(weft_engine_t e);
int mpi_engine_post_rma(weft_engine_t e, int is_get, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                        const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                        weft_engine_onesided_fn l_fn, void* l_data, weft_engine_tag_t r_tag,
                        const void* r_data, size_t r_size);
/* Under the lock: a persistent receive on `tag` into a new entry; WEFT_OK or an error. */
int mpi_add_receive(mpi_engine* m, int kind, uint32_t tag, size_t cap);
/* Under the lock: cancels and removes every persistent receive on `tag`. */
void mpi_remove_receives(mpi_engine* m, uint32_t tag);

/* How completions are found (mpi_testsome.c or mpi_cont.c; everything under the lock):
 * a free entry (-1: the array is full); an entry whose request was just started, to be
 * watched; an entry no longer used; a persistent receive cancelled and complete; the
 * completions found now (indices in m->idx, statuses in m->st); after a pass. */
int mpi_slot_new(mpi_engine* m);
void mpi_slot_watch(mpi_engine* m, int i);
void mpi_slot_free(mpi_engine* m, int i);
void mpi_slot_cancel(mpi_engine* m, int i);
int mpi_collect(mpi_engine* m);
void mpi_slots_settle(mpi_engine* m);
int mpi_slots_init(mpi_engine* m);
void mpi_slots_fini(mpi_engine* m);

#endif
