/* SPDX-License-Identifier: BSD-3-Clause */
/* A small distributed hash table in C99 over Weft's C API. Every rank owns the keys that
 * hash to it: an index (key -> slot) and a registered value area that peers read with get.
 *   insert: an active message to the owner, which stores the value and acknowledges;
 *   lookup: an active message to the owner, which answers with the slot (or "absent");
 *           the value is then fetched from the owner's area with a get.
 *   weftrun -n 4 ./c_dht [keys per rank]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

enum { VALUE_SIZE = 48, SLOTS = 1 << 14 };
enum { MSG_INSERT, MSG_INSERT_ACK, MSG_LOOKUP, MSG_LOOKUP_REPLY };

typedef struct {
  uint32_t type;
  int32_t slot; /* replies: the slot, or -1 when the key is absent */
  uint64_t key;
  char value[VALUE_SIZE]; /* insert only */
} message_t;

static int me, nranks;
static uint64_t keys[SLOTS]; /* the index of the keys this rank owns; 0 = empty */
static char values[SLOTS][VALUE_SIZE];
static weft_comp_t inbox;
static weft_rcomp_t inbox_rc;
static int acks_pending = 0;
static int32_t reply_slot;
static int reply_ready = 0;

static void check(int rc, const char* what) {
  if (rc != WEFT_OK) {
    fprintf(stderr, "rank %d: %s: %s (%s)\n", me, what, weft_strerror(rc), weft_last_error());
    exit(1);
  }
}

static uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  return k ^ (k >> 33);
}
static int owner_of(uint64_t key) {
  return (int)(mix(key) % (uint64_t)nranks);
}
static void value_of(uint64_t key, char* out) {
  memset(out, 0, VALUE_SIZE); /* all VALUE_SIZE bytes are compared */
  snprintf(out, VALUE_SIZE, "value of key %llu", (unsigned long long)key);
}

/* Sends an active message; retries while the peer's queue is full. */
static void send_msg(int rank, const message_t* m) {
  weft_status_t s;
  do {
    check(weft_post_am(rank, (void*)m, sizeof(*m), NULL, inbox_rc, &s), "post_am");
    if (WEFT_IS_RETRY(s.errorcode)) weft_progress();
  } while (WEFT_IS_RETRY(s.errorcode));
  if (WEFT_IS_ERROR(s.errorcode)) {
    fprintf(stderr, "rank %d: post_am: %s\n", me, weft_strerror(s.errorcode));
    exit(1);
  }
}

static int32_t find_slot(uint64_t key, int insert) {
  for (uint64_t i = 0; i < SLOTS; ++i) {
    uint32_t slot = (uint32_t)((mix(key) / (uint64_t)nranks + i) % SLOTS);
    if (keys[slot] == key) return (int32_t)slot;
    if (keys[slot] == 0) {
      if (!insert) return -1;
      keys[slot] = key;
      return (int32_t)slot;
    }
  }
  return -1;
}

/* Serves one arrived message, if any: requests from peers and replies to this rank. */
static void serve(void) {
  weft_status_t s;
  weft_progress();
  check(weft_cq_pop(inbox, &s), "cq_pop");
  if (s.errorcode == WEFT_RETRY) return;
  message_t m;
  memcpy(&m, s.buf, sizeof(m));
  free(s.buf);
  message_t reply = {0};
  reply.key = m.key;
  switch (m.type) {
    case MSG_INSERT:
      reply.type = MSG_INSERT_ACK;
      reply.slot = find_slot(m.key, 1);
      if (reply.slot >= 0) memcpy(values[reply.slot], m.value, VALUE_SIZE);
      send_msg(s.rank, &reply);
      break;
    case MSG_LOOKUP:
      reply.type = MSG_LOOKUP_REPLY;
      reply.slot = find_slot(m.key, 0);
      send_msg(s.rank, &reply);
      break;
    case MSG_INSERT_ACK: --acks_pending; break;
    case MSG_LOOKUP_REPLY:
      reply_slot = m.slot;
      reply_ready = 1;
      break;
  }
}

/* A lookup: ask the owner for the slot, then get the value from its registered area. */
static int lookup(uint64_t key, weft_rmr_t* areas, weft_comp_t sync, char* out) {
  message_t m = {0};
  m.type = MSG_LOOKUP;
  m.key = key;
  reply_ready = 0;
  const int owner = owner_of(key);
  send_msg(owner, &m);
  while (!reply_ready) serve();
  if (reply_slot < 0) return 0;
  weft_status_t s;
  check(weft_post_get(owner, out, VALUE_SIZE, sync, (uint64_t)reply_slot * VALUE_SIZE, areas[owner],
                      &s),
        "post_get");
  if (WEFT_IS_POSTED(s.errorcode)) {
    int ready = 0;
    while (!ready) {
      serve(); /* keep answering others while the get is in flight */
      check(weft_sync_test(sync, &s, &ready), "sync_test");
    }
  }
  return s.errorcode == WEFT_DONE;
}

