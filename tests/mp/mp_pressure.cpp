// SPDX-License-Identifier: BSD-3-Clause
// Back-pressure scenarios: a receiver that does not keep up must make its senders see retry,
// and lose nothing. Rank 0 sends a burst to the last rank, which leaves it alone for a
// while (in a mixed job of two hosts the burst crosses the network); every message carries
// its sequence number and a checksum, and the receiver keeps a ledger.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"
#include "net/shm/layout.hpp"

using namespace mp;

namespace {

constexpr int kBurst = 100000;
constexpr size_t kSize = 64;
// How long the receiver leaves the burst alone, and when the sender counts what went out.
constexpr double kIdle = 1.5, kCount = 1.0;

struct message {
  uint64_t seq;
  uint64_t sum;
  unsigned char body[kSize - 16];
};
static_assert(sizeof(message) == kSize);

message make(uint64_t seq) {
  message m{};
  m.seq = seq;
  for (size_t i = 0; i < sizeof(m.body); ++i) m.body[i] = pattern(i, seq);
  for (unsigned char c : m.body) m.sum = m.sum * 31 + c;
  return m;
}

bool intact(const message& m, uint64_t seq) {
  message want = make(seq);
  return memcmp(&m, &want, sizeof(m)) == 0;
}

// This process's peak resident memory (VmHWM) in KiB.
long peak_kib() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

// What the receiver can hold before its senders must stop: what it keeps (`kept`) plus its
// inbox, every lane of it on shared memory, or on the network the credits each peer has
// (inbox_depth messages; see net/credits.hpp).
// Its ranks share one host, and the burst goes through the default device.
size_t bound_of(size_t kept) {
  const char* lanes = getenv("WEFT_SHM_LANES");
  const size_t nlanes =
      lanes ? size_t(atoi(lanes))
            : weft::net::shm::default_lanes(true, std::thread::hardware_concurrency(),
                                            size_t(weft::get_rank_n()));
  return kept + nlanes * weft::get_g_runtime().get_attr_inbox_depth() + 64;
}

// Rank 0: posts the burst to `to` as fast as retry lets it; says how many went out by
// kCount s.
void send_burst(int to, bool am, weft::rcomp_t rcomp, size_t bound) {
  long retries = 0, wrong = 0;
  size_t by_count = SIZE_MAX;
  const double start = now_s();
  deadline d(120);
  for (int i = 0; i < kBurst; ++i) {
    message m = make(uint64_t(i));
    for (;;) {
      weft::status_t s =
          am ? weft::post_am_x(to, &m, sizeof(m), weft::comp_t{}, rcomp).tag(weft::tag_t(i))()
             : weft::post_send_x(to, &m, sizeof(m), weft::tag_t(i), weft::comp_t{})();
      if (s.error.is_done()) break;
      if (!s.error.is_retry()) {
        ++wrong;
        break;
      }
      ++retries;
      weft::progress();
      if (by_count == SIZE_MAX && now_s() - start > kCount) by_count = size_t(i);
      d.check("the burst to go out");
    }
  }
  printf("rank 0: %d messages sent; %ld retries; %zu out after %.1f s (bound %zu)\n", kBurst,
         retries, by_count, kCount, bound);
  CHECK_EQ(wrong, 0);
  CHECK(retries > 0);
  CHECK(by_count <= bound);
}

// Under a sanitizer the shadow memory swamps the figure: reported, not checked.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kCheckPeak = false;
#else
constexpr bool kCheckPeak = true;
#endif

void report_peak(const char* what) {
  const long kib = peak_kib();
  printf("rank %d: %s; peak resident memory %ld MiB\n", weft::get_rank_me(), what, kib / 1024);
  if (kCheckPeak) CHECK(kib > 0 && kib < 256 * 1024);
}

// Sends the receiver leaves unexpected: with WEFT_MAX_REQUESTS=16 its table fills at once.
int scenario_burst_send() {
  const int me = weft::get_rank_me(), to = weft::get_rank_n() - 1;
  if (to == 0) die("burst_send needs 2 ranks or more");
  const size_t bound = bound_of(weft::get_g_runtime().get_attr_max_requests());
  weft::barrier();
  if (me == 0) {
    send_burst(to, false, weft::rcomp_null, bound);
  } else if (me == to) {
    const double start = now_s();
    while (now_s() - start < kIdle) weft::progress();
    // The first receive tries only (allow_posted false): it must find message 0, whatever
    // the table holds.
    message m{};
    weft::status_t s = weft::post_recv_x(0, &m, sizeof(m), 0, weft::comp_t{}).allow_posted(false)();
    CHECK(s.error.is_done());
    CHECK(intact(m, 0));
    int bad = 0;
    weft::comp_t sync = weft::alloc_sync();
    for (int i = 1; i < kBurst; ++i) {
      m = message{};
      s = post_until([&] { return weft::post_recv(0, &m, sizeof(m), weft::tag_t(i), sync); });
      if (s.error.is_posted()) wait_sync(sync, &s);
      if (!s.error.is_done() || s.size != sizeof(m) || !intact(m, uint64_t(i))) ++bad;
    }
    weft::free_comp(&sync);
    CHECK_EQ(bad, 0);
    report_peak("all 100000 messages received intact, in order of their tags");
  }
  return finish("burst_send");
}

// Active messages into a completion queue of 1024 entries that nobody pops for a while:
// the queue stops taking them, the inbox fills, the sender sees retry. `size` 8 keeps
// them in the queue's entries, 64 in malloc'd buffers.
int scenario_burst_am() {
  const int me = weft::get_rank_me(), to = weft::get_rank_n() - 1;
  if (to == 0) die("burst_am needs 2 ranks or more");
  weft::comp_t cq = weft::alloc_cq_x().depth(1024)();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  const size_t bound = bound_of(1024);
  weft::barrier();
  if (me == 0) {
    send_burst(to, true, rc, bound);
  } else if (me == to) {
    const double start = now_s();
    while (now_s() - start < kIdle) weft::progress();
    std::vector<unsigned char> seen(kBurst, 0);
    int bad = 0, dup = 0;
    deadline d(120);
    for (int got = 0; got < kBurst;) {
      weft::status_t s = weft::cq_pop(cq);
      if (s.error.is_retry()) {
        weft::progress();
        d.check("the burst's active messages");
        continue;
      }
      ++got;
      message m{};
      if (s.error.is_done() && s.size == sizeof(m)) memcpy(&m, s.buf, sizeof(m));
      std::free(s.buf);
      if (m.seq >= uint64_t(kBurst) || s.tag != weft::tag_t(m.seq) || !intact(m, m.seq)) {
        ++bad;
        continue;
      }
      if (seen[m.seq]++) ++dup;
    }
    int missing = 0;
    for (unsigned char c : seen) missing += c == 0;
    CHECK_EQ(bad, 0);
    CHECK_EQ(dup, 0);
    CHECK_EQ(missing, 0);
    report_peak("all 100000 active messages arrived once, intact");
  }
  weft::barrier();
  weft::free_comp(&cq);
  return finish("burst_am");
}

}  // namespace

