/* SPDX-License-Identifier: BSD-3-Clause */
/* Request handle -> pointer maps read without a lock: every MPI_Test of the program asks
 * whether its request is a continuation request, and every attach whether a request is
 * persistent, while the maps change only when such requests are created or freed. Readers
 * retry on a sequence counter (a seqlock); writers take a mutex. A table that grows is
 * kept, not freed, so that a reader still probing it reads valid memory; the tables at
 * most double the largest one. */
#include <stdlib.h>
#include <string.h>

#include "mpix/mpix_internal.h"

static unsigned long long key_of(MPI_Request r) {
  unsigned long long k = 0;
  memcpy(&k, &r, sizeof(r) < sizeof(k) ? sizeof(r) : sizeof(k));
  return k + 1; /* 0 marks an empty slot */
}

/* Handles are allocated in runs (MPICH: consecutive integers; Open MPI: objects of one
 * size from a free list), so a hash that keeps neighbours neighbours keeps a program's
 * lookups of its requests in a few cache lines: a scattering hash cost a cache miss per
 * lookup, a fifth of the time per operation with 50 000 persistent receives. */
static size_t slot_of(unsigned long long k, size_t cap) {
  unsigned long long h = sizeof(MPI_Request) == 8 ? k >> 3 : k; /* pointers: 8-aligned */
  return (size_t)(h ^ (h >> 20)) & (cap - 1);
}

void* mpix_map_get(mpix_map* m, MPI_Request r) {
  unsigned long long k = key_of(r);
  for (;;) {
    unsigned s = atomic_load_explicit(&m->seq, memory_order_acquire);
    if (s & 1) continue; /* a writer is moving entries */
    mpix_table* t = atomic_load_explicit(&m->table, memory_order_acquire);
    void* v = NULL;
    if (t) {
      size_t i = slot_of(k, t->cap);
      unsigned long long e;
      while ((e = atomic_load_explicit(&t->e[i].key, memory_order_relaxed)) && e != k)
        i = (i + 1) & (t->cap - 1);
      if (e == k) v = atomic_load_explicit(&t->e[i].val, memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&m->seq, memory_order_relaxed) == s) return v;
  }
}

static void insert(mpix_table* t, unsigned long long k, void* v) { /* writer */
  size_t i = slot_of(k, t->cap);
  unsigned long long e;
  while ((e = atomic_load_explicit(&t->e[i].key, memory_order_relaxed)) && e != k)
    i = (i + 1) & (t->cap - 1);
  atomic_store_explicit(&t->e[i].val, v, memory_order_relaxed);
  atomic_store_explicit(&t->e[i].key, k, memory_order_relaxed);
}

static mpix_table* grown(mpix_table* old) { /* writer: a table twice as large */
  size_t cap = old ? 2 * old->cap : 64;
  mpix_table* t = calloc(1, sizeof(*t) + cap * sizeof(t->e[0]));
  if (!t) return NULL;
  t->cap = cap;
  t->older = old;
  for (size_t i = 0; old && i < old->cap; ++i) {
    unsigned long long k = atomic_load_explicit(&old->e[i].key, memory_order_relaxed);
    if (k) insert(t, k, atomic_load_explicit(&old->e[i].val, memory_order_relaxed));
  }
  return t;
}

static void begin(mpix_map* m) {
  pthread_mutex_lock(&m->lock);
  atomic_fetch_add_explicit(&m->seq, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}

static void end(mpix_map* m) {
  atomic_fetch_add_explicit(&m->seq, 1, memory_order_release);
  pthread_mutex_unlock(&m->lock);
}

int mpix_map_put(mpix_map* m, MPI_Request r, void* v) {
  begin(m);
  mpix_table* t = atomic_load_explicit(&m->table, memory_order_relaxed);
  if (!t || 2 * (m->count + 1) > t->cap) { /* at most half full */
    mpix_table* g = grown(t);
    if (!g) {
      end(m);
      return 0;
    }
    atomic_store_explicit(&m->table, g, memory_order_relaxed);
    t = g;
  }
  if (!mpix_map_has(t, key_of(r))) ++m->count;
  insert(t, key_of(r), v);
  end(m);
  return 1;
}

int mpix_map_has(mpix_table* t, unsigned long long k) { /* writer */
  size_t i = slot_of(k, t->cap);
  unsigned long long e;
  while ((e = atomic_load_explicit(&t->e[i].key, memory_order_relaxed)) && e != k)
    i = (i + 1) & (t->cap - 1);
  return e == k;
}

/* Removes r by backward shift: each later entry of the cluster that may move into the hole
 * (its home slot is not between the hole and itself) does, and leaves a hole in turn. */
void mpix_map_del(mpix_map* m, MPI_Request r) {
  if (!mpix_map_get(m, r)) return; /* the common case: no lock */
  unsigned long long k = key_of(r);
  begin(m);
  mpix_table* t = atomic_load_explicit(&m->table, memory_order_relaxed);
  size_t mask = t ? t->cap - 1 : 0, i = t ? slot_of(k, t->cap) : 0;
  while (t && atomic_load_explicit(&t->e[i].key, memory_order_relaxed) &&
         atomic_load_explicit(&t->e[i].key, memory_order_relaxed) != k)
    i = (i + 1) & mask;
  if (t && atomic_load_explicit(&t->e[i].key, memory_order_relaxed) == k) {
    --m->count;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
      unsigned long long e = atomic_load_explicit(&t->e[j].key, memory_order_relaxed);
      if (!e) break;
      size_t home = slot_of(e, t->cap);
      if (((j - home) & mask) < ((j - i) & mask)) continue; /* home in (i, j]: stays */
      atomic_store_explicit(&t->e[i].val, atomic_load_explicit(&t->e[j].val, memory_order_relaxed),
                            memory_order_relaxed);
      atomic_store_explicit(&t->e[i].key, e, memory_order_relaxed);
      i = j;
    }
    atomic_store_explicit(&t->e[i].key, 0, memory_order_relaxed);
  }
  end(m);
}