int main(int argc, char** argv) {
  const int per_rank = argc > 1 ? atoi(argv[1]) : 1000;
  check(weft_g_runtime_init(), "g_runtime_init");
  me = weft_get_rank_me();
  nranks = weft_get_rank_n();
  check(weft_alloc_cq(&inbox), "alloc_cq");
  check(weft_register_rcomp(inbox, &inbox_rc), "register_rcomp");
  weft_mr_t mr;
  check(weft_register_memory(values, sizeof(values), &mr), "register_memory");

  /* Everyone's value area handle, gathered with an active message to each rank. */
  weft_rmr_t* areas = calloc((size_t)nranks, sizeof(weft_rmr_t));
  weft_comp_t handles;
  check(weft_alloc_cq(&handles), "alloc_cq");
  weft_rcomp_t handles_rc;
  check(weft_register_rcomp(handles, &handles_rc), "register_rcomp");
  weft_rmr_t mine;
  check(weft_get_rmr(mr, &mine), "get_rmr");
  for (int r = 0; r < nranks; ++r) {
    weft_status_t s;
    do {
      check(weft_post_am(r, &mine, sizeof(mine), NULL, handles_rc, &s), "post_am");
      if (WEFT_IS_RETRY(s.errorcode)) weft_progress();
    } while (WEFT_IS_RETRY(s.errorcode));
  }
  for (int got = 0; got < nranks;) {
    weft_status_t s;
    weft_progress();
    check(weft_cq_pop(handles, &s), "cq_pop");
    if (s.errorcode == WEFT_RETRY) continue;
    memcpy(&areas[s.rank], s.buf, sizeof(weft_rmr_t));
    free(s.buf);
    ++got;
  }

  /* Insert this rank's keys (1-based so that 0 means empty). */
  for (int i = 0; i < per_rank; ++i) {
    message_t m = {0};
    m.type = MSG_INSERT;
    m.key = (uint64_t)me * 1000000 + (uint64_t)i + 1;
    value_of(m.key, m.value);
    ++acks_pending;
    send_msg(owner_of(m.key), &m);
    serve();
  }
  while (acks_pending) serve();
  weft_comp_t barrier_done;
  check(weft_alloc_sync(1, &barrier_done), "alloc_sync");
  weft_status_t bs;
  check(weft_barrier_x(NULL, NULL, barrier_done, &bs), "barrier");
  for (int ready = 0; !ready;) {
    serve();
    check(weft_sync_test(barrier_done, NULL, &ready), "sync_test");
  }

  /* Look up the next rank's keys, and keys nobody inserted. */
  weft_comp_t sync;
  check(weft_alloc_sync(1, &sync), "alloc_sync");
  int found = 0, correct = 0, absent_ok = 0;
  const int peer = (me + 1) % nranks;
  for (int i = 0; i < per_rank; ++i) {
    uint64_t key = (uint64_t)peer * 1000000 + (uint64_t)i + 1;
    char got[VALUE_SIZE], want[VALUE_SIZE];
    if (lookup(key, areas, sync, got)) {
      ++found;
      value_of(key, want);
      correct += memcmp(got, want, VALUE_SIZE) == 0;
    }
    char none[VALUE_SIZE];
    absent_ok += !lookup((uint64_t)nranks * 1000000 + (uint64_t)i + 1, areas, sync, none);
  }
  /* Keep serving until every rank finished its lookups. */
  check(weft_barrier_x(NULL, NULL, barrier_done, &bs), "barrier");
  for (int ready = 0; !ready;) {
    serve();
    check(weft_sync_test(barrier_done, NULL, &ready), "sync_test");
  }
  printf(
      "rank %d: %d keys inserted; looked up %d keys of rank %d: %d found, %d correct; %d of %d "
      "absent keys reported absent\n",
      me, per_rank, per_rank, peer, found, correct, absent_ok, per_rank);
  check(weft_free_comp(&sync), "free_comp");
  check(weft_free_comp(&barrier_done), "free_comp");
  check(weft_deregister_memory(&mr), "deregister_memory");
  check(weft_free_comp(&handles), "free_comp");
  check(weft_free_comp(&inbox), "free_comp");
  free(areas);
  check(weft_g_runtime_fina(), "g_runtime_fina");
  return found == per_rank && correct == per_rank && absent_ok == per_rank ? 0 : 1;
}