int scenario_burst(bool am) {
  return am ? scenario_burst_am() : scenario_burst_send();
}

// Sends `count` 8-byte active messages to `to`, progressing while its inbox is full;
// returns how many posts saw retry.
static long flood_am(int to, int count, weft::rcomp_t rc, deadline& d) {
  long retries = 0;
  for (uint64_t v = 0; v < uint64_t(count); ++v) {
    weft::status_t s;
    while ((s = weft::post_am(to, &v, sizeof(v), weft::comp_t{}, rc)).error.is_retry()) {
      ++retries;
      weft::progress();
      d.check("the target to take the active messages");
    }
    CHECK(s.error.is_done() || s.error.is_posted());
  }
  return retries;
}

// Pops `count` active messages from `q`, each done, and frees them.
static void take_ams(weft::comp_t q, int count) {
  for (int i = 0; i < count; ++i) {
    weft::status_t t = wait_cq(q);
    CHECK(t.error.is_done());
    std::free(t.buf);
  }
}

// The two full-lane scenarios' resources (2 ranks): an active-message queue of depth 4,
// a queue for the large message's completion, its 1 MiB buffer, and how many active
// messages fill the target's lane. Freed after the scenario's last barrier.
struct full_lane {
  static constexpr size_t kBig = size_t(1) << 20;
  weft::comp_t amq;
  weft::rcomp_t rc;
  weft::comp_t done;
  std::vector<unsigned char> big;
  int ams;
  int me = weft::get_rank_me();
  explicit full_lane(const char* scenario)
      : amq(weft::alloc_cq_x().depth(4)()),
        rc(weft::register_rcomp(amq)),
        done(weft::alloc_cq_x().depth(16)()),
        big(kBig),
        ams(int(weft::get_default_device().get_attr_inbox_depth()) + 64) {
    if (weft::get_rank_n() != 2) die(std::string(scenario) + " needs 2 ranks");
    weft::barrier();
  }
  ~full_lane() {
    weft::free_comp(&done);
    weft::deregister_rcomp(rc);
    weft::free_comp(&amq);
  }
};

