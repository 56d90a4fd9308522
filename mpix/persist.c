/* SPDX-License-Identifier: BSD-3-Clause */
/* Which requests are persistent: an attach leaves those with the program (seed 2.2). The
 * interposed *_init calls record them and MPI_Request_free forgets them; an attach asks
 * for every operation, so the question must cost no more than a load:
 *   - integer handles (MPICH): one bit per possible handle, in 512 MiB of address space
 *     reserved once; only the pages that hold handles in use are ever touched;
 *   - an MPI whose request objects the library can read (mpix_hook_persistent): asked;
 *   - otherwise a lock-free hash map of handles. */
#include <string.h>
#include <sys/mman.h>

#include "mpix/mpix_internal.h"

static mpix_map map = MPIX_MAP_INIT;
static _Atomic(unsigned long long*) bits; /* integer handles */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void reserve(void) {
  void* p = mmap(NULL, (1ull << 32) / 8, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) atomic_store(&bits, p);
}

static unsigned long long* bitmap(void) {
  if (sizeof(MPI_Request) != 4) return NULL;
  unsigned long long* b = atomic_load_explicit(&bits, memory_order_acquire);
  if (!b) {
    pthread_once(&once, reserve);
    b = atomic_load(&bits);
  }
  return b;
}

static unsigned handle_bits(MPI_Request r) {
  unsigned h = 0;
  memcpy(&h, &r, sizeof(h) < sizeof(r) ? sizeof(h) : sizeof(r));
  return h;
}

int mpix_persistent_has(MPI_Request r) {
  int known = mpix_hook_persistent(r);
  if (known >= 0) return known;
  unsigned long long* b = bitmap();
  if (b) {
    unsigned h = handle_bits(r);
    _Atomic unsigned long long* w = (_Atomic unsigned long long*)&b[h / 64];
    return (atomic_load_explicit(w, memory_order_relaxed) >> (h % 64)) & 1;
  }
  return mpix_map_get(&map, r) != NULL;
}

int mpix_persistent_set(MPI_Request r, int on) {
  if (mpix_hook_persistent(r) >= 0) return 1;
  unsigned long long* b = bitmap();
  if (b) {
    unsigned h = handle_bits(r);
    _Atomic unsigned long long* w = (_Atomic unsigned long long*)&b[h / 64];
    if (on)
      atomic_fetch_or(w, 1ull << (h % 64));
    else if ((atomic_load_explicit(w, memory_order_relaxed) >> (h % 64)) & 1)
      atomic_fetch_and(w, ~(1ull << (h % 64)));
    return 1;
  }
  if (!on) {
    mpix_map_del(&map, r);
    return 1;
  }
  static char present; /* any non-null value */
  return mpix_map_put(&map, r, &present);
}
