/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI engine's request array and its progress (seed 000 sections 4.2.2-4.2.3): puts and
 * gets as handshake + MPI_Isend/MPI_Irecv, the completions of a pass (mpi_collect: the
 * whole array's MPI_Testsome in mpi_testsome.c, continuations in mpi_cont.c), callbacks
 * from the parallel array, then deferred sends started and dynamic receives promoted in
 * FIFO order while there is room. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mpi/mpi_engine.h"

static void push(mpi_fifo* q, mpi_transfer* t) {
  t->next = NULL;
  if (q->tail)
    q->tail->next = t;
  else
    q->head = t;
  q->tail = t;
  ++q->n;
}

static mpi_transfer* pop(mpi_fifo* q) {
  mpi_transfer* t = q->head;
  if (!t) return NULL;
  q->head = t->next;
  if (!q->head) q->tail = NULL;
  --q->n;
  return t;
}

int mpi_add_receive(mpi_engine* m, int kind, uint32_t tag, size_t cap) {
  const int i = mpi_slot_new(m);
  if (i < 0)
    return weft_engine_fail("weft_engine_register_tag", "tag", "?", "the request array is full");
  void* buf = malloc(cap ? cap : 1);
  MPI_Request* r = &m->reqs[i];
  if (!buf ||
      MPI_Recv_init(buf, (int)cap, MPI_BYTE, MPI_ANY_SOURCE, (int)tag, m->comm, r) != MPI_SUCCESS ||
      MPI_Start(r) != MPI_SUCCESS) {
    free(buf);
    mpi_slot_free(m, i);
    return buf ? weft_engine_fail("weft_engine_register_tag", "tag", "?", "MPI_Recv_init failed")
               : WEFT_ERR_NOMEM;
  }
  mpi_entry* e = &m->ents[i];
  e->kind = kind;
  e->tag = tag;
  e->buf = buf;
  e->cap = cap;
  e->t = NULL;
  mpi_slot_watch(m, i);
  return WEFT_OK;
}

void mpi_remove_receives(mpi_engine* m, uint32_t tag) {
  for (int i = 0; i < m->n; ++i) {
    mpi_entry* e = &m->ents[i];
    if ((e->kind != entry_am && e->kind != entry_handshake) || e->tag != tag) continue;
    mpi_slot_cancel(m, i);
    MPI_Request_free(&m->reqs[i]);
    free(e->buf);
    mpi_slot_free(m, i);
  }
  mpi_slots_settle(m);
}

/* Under the lock: a transfer into the array (started now) or its FIFO. */
static void place(mpi_engine* m, mpi_transfer* t) {
  if (m->ndata < mpi_max_data) { /* the array has room for mpi_max_data transfers */
    const int i = mpi_slot_new(m);
    MPI_Request* r = &m->reqs[i];
    if (t->is_send)
      MPI_Isend(t->buf, (int)t->size, MPI_BYTE, t->rank, t->mpi_tag, m->comm, r);
    else
      MPI_Irecv(t->buf, (int)t->size, MPI_BYTE, t->rank, t->mpi_tag, m->comm, r);
    mpi_entry* e = &m->ents[i];
    e->kind = entry_data;
    e->t = t;
    ++m->ndata;
    mpi_slot_watch(m, i);
  } else if (t->is_send) {
    push(&m->deferred, t); /* not started: no bandwidth split over too many */
    __atomic_fetch_add(&m->base.stats.deferred, 1, __ATOMIC_RELAXED);
  } else { /* posted with a request of its own, polled once promoted */
    MPI_Irecv(t->buf, (int)t->size, MPI_BYTE, t->rank, t->mpi_tag, m->comm, &t->req);
    push(&m->dynamic, t);
  }
}

/* Under the lock: promotes dynamic receives and starts deferred sends while there is room. */
static int start_waiting(mpi_engine* m) {
  int n = 0;
  while (m->ndata < mpi_max_data && (m->dynamic.n || m->deferred.n)) {
    mpi_transfer* t = m->dynamic.n ? pop(&m->dynamic) : NULL;
    if (t) {
      const int i = mpi_slot_new(m);
      m->reqs[i] = t->req;
      mpi_entry* e = &m->ents[i];
      e->kind = entry_data;
      e->t = t;
      ++m->ndata;
      mpi_slot_watch(m, i);
    } else {
      place(m, pop(&m->deferred));
    }
    ++n;
  }
  return n;
}

static mpi_transfer* new_transfer(int kind, int is_send, int rank, void* buf, size_t size,
                                  int mpi_tag, uint32_t r_tag, const void* r_data, size_t r_size) {
  mpi_transfer* t = calloc(1, sizeof(*t) + r_size);
  if (!t) return NULL;
  t->kind = kind;
  t->is_send = is_send;
  t->rank = rank;
  t->buf = buf;
  t->size = size;
  t->mpi_tag = mpi_tag;
  t->r_tag = r_tag;
  t->r_size = r_size;
  if (r_size) memcpy(t->r_data, r_data, r_size);
  return t;
}

int mpi_engine_post_rma(weft_engine_t e, int is_get, weft_engine_mem_t lreg, ptrdiff_t ldispl,
                        const void* rreg, ptrdiff_t rdispl, size_t size, int rank,
                        weft_engine_onesided_fn l_fn, void* l_data, weft_engine_tag_t r_tag,
                        const void* r_data, size_t r_size) {
  const char* call = is_get ? "weft_engine_post_get" : "weft_engine_post_put";
  mpi_engine* m = (mpi_engine*)e;
  mpi_packed rr;
  memcpy(&rr, rreg, sizeof(rr));
  if (rr.magic != mpi_packed_magic)
    return weft_engine_fail(call, "rreg", "?", "not a region packed by an MPI engine");
  if (rr.owner != rank)
    return weft_engine_fail(call, "rreg", "?", "the region belongs to another rank");
  if ((size_t)rdispl > rr.size || size > rr.size - (size_t)rdispl) {
    char value[32], why[128];
    snprintf(value, sizeof(value), "%td", rdispl);
    snprintf(why, sizeof(why),
             "an access of %zu bytes there overruns the remote region of %llu bytes", size,
             (unsigned long long)rr.size);
    return weft_engine_fail(call, "rdispl", value, why);
  }
  if (size > (size_t)INT32_MAX)
    return weft_engine_fail(call, "size", "over 2^31", "MPI counts are int");
  pthread_mutex_lock(&m->lock);
  if (m->ndata >= mpi_max_data &&
      m->deferred.n + m->dynamic.n + (size_t)m->reserved >= e->attr.deferred) {
    pthread_mutex_unlock(&m->lock);
    return WEFT_RETRY;
  }
  ++m->reserved;
  const int data_tag = m->next_data_tag;
  m->next_data_tag = data_tag == m->tag_ub ? mpi_first_data_tag : data_tag + 1;
  pthread_mutex_unlock(&m->lock);

  const mpi_region* l = (const mpi_region*)lreg;
  mpi_transfer* t = new_transfer(is_get ? get_origin : put_origin, !is_get, rank,
                                 (char*)l->base + ldispl, size, data_tag, 0, NULL, 0);
  if (!t) return WEFT_ERR_NOMEM;
  t->l_fn = l_fn;
  t->l_data = l_data;
  t->lreg = lreg;
  t->ldispl = ldispl;
  t->rdispl = rdispl;
  memcpy(t->rreg, rreg, sizeof(t->rreg));
  /* The handshake (blocking, like every active message of this engine), then the data. */
  char stack[512];
  const size_t hs_len = sizeof(mpi_handshake) + r_size;
  char* hs = hs_len <= sizeof(stack) ? stack : malloc(hs_len);
  mpi_handshake h = {rr.base + (uint64_t)rdispl, size, data_tag, r_tag, (uint32_t)r_size, 0};
  memcpy(hs, &h, sizeof(h));
  if (r_size) memcpy(hs + sizeof(h), r_data, r_size);
  if (is_get) { /* the receive first, so the data never waits unexpected */
    pthread_mutex_lock(&m->lock);
    --m->reserved;
    place(m, t);
    pthread_mutex_unlock(&m->lock);
  }
  mpi_send_progressing(m, hs, hs_len, rank, is_get ? mpi_tag_get : mpi_tag_put);
  if (hs != stack) free(hs);
  if (!is_get) {
    pthread_mutex_lock(&m->lock);
    --m->reserved;
    place(m, t);
    pthread_mutex_unlock(&m->lock);
  }
  __atomic_fetch_add(is_get ? &e->stats.gets : &e->stats.puts, 1, __ATOMIC_RELAXED);
  return WEFT_POSTED;
}

/* Whether [addr, addr + size) lies in a region this engine registered (under the lock). */
static int registered(mpi_engine* m, uint64_t addr, uint64_t size) {
  for (const mpi_region* r = m->regions; r; r = r->next) {
    const uint64_t b = (uint64_t)(uintptr_t)r->base;
    if (addr >= b && size <= r->size && addr - b <= r->size - size) return 1;
  }
  return 0;
}

/* A handshake arrived (kind: the tag it came on): the target's side of a put or get. */
static void on_handshake(mpi_engine* m, uint32_t tag, const char* buf, int len, int src) {
  mpi_handshake h;
  if (len < (int)sizeof(h)) return weft_engine_report(&m->base, src, "a malformed handshake");
  memcpy(&h, buf, sizeof(h));
  if ((size_t)len != sizeof(h) + h.r_size)
    return weft_engine_report(&m->base, src, "a malformed handshake (length)");
  const int is_get = tag == mpi_tag_get;
  pthread_mutex_lock(&m->lock);
  const int ok = registered(m, h.addr, h.size);
  pthread_mutex_unlock(&m->lock);
  if (!ok) return weft_engine_report(&m->base, src, "a transfer names memory not registered here");
  mpi_transfer* t =
      new_transfer(is_get ? get_target : put_target, is_get, src, (void*)(uintptr_t)h.addr, h.size,
                   h.data_tag, h.r_tag, buf + sizeof(h), h.r_size);
  if (!t) return weft_engine_report(&m->base, src, "out of memory for a transfer");
  pthread_mutex_lock(&m->lock);
  place(m, t);
  pthread_mutex_unlock(&m->lock);
}

static void run_tag(mpi_engine* m, uint32_t tag, void* msg, size_t size, int src) {
  weft_engine_am_fn fn =
      tag < WEFT_ENGINE_MAX_TAGS ? __atomic_load_n(&m->base.tags[tag].fn, __ATOMIC_ACQUIRE) : NULL;
  if (tag == WEFT_ENGINE_NO_TAG) return;
  if (!fn) return weft_engine_report(&m->base, src, "a callback names a tag not registered here");
  __atomic_fetch_add(&m->base.stats.callbacks, 1, __ATOMIC_RELAXED);
  fn(&m->base, tag, msg, size, src, m->base.tags[tag].data);
}

static void on_data(mpi_engine* m, mpi_transfer* t) {
  weft_engine_t e = &m->base;
  if (t->kind == put_origin || t->kind == get_origin) {
    __atomic_fetch_add(&e->stats.callbacks, 1, __ATOMIC_RELAXED);
    if (t->l_fn) t->l_fn(e, t->lreg, t->ldispl, t->rreg, t->rdispl, t->size, t->rank, t->l_data);
  } else {
    run_tag(m, t->r_tag, t->r_data, t->r_size, t->rank);
  }
  free(t);
}

int mpi_send_progressing(mpi_engine* m, const void* buf, size_t size, int rank, int tag) {
  MPI_Request r;
  int rc = MPI_Isend(buf, (int)size, MPI_BYTE, rank, tag, m->comm, &r);
  for (int flag = 0; rc == MPI_SUCCESS;) {
    rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    if (flag) break;
    if (!m->comm_running) mpi_engine_progress(&m->base); /* returns at once when nested */
  }
  return rc;
}

/* One completed entry, its callback run outside the lock. */
typedef struct {
  mpi_entry ent;
  int i, src, count;
} mpi_done;

int mpi_engine_progress(weft_engine_t e) {
  mpi_engine* m = (mpi_engine*)e;
  if (__atomic_exchange_n(&m->progressing, 1, __ATOMIC_ACQUIRE)) return 0;
  int total = 0;
  mpi_done done[mpi_array_max];
  for (;;) {
    int out = 0;
    pthread_mutex_lock(&m->lock);
    out = mpi_collect(m);
    for (int k = 0; k < out; ++k) {
      done[k].i = m->idx[k];
      done[k].ent = m->ents[m->idx[k]];
      done[k].src = m->st[k].MPI_SOURCE;
      MPI_Get_count(&m->st[k], MPI_BYTE, &done[k].count);
    }
    pthread_mutex_unlock(&m->lock);
    for (int k = 0; k < out; ++k) {
      mpi_done* d = &done[k];
      if (d->ent.kind == entry_am) {
        __atomic_fetch_add(&e->stats.am_received, 1, __ATOMIC_RELAXED);
        run_tag(m, d->ent.tag, d->ent.buf, (size_t)d->count, d->src);
      } else if (d->ent.kind == entry_handshake) {
        on_handshake(m, d->ent.tag, d->ent.buf, d->count, d->src);
      } else {
        on_data(m, d->ent.t);
      }
    }
    pthread_mutex_lock(&m->lock);
    for (int k = 0; k < out; ++k) { /* receives again; data entries leave the array */
      const int i = done[k].i;
      if (m->ents[i].kind == entry_data) {
        mpi_slot_free(m, i);
        --m->ndata;
      } else {
        MPI_Start(&m->reqs[i]);
        mpi_slot_watch(m, i);
      }
    }
    if (out) mpi_slots_settle(m);
    start_waiting(m);
    pthread_mutex_unlock(&m->lock);
    if (!out) break;
    total += out;
  }
  __atomic_store_n(&m->progressing, 0, __ATOMIC_RELEASE);
  return total;
}