// A clear-to-send answers the receiver's own send, so it must reach that sender even when
// the sender's inbox lane is full of the receiver's refused active messages. Rank 1 posts
// a receive for a large message of rank 0, then sends active messages to rank 0 (whose
// queue holds 4) until its posts see retry. Rank 0 then sends the large message and waits
// for it without popping its queue: it completes only if rank 1's clear-to-send gets in.
int scenario_cts_full_lane() {
  full_lane f("cts_full_lane");
  weft::comp_t amq = f.amq, done = f.done;
  weft::rcomp_t rc = f.rc;
  std::vector<unsigned char>& big = f.big;
  const int ams = f.ams;
  const struct { int me; } w{f.me};
  constexpr size_t kBig = full_lane::kBig;
  deadline d(60);
  if (w.me == 1) {
    CHECK(post_until([&] {
            return weft::post_recv(0, big.data(), kBig, 5, done);
          }).error.is_posted());
    const long retries = flood_am(0, ams, rc, d);
    CHECK(retries > 0);  // the lane was full
    weft::status_t r = wait_cq(done);
    CHECK(r.error.is_done());
    CHECK_EQ(r.size, kBig);
    size_t bad = 0;
    for (size_t i = 0; i < kBig; ++i) bad += big[i] != pattern(i, 7);
    CHECK_EQ(bad, 0u);
    printf("rank 1: %d active messages (%ld retries), then 1 MiB received intact\n", ams, retries);
  } else {
    for (size_t i = 0; i < kBig; ++i) big[i] = pattern(i, 7);
    const double start = now_s();
    while (now_s() - start < 0.5) weft::progress();  // the lane fills; nothing popped
    CHECK_EQ(weft::cq_size(amq), 4u);
    weft::status_t s = post_until([&] { return weft::post_send(1, big.data(), kBig, 5, done); });
    CHECK(s.error.is_posted());
    weft::status_t got;
    while ((got = weft::cq_pop(done)).error.is_retry()) {
      weft::progress();
      d.check("rank 0's rendezvous send, whose clear-to-send meets a full lane");
    }
    CHECK(got.error.is_done());
    take_ams(amq, ams);
    printf("rank 0: its rendezvous send completed past a full lane; %d active messages\n", ams);
  }
  weft::barrier();
  return finish("cts_full_lane");
}

// The data of a rendezvous message, and the note that completes its receive, answer the
// receiver's clear-to-send: they must reach the receiver even when its lane from the sender
// is full of the sender's refused active messages. Rank 0 posts a 1 MiB send to rank 1,
// then sends active messages to rank 1 (whose queue holds 4) until its posts see retry.
// Rank 1 waits for the receive without popping its queue: it completes only if the data's
// announcement (pipelined) or note (cross-memory attach) gets past the held cells.
int scenario_rdv_full_lane() {
  full_lane f("rdv_full_lane");
  weft::comp_t amq = f.amq, done = f.done;
  weft::rcomp_t rc = f.rc;
  std::vector<unsigned char>& big = f.big;
  const int ams = f.ams;
  const int me = f.me;
  constexpr size_t kBig = full_lane::kBig;
  deadline d(60);
  if (me == 0) {
    for (size_t i = 0; i < kBig; ++i) big[i] = pattern(i, 9);
    CHECK(post_until([&] {
            return weft::post_send(1, big.data(), kBig, 6, done);
          }).error.is_posted());
    const long retries = flood_am(1, ams, rc, d);
    CHECK(retries > 0);  // the lane was full
    CHECK(wait_cq(done).error.is_done());
    printf("rank 0: 1 MiB sent, then %d active messages (%ld retries)\n", ams, retries);
  } else {
    CHECK(post_until([&] {
            return weft::post_recv(0, big.data(), kBig, 6, done);
          }).error.is_posted());
    weft::status_t got;
    while ((got = weft::cq_pop(done)).error.is_retry()) {  // the queue is not popped
      weft::progress();
      d.check("rank 1's receive, whose data meets a full lane");
    }
    CHECK(got.error.is_done());
    CHECK_EQ(got.size, kBig);
    size_t bad = 0;
    for (size_t i = 0; i < kBig; ++i) bad += big[i] != pattern(i, 9);
    CHECK_EQ(bad, 0u);
    take_ams(amq, ams);
    printf("rank 1: 1 MiB received intact past a full lane; %d active messages\n", ams);
  }
  weft::barrier();
  return finish("rdv_full_lane");
}
