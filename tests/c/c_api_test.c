/* SPDX-License-Identifier: BSD-3-Clause */
/* The C API from C99: every call, with the data, statuses and return codes checked.
 * Run alone (loopback) or under weftrun with any number of ranks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

static int failures = 0, checks = 0, me = -1;

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    ++checks;                                                                                 \
    if (!(cond)) {                                                                            \
      ++failures;                                                                             \
      fprintf(stderr, "rank %d: CHECK failed at %s:%d: %s\n", me, __FILE__, __LINE__, #cond); \
    }                                                                                         \
  } while (0)
/* A call that must succeed. */
#define OK(call) CHECK((call) == WEFT_OK)
/* A call that must be refused, with the message naming `part`. */
#define REFUSED(call, part) \
  CHECK((call) == WEFT_ERR_USAGE && strstr(weft_last_error(), (part)) != NULL)

/* The program's own allocator for arriving active messages: counts what it has out. */
static int c_allocations = 0;
static void* c_allocate(size_t size, void* ctx) {
  ++*(int*)ctx;
  return malloc(size ? size : 1);
}
static void c_deallocate(void* buf, void* ctx) {
  --*(int*)ctx;
  free(buf);
}

/* The program's own completion object: refuses its first signal, then records. */
static struct { int refused, taken, last; } c_own;
static int c_own_signal(weft_status_t s, void* ctx) {
  (void)ctx;
  if (c_own.refused == 0) {
    ++c_own.refused;
    return 0;
  }
  ++c_own.taken;
  c_own.last = s.size == sizeof(int) ? *(int*)s.buf : -1;
  free(s.buf);
  return 1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void deadline_check(double start, const char* what) {
  if (now() - start > 60) {
    fprintf(stderr, "rank %d: FATAL: timed out waiting for %s\n", me, what);
    exit(3);
  }
}

static weft_status_t wait_cq(weft_comp_t cq) {
  weft_status_t s;
  double t0 = now();
  for (;;) {
    if (weft_cq_pop(cq, &s) != WEFT_OK) CHECK(!"cq_pop refused");
    if (s.errorcode != WEFT_RETRY) return s;
    CHECK(weft_progress() >= 0);
    deadline_check(t0, "a completion queue");
  }
}
/* Finishes a post: waits on `sync` when the status says posted. */
static weft_status_t finish(weft_status_t s, weft_comp_t sync) {
  if (WEFT_IS_POSTED(s.errorcode)) OK(weft_sync_wait(sync, &s));
  return s;
}
static weft_status_t post_send_retry(int rank, void* buf, size_t n, uint64_t tag, weft_comp_t c) {
  weft_status_t s;
  double t0 = now();
  do {
    OK(weft_post_send(rank, buf, n, tag, c, &s));
    if (WEFT_IS_RETRY(s.errorcode)) weft_progress();
    deadline_check(t0, "a send");
  } while (WEFT_IS_RETRY(s.errorcode));
  return s;
}

static int handler_calls = 0;
static weft_status_t handler_last;
static void on_signal(weft_status_t s, void* arg) {
  ++*(int*)arg;
  handler_last = s;
}

/* An active message lent in place: its bytes are read during the call, never freed. */
static int lent_calls = 0;
static char lent_bytes[16];
static void on_lent(weft_status_t s, void* arg) {
  (void)arg;
  ++lent_calls;
  if (s.size <= sizeof(lent_bytes)) memcpy(lent_bytes, s.buf, s.size);
}

static weft_status_t node_done(void* value) {
  weft_status_t s;
  memset(&s, 0, sizeof(s));
  s.errorcode = WEFT_DONE;
  *(int*)value += 1;
  return s;
}
static weft_status_t node_fails(void* value) {
  weft_status_t s;
  memset(&s, 0, sizeof(s));
  s.errorcode = WEFT_ERROR_NOMEM;
  (void)value;
  return s;
}
static int edge_calls = 0;
static void on_edge(weft_status_t s, void* from, void* to) {
  (void)from;
  (void)to;
  if (s.errorcode == WEFT_DONE) ++edge_calls;
}
/* Continuations: the callback records its count and the first status. */
static int cont_calls = 0;
static size_t cont_count = 0;
static weft_status_t cont_first;
static void on_cont(weft_status_t* statuses, size_t count, void* arg) {
  ++*(int*)arg;
  cont_count = count;
  if (statuses && count) cont_first = statuses[0];
}

static int gathers = 0;
static void self_gather(const void* send, void* recv, size_t len, void* arg) {
  memcpy(recv, send, len); /* a job of one rank */
  ++*(int*)arg;
}
static uint64_t my_key(int rank, uint64_t tag, uint8_t policy) {
  return ((uint64_t)(uint32_t)rank << 32) ^ tag ^ ((uint64_t)policy << 60);
}

int main(void) {
  weft_runtime_opts_t init;
  weft_runtime_opts_init(&init);
  init.cq_depth = 512;
  OK(weft_g_runtime_init_x(&init));
  me = weft_get_rank_me();
  const int n = weft_get_rank_n(), to = (me + 1) % n, from = (me - 1 + n) % n;
  CHECK(me >= 0 && n >= 1 && weft_get_rank_me_x(weft_get_g_runtime()) == me);
  CHECK(weft_get_rank_n_x(NULL) == n);
  CHECK(weft_get_rank_local() == me && weft_get_rank_local_n() == n); /* one host */
  CHECK(strlen(weft_get_version()) > 0);
  CHECK(strcmp(weft_strerror(WEFT_ERROR_TRUNCATED),
               "error: message larger than the receive buffer") == 0);
  CHECK(strstr(weft_strerror(WEFT_ERR_USAGE), "refused") != NULL);
  REFUSED(weft_g_runtime_init(), "already active");

  weft_runtime_opts_t attr;
  OK(weft_runtime_get_attr(NULL, &attr));
  CHECK(attr.packet_size >= 64 && attr.eager_size > 0 && attr.cq_depth == 512);
  OK(weft_set_error_handler(NULL, NULL));

  /* Resources. */
  weft_device_t dev = NULL;
  OK(weft_alloc_device(&dev));
  CHECK(dev != NULL && weft_device_get_attr_index(dev) > 0);
  CHECK(weft_device_get_attr_inbox_depth(dev) > 0);
  CHECK(weft_get_default_device(NULL) != NULL &&
        weft_device_get_attr_index(weft_get_default_device(NULL)) == 0);
  /* Counters: a fresh device has counted nothing; the names are the table's. */
  uint64_t counted = 1;
  OK(weft_device_get_counter(dev, WEFT_COUNTER_SENT_EAGER, &counted));
  CHECK(counted == 0);
  OK(weft_device_get_counter(NULL, WEFT_COUNTER_PEERS_DEAD, &counted));
  CHECK(counted == 0);
  CHECK(strcmp(weft_counter_name(WEFT_COUNTER_BACKLOG_HIGH_WATER), "backlog_high_water") == 0);
  CHECK(strcmp(weft_counter_name(WEFT_COUNTER_COUNT), "") == 0);
  REFUSED(weft_device_get_counter(dev, WEFT_COUNTER_COUNT, &counted), "counter");
  REFUSED(weft_device_get_counter(dev, WEFT_COUNTER_RETRIES, NULL), "value");
  /* Peers: every rank of the job is alive here; one out of range and no output refused. */
  for (int r = 0; r < weft_get_rank_n(); ++r) {
    int alive = 0;
    OK(weft_device_test_peer(dev, r, &alive));
    CHECK(alive == 1);
  }
  int alive = 0;
  REFUSED(weft_device_test_peer(dev, weft_get_rank_n(), &alive), "rank");
  REFUSED(weft_device_test_peer(dev, 0, NULL), "alive");
  weft_packet_pool_t pool = NULL;
  OK(weft_alloc_packet_pool(NULL, 4096, 64, &pool));
  CHECK(weft_packet_pool_get_attr_packet_size(pool) == 4096 &&
        weft_packet_pool_get_attr_npackets(pool) == 64);
  CHECK(weft_get_default_packet_pool(NULL) != NULL);
  REFUSED(weft_alloc_packet_pool(NULL, 8, 64, &pool), "packet_size");
  weft_device_t dev2 = NULL; /* a device drawing on its own packet pool */
  OK(weft_alloc_device_x(NULL, pool, 64, &dev2));
  CHECK(weft_device_get_attr_inbox_depth(dev2) == 64);
  CHECK(weft_device_get_attr_peers_progress(dev2) == 0);
  CHECK(weft_device_get_attr_shared(dev2) == 0);
  CHECK(weft_device_get_attr_shared(weft_get_default_device(NULL)) == 1);
  /* Every named argument through the attribute struct; a flag other than 0 or 1 refused. */
  weft_device_attr_t da;
  weft_device_attr_init(&da);
  CHECK(da.runtime == NULL && da.packet_pool == NULL && da.inbox_depth == 0 &&
        da.peers_progress == 0 && da.shared == 0);
  da.peers_progress = 2;
  weft_device_t dev3 = NULL;
  REFUSED(weft_alloc_device_attr(&da, &dev3), "peers_progress");
  CHECK(dev3 == NULL);
  da.peers_progress = 1;
  da.shared = -1;
  REFUSED(weft_alloc_device_attr(&da, &dev3), "shared");
  CHECK(dev3 == NULL);
  da.shared = 1;
  da.inbox_depth = 32;
  OK(weft_alloc_device_attr(&da, &dev3));
  CHECK(weft_device_get_attr_peers_progress(dev3) == 1);
  CHECK(weft_device_get_attr_shared(dev3) == 1);
  CHECK(weft_device_get_attr_inbox_depth(dev3) == 32);
  OK(weft_free_device(&dev3));
  CHECK(dev3 == NULL);
  weft_matching_engine_t eng = NULL;
  OK(weft_alloc_matching_engine(NULL, 128, my_key, &eng));
  CHECK(weft_matching_engine_get_attr_nbuckets(eng) >= 128);
  CHECK(weft_get_default_matching_engine(NULL) != NULL);

  weft_comp_t cq, sync, sync2, handler;
  OK(weft_alloc_cq(&cq));
  OK(weft_alloc_cq_x(NULL, 16, &sync)); /* a second queue, freed at once */
  sync2 = sync;                         /* a copy of its handle goes stale */
  OK(weft_free_comp(&sync));
  CHECK(sync == NULL);
  REFUSED(weft_free_comp(&sync2), "a stale handle");
  OK(weft_alloc_sync(1, &sync));
  OK(weft_alloc_sync(2, &sync2));
  OK(weft_alloc_handler(on_signal, &handler_calls, &handler));
  REFUSED(weft_alloc_handler(NULL, NULL, &handler), "handler needs a function");
  REFUSED(weft_alloc_sync(0, &sync2), "threshold");
  weft_rcomp_t rc, rc_packets;
  OK(weft_register_rcomp(cq, &rc));
  weft_comp_t pcq;
  OK(weft_alloc_cq(&pcq));
  OK(weft_register_rcomp_x(pcq, NULL, WEFT_DELIVERY_PACKET, &rc_packets));
  weft_comp_t lent;
  weft_rcomp_t rc_lent, rc_bad;
  OK(weft_alloc_handler(on_lent, NULL, &lent));
  OK(weft_register_rcomp_x(lent, NULL, WEFT_DELIVERY_IN_PLACE, &rc_lent));
  REFUSED(weft_register_rcomp_x(pcq, NULL, WEFT_DELIVERY_IN_PLACE, &rc_bad), "in_place");
  REFUSED(weft_register_rcomp_x(pcq, NULL, 7, &rc_bad), "delivery");

  /* comp_signal, cq_size, sync with two signals, handler. */
  weft_status_t s, two[2];
  memset(&s, 0, sizeof(s));
  s.errorcode = WEFT_DONE;
  s.tag = 5;
  OK(weft_comp_signal(cq, s));
  size_t qsize = 0;
  OK(weft_cq_size(cq, &qsize));
  CHECK(qsize == 1);
  weft_status_t got = wait_cq(cq);
  CHECK(got.tag == 5);
  int ready = 1;
  s.tag = 6;
  OK(weft_comp_signal(sync2, s));
  OK(weft_sync_test(sync2, two, &ready));
  CHECK(ready == 0);
  s.tag = 7;
  OK(weft_comp_signal(sync2, s));
  OK(weft_sync_test(sync2, two, &ready));
  CHECK(ready == 1 && two[0].tag + two[1].tag == 13);
  OK(weft_comp_signal(handler, s));
  CHECK(handler_calls == 1 && handler_last.tag == 7);

  /* Send and receive, with the options struct: a user matching engine and device. */
  char out[3000], in[3000];
  for (int i = 0; i < 3000; ++i) out[i] = (char)(i * 3 + me);
  weft_comm_opts_t o;
  weft_comm_opts_init(&o);
  o.device = dev;
  o.matching_engine = eng;
  o.user_context = &o;
  weft_status_t rs;
  OK(weft_post_recv_x(from, in, sizeof(in), 11, sync, &o, &rs));
  weft_status_t ss;
  double t0 = now();
  do {
    OK(weft_post_send_x(to, out, sizeof(out), 11, NULL, &o, &ss));
    weft_progress_x(NULL, dev, 0);
    deadline_check(t0, "send");
  } while (WEFT_IS_RETRY(ss.errorcode));
  if (WEFT_IS_POSTED(rs.errorcode)) OK(weft_sync_wait_x(sync, &rs, NULL, dev)); /* progress dev */
  CHECK(rs.errorcode == WEFT_DONE && rs.rank == from && rs.size == sizeof(in) && rs.tag == 11);
  CHECK(rs.user_context == &o);
  int same = 1;
  for (int i = 0; i < 3000; ++i) same &= in[i] == (char)(i * 3 + from);
  CHECK(same);
  OK(weft_barrier());

  /* Active messages, into a queue and into packets; a packet sent with buffer_is_packet. */
  int64_t value = 1000 + me;
  OK(weft_post_am(to, &value, sizeof(value), NULL, rc, &s));
  got = wait_cq(cq);
  CHECK(got.errorcode == WEFT_DONE && got.size == sizeof(value) && got.rank == from);
  CHECK(got.buf && *(int64_t*)got.buf == 1000 + from);
  free(got.buf);
  void* pk = NULL;
  OK(weft_get_upacket(NULL, &pk));
  CHECK(pk != NULL);
  memcpy(pk, "packet!", 8);
  weft_comm_opts_init(&o);
  o.buffer_is_packet = 1;
  OK(weft_post_am_x(to, pk, 8, NULL, rc_packets, &o, &s));
  CHECK(!WEFT_IS_ERROR(s.errorcode));
  got = wait_cq(pcq);
  CHECK(got.size == 8 && strcmp((char*)got.buf, "packet!") == 0);
  OK(weft_put_upacket(got.buf));
  char lent_out[] = "in place";
  OK(weft_post_am(to, lent_out, sizeof(lent_out), NULL, rc_lent, &s));
  CHECK(!WEFT_IS_ERROR(s.errorcode));
  double tl = now();
  while (lent_calls == 0) {
    weft_progress();
    deadline_check(tl, "an active message lent in place");
  }
  CHECK(lent_calls == 1 && strcmp(lent_bytes, "in place") == 0);

  /* Buffer lists: two pieces sent, received into three. */
  char a1[5] = "abcd", a2[7] = "efghij", b1[3], b2[4], b3[10];
  weft_buffer_t sl[2] = {{a1, 4}, {a2, 6}}, rl[3] = {{b1, 3}, {b2, 4}, {b3, 10}};
  weft_comm_opts_init(&o);
  o.buffers = rl;
  o.nbuffers = 3;
  OK(weft_post_recv_x(from, NULL, 0, 12, sync, &o, &rs));
  weft_comm_opts_init(&o);
  o.buffers = sl;
  o.nbuffers = 2;
  OK(weft_post_send_x(to, NULL, 0, 12, NULL, &o, &ss));
  rs = finish(rs, sync);
  CHECK(rs.errorcode == WEFT_DONE && rs.size == 10);
  CHECK(memcmp(b1, "abc", 3) == 0 && memcmp(b2, "defg", 4) == 0 && memcmp(b3, "hij", 3) == 0);
  /* A count without a list is refused, naming the list. */
  weft_comm_opts_init(&o);
  o.buffers = NULL;
  o.nbuffers = 1000;
  REFUSED(weft_post_send_x(to, NULL, 0, 12, NULL, &o, &ss), "buffers = nullptr");

  /* Cancel a receive nobody sends to. */
  int cancelled = 0;
  OK(weft_post_recv(from, in, 8, 999, cq, &rs));
  OK(weft_cancel_recv(from, in, 999, cq, NULL, &cancelled));
  CHECK(cancelled == 1);
  got = wait_cq(cq);
  CHECK(got.errorcode == WEFT_CANCELLED);

  /* One-sided: register, exchange handles, put with notification, get. */
  static char window[1 << 16];
  weft_mr_t mr = NULL;
  OK(weft_register_memory(window, sizeof(window), &mr));
  CHECK(weft_mr_get_attr_base(mr) == window && weft_mr_get_attr_size(mr) == sizeof(window));
  weft_rmr_t mine, theirs;
  OK(weft_get_rmr(mr, &mine));
  OK(weft_post_recv(to, &theirs, sizeof(theirs), 13, sync, &rs));
  post_send_retry(from, &mine, sizeof(mine), 13, NULL);
  finish(rs, sync);
  char src[1000];
  for (int i = 0; i < 1000; ++i) src[i] = (char)(i ^ me);
  weft_comm_opts_init(&o);
  o.remote_comp = rc;
  o.tag = 21;
  OK(weft_post_put_x(to, src, sizeof(src), sync, 100, theirs, &o, &s));
  s = finish(s, sync);
  CHECK(s.errorcode == WEFT_DONE);
  got = wait_cq(cq); /* the notification of the put `from` made into my window */
  CHECK(got.rank == from && got.tag == 21 && got.buf == window + 100 && got.size == 1000);
  same = 1;
  for (int i = 0; i < 1000; ++i) same &= window[100 + i] == (char)(i ^ from);
  CHECK(same);
  OK(weft_barrier());
  char back[1000];
  OK(weft_post_get(to, back, sizeof(back), sync, 100, theirs, &s));
  s = finish(s, sync);
  CHECK(s.errorcode == WEFT_DONE && memcmp(back, src, sizeof(src)) == 0);
  /* A get with notification: the target learns its region was read. */
  weft_comm_opts_init(&o);
  o.remote_comp = rc;
  o.tag = 22;
  memset(back, 0, sizeof(back));
  OK(weft_post_get_x(to, back, 200, sync, 300, theirs, &o, &s));
  s = finish(s, sync);
  CHECK(s.errorcode == WEFT_DONE && memcmp(back, src + 200, 200) == 0);
  got = wait_cq(cq);
  CHECK(got.rank == from && got.tag == 22 && got.buf == window + 300 && got.size == 200);
  OK(weft_barrier());
  /* A second registration, through the _x form, refused after deregistration. */
  weft_mr_t mr2 = NULL;
  weft_rmr_t gone;
  OK(weft_register_memory_x(src, sizeof(src), NULL, &mr2));
  OK(weft_get_rmr(mr2, &gone));
  OK(weft_deregister_memory(&mr2));
  REFUSED(weft_post_get(me, back, 8, sync, 0, gone, &s), "remote_buffer");
  /* Weft's own memory: a put into the next rank's allocation, then misuses refused. */
  weft_mr_t amr = NULL;
  OK(weft_alloc_memory(4096, NULL, &amr));
  char* abase = weft_mr_get_attr_base(amr);
  CHECK(abase != NULL && weft_mr_get_attr_size(amr) == 4096 && abase[4095] == 0);
  weft_rmr_t amine, atheirs;
  OK(weft_get_rmr(amr, &amine));
  OK(weft_post_recv(to, &atheirs, sizeof(atheirs), 14, sync, &rs));
  post_send_retry(from, &amine, sizeof(amine), 14, NULL);
  finish(rs, sync);
  OK(weft_barrier());
  OK(weft_post_put(to, src, sizeof(src), sync, 3000, atheirs, &s));
  s = finish(s, sync);
  CHECK(s.errorcode == WEFT_DONE);
  OK(weft_barrier());
  same = 1;
  for (int i = 0; i < 1000; ++i) same &= abase[3000 + i] == (char)(i ^ from);
  CHECK(same);
  REFUSED(weft_deregister_memory(&amr), "free_memory");
  REFUSED(weft_alloc_memory(0, NULL, &mr2), "size");
  OK(weft_barrier());
  OK(weft_free_memory(&amr));
  CHECK(amr == NULL);
  /* The same through post_comm_x with a remote buffer. */
  weft_comm_opts_init(&o);
  o.has_remote_buffer = 1;
  o.remote_buffer = theirs;
  o.remote_disp = 100;
  memset(back, 0, sizeof(back));
  OK(weft_post_comm_x(WEFT_IN, to, back, 500, sync, &o, &s));
  s = finish(s, sync);
  CHECK(s.errorcode == WEFT_DONE && memcmp(back, src, 500) == 0);
  REFUSED(weft_post_put(to, src, 100, sync, sizeof(window) - 10, theirs, &s), "overruns");
  OK(weft_barrier());

  /* Graphs: functions with an edge callback, a failing node, and a receive -> send chain. */
  weft_comp_t g, gq;
  OK(weft_alloc_cq(&gq));
  int counter = 0;
  OK(weft_alloc_graph(gq, &counter, &g));
  weft_graph_node_t na, nb, nc;
  OK(weft_graph_add_node(g, node_done, &counter, "first", &na));
  OK(weft_graph_add_node(g, node_done, &counter, NULL, &nb));
  OK(weft_graph_add_edge(g, na, nb, on_edge));
  OK(weft_graph_start(g));
  int finished = 0;
  OK(weft_graph_test(g, &s, &finished));
  CHECK(finished == 1 && s.errorcode == WEFT_DONE && counter == 2 && edge_calls == 1);
  got = wait_cq(gq);
  CHECK(got.errorcode == WEFT_DONE && got.user_context == &counter);
  OK(weft_graph_add_node(g, node_fails, NULL, "fails", &nc));
  OK(weft_graph_add_edge(g, nc, na, NULL));
  OK(weft_graph_start(g)); /* restart: "fails" runs first, the rest is skipped */
  OK(weft_graph_wait(g, &s));
  CHECK(s.errorcode == WEFT_ERROR_NOMEM);
  CHECK(weft_graph_get_failed_node(g) == nc && strcmp(weft_graph_node_get_name(nc), "fails") == 0);
  CHECK(weft_graph_node_get_value(na) == &counter);
  OK(weft_graph_node_get_status(na, &s));
  CHECK(s.errorcode == WEFT_CANCELLED);
  got = wait_cq(gq);
  CHECK(got.errorcode == WEFT_ERROR_NOMEM);
  REFUSED(weft_graph_node_mark_complete(nc, s), "not waiting");
  OK(weft_free_comp(&g));
  weft_comp_t ring;
  OK(weft_alloc_graph(NULL, NULL, &ring));
  int64_t token_in = -1, token_out = 77 + me;
  weft_comm_opts_init(&o);
  o.tag = 14;
  weft_graph_node_t r, snd;
  OK(weft_graph_add_node_comm(ring, WEFT_IN, from, &token_in, sizeof(token_in), &o, "recv", &r));
  OK(weft_graph_add_node_comm(ring, WEFT_OUT, to, &token_out, sizeof(token_out), &o, "send", &snd));
  OK(weft_graph_start(ring));
  OK(weft_graph_wait_x(ring, NULL, NULL, &s));
  CHECK(s.errorcode == WEFT_DONE && token_in == 77 + from);
  OK(weft_free_comp(&ring));
  OK(weft_free_comp(&gq));

  /* Non-blocking barrier, then refusals that change nothing. */
  OK(weft_barrier_x(NULL, NULL, sync, &s));
  CHECK(s.errorcode == WEFT_POSTED);
  OK(weft_sync_wait(sync, &s));
  CHECK(s.errorcode == WEFT_DONE);
  REFUSED(weft_post_send(n + 3, out, 8, 1, NULL, &s), "rank");
  REFUSED(weft_post_send(to, NULL, 8, 1, NULL, &s), "null buffer");
  REFUSED(weft_post_am(to, out, 8, NULL, 4000, &s), "unknown remote completion");
  REFUSED(weft_post_send(to, out, 8, 1, NULL, NULL), "status");
  REFUSED(weft_cq_pop(sync, &s), "not a completion queue");
  REFUSED(weft_free_device(&(weft_device_t){weft_get_default_device(NULL)}), "default device");
  CHECK(strstr(weft_last_error(), "free_device") != NULL);

  OK(weft_deregister_memory(&mr));
  CHECK(mr == NULL);
  OK(weft_deregister_rcomp(rc_packets, NULL));
  OK(weft_free_comp(&lent));
  /* Either freeing order: a handle released by freeing its object deregisters as a no-op. */
  {
    weft_comp_t q = NULL;
    weft_rcomp_t rq = WEFT_RCOMP_NULL;
    OK(weft_alloc_cq(&q));
    OK(weft_register_rcomp(q, &rq));
    OK(weft_free_comp(&q));
    OK(weft_deregister_rcomp(rq, NULL));
    REFUSED(weft_deregister_rcomp(WEFT_RCOMP_NULL, NULL), "rcomp");
  }
  /* An allocator for arriving active messages, per handle: the buffer comes from it. */
  {
    weft_comp_t q = NULL;
    weft_rcomp_t rq = WEFT_RCOMP_NULL;
    weft_allocator_t a = {c_allocate, c_deallocate, &c_allocations};
    weft_allocator_t half = {c_allocate, NULL, NULL};
    OK(weft_alloc_cq(&q));
    REFUSED(weft_set_allocator(NULL, &half), "allocator");
    OK(weft_register_rcomp_allocator(q, NULL, 0, &a, &rq));
    OK(weft_barrier()); /* every rank registered before the first message */
    char hello[40] = "allocated by the program";
    weft_status_t st;
    do {
      OK(weft_post_am(me, hello, sizeof(hello), NULL, rq, &st));
      weft_progress();
    } while (WEFT_IS_RETRY(st.errorcode));
    double start = now();
    do {
      weft_progress();
      OK(weft_cq_pop(q, &st));
      deadline_check(start, "an active message with the program's allocator");
    } while (st.errorcode == WEFT_RETRY);
    CHECK(st.size == sizeof(hello) && strcmp((char*)st.buf, hello) == 0);
    CHECK(c_allocations == 1);
    c_deallocate(st.buf, &c_allocations);
    OK(weft_free_comp(&q));
  }
  /* The program's own completion object, by a table: it refuses once, then takes each. */
  {
    weft_comp_t own = NULL;
    weft_rcomp_t ro = WEFT_RCOMP_NULL;
    weft_comp_ops_t ops = {c_own_signal, &c_own};
    weft_comp_ops_t empty = {NULL, NULL};
    REFUSED(weft_alloc_custom_comp(&empty, &own), "signal");
    OK(weft_alloc_custom_comp(&ops, &own));
    OK(weft_register_rcomp(own, &ro));
    OK(weft_barrier());
    int value = 77;
    weft_status_t st;
    do {
      OK(weft_post_am(me, &value, sizeof(value), NULL, ro, &st));
      weft_progress();
    } while (WEFT_IS_RETRY(st.errorcode));
    double start = now();
    while (c_own.taken == 0) {
      weft_progress();
      deadline_check(start, "a signal of the program's own completion object");
    }
    CHECK(c_own.taken == 1 && c_own.refused == 1 && c_own.last == 77);
    OK(weft_free_comp(&own));
  }
  OK(weft_barrier());
  OK(weft_free_comp(&handler));
  OK(weft_free_comp(&sync2));
  OK(weft_free_comp(&sync));
  OK(weft_free_comp(&pcq));
  OK(weft_free_comp(&cq));
  OK(weft_free_matching_engine(&eng));
  OK(weft_free_device(&dev2));
  OK(weft_free_packet_pool(&pool));
  OK(weft_free_device(&dev));
  /* Continuations: a receive and a send in one, statuses converted to the C type. */
  {
    weft_comp_t cr, c;
    weft_cont_request_attr_t ca;
    weft_cont_request_attr_init(&ca);
    CHECK(ca.max_poll == -1 && ca.poll_only == 0);
    ca.poll_only = 1;
    ca.max_poll = 0;
    REFUSED(weft_alloc_cont_request(&ca, &cr), "max_poll = 0");
    ca.max_poll = 4;
    OK(weft_alloc_cont_request(&ca, &cr));
    weft_status_t sts[2];
    REFUSED(weft_alloc_cont(cr, NULL, NULL, NULL, 0, &c), "alloc_cont: fn");
    OK(weft_alloc_cont(cr, on_cont, &cont_calls, sts, 2, &c));
    static char cin[20000], cout[20000];
    memset(cout, 'c', sizeof(cout));
    size_t np = 0;
    OK(weft_post_recv(from, cin, sizeof(cin), 60, c, &s));
    np += s.errorcode == WEFT_POSTED;
    s = post_send_retry(to, cout, sizeof(cout), 60, c);
    np += s.errorcode == WEFT_POSTED;
    int flag = -1, idle = 0;
    OK(weft_arm_cont(c, np, &flag));
    REFUSED(weft_arm_cont(c, np, &flag), "arm_cont");
    double t0 = now();
    while (!idle) {
      OK(weft_cont_request_test(cr, &idle));
      deadline_check(t0, "a continuation");
    }
    CHECK(flag == 0 ? cont_calls == 1 && cont_count == np : cont_calls == 0);
    CHECK(cin[0] == 'c' && cin[sizeof(cin) - 1] == 'c');
    CHECK(cont_calls == 0 || WEFT_IS_DONE(cont_first.errorcode));
    /* Zero posted: the flag, and no call. */
    OK(weft_alloc_cont(cr, on_cont, &cont_calls, NULL, 0, &c));
    const int calls = cont_calls;
    OK(weft_arm_cont(c, 0, &flag));
    CHECK(flag == 1 && cont_calls == calls);
    /* A watched request: the watcher is a synchronizer, signalled at once (idle). */
    weft_comp_t w;
    OK(weft_alloc_sync(1, &w));
    OK(weft_watch_cont_request(cr, w, &flag));
    CHECK(flag == 1);
    OK(weft_cont_request_wait(cr));
    OK(weft_free_comp(&w));
    OK(weft_free_comp(&cr));
    CHECK(cr == NULL);
  }
  weft_runtime_t extra = NULL;
  weft_runtime_opts_t ro;
  weft_runtime_opts_init(&ro);
  ro.cq_depth = 128;
  OK(weft_alloc_runtime(&ro, &extra));
  OK(weft_runtime_get_attr(extra, &attr));
  CHECK(attr.cq_depth == 128);
  OK(weft_progress_x(extra, NULL, 0) >= 0 ? WEFT_OK : -1);
  OK(weft_free_runtime(&extra));
  OK(weft_g_runtime_fina());
  CHECK(weft_get_rank_me() == -1);
  REFUSED(weft_post_send(0, out, 8, 1, NULL, &s), "no runtime is active");

  /* The program's own collectives as the bootstrap: here a one-rank job whose allgather is
   * a copy. Refused while a runtime is active, and without a function. */
  REFUSED(weft_set_bootstrap(0, 1, -1, 0, NULL, NULL), "allgather");
  REFUSED(weft_set_bootstrap(3, 2, -1, 0, self_gather, &gathers), "rank");
  REFUSED(weft_set_bootstrap(0, 1, 2, 1, self_gather, &gathers), "local_rank");
  OK(weft_set_bootstrap(0, 1, -1, 0, self_gather, &gathers));
  OK(weft_g_runtime_init());
  CHECK(weft_get_rank_me() == 0 && weft_get_rank_n() == 1 && weft_get_rank_local_n() == 1);
  CHECK(gathers >= 2); /* lengths, then the lists */
  REFUSED(weft_set_bootstrap(0, 1, -1, 0, self_gather, &gathers), "a runtime is active");
  OK(weft_alloc_cq(&cq));
  OK(weft_register_rcomp(cq, &rc));
  value = 4242;
  OK(weft_post_am(0, &value, sizeof(value), NULL, rc, &s));
  got = wait_cq(cq);
  CHECK(got.size == sizeof(value) && *(int64_t*)got.buf == 4242);
  free(got.buf);
  OK(weft_free_comp(&cq));
  OK(weft_g_runtime_fina());
  if (failures) {
    fprintf(stderr, "rank %d: c_api: %d of %d checks failed\n", me, failures, checks);
    return 1;
  }
  printf("rank %d: c_api: all %d checks passed\n", me, checks);
  return 0;
}
