// SPDX-License-Identifier: BSD-3-Clause
// Fault scenarios: a sender killed half-way through a message, a quiet peer that is not
// dead, a stopped peer that is expelled and must learn it, survivors that exit after a
// death, and ranks left alone when their launcher dies.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

constexpr size_t kSize = 64;

struct message {
  uint64_t seq;
  unsigned char body[kSize - 8];
};

message make(int sender, uint64_t seq) {
  message m{};
  m.seq = seq;
  for (size_t i = 0; i < sizeof(m.body); ++i) m.body[i] = pattern(i, seq * 7 + size_t(sender));
  return m;
}

bool intact(int sender, const message& m) {
  message want = make(sender, m.seq);
  return memcmp(&m, &want, sizeof(m)) == 0;
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Progresses for `s` seconds.
void progress_for(double s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  while (std::chrono::steady_clock::now() < end) weft::progress();
}

// Progresses 0-2 ms (by the process id, so runs differ), then dies.
[[noreturn]] void die_within_2ms() {
  progress_for(double(getpid() % 2000) * 1e-6);
  raise(SIGKILL);
  _exit(137);
}

// A second thread that progresses the default device until this goes out of scope.
class progress_thread {
 public:
  progress_thread()
      : t_([this] {
          while (!stop_.load(std::memory_order_relaxed)) weft::progress();
        }) {}
  ~progress_thread() {
    stop_ = true;
    t_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread t_;
};

}  // namespace

// Ranks 1 and 2 send active messages to rank 0 from their main threads, so into the same
// lane of its inbox; a test hook (WEFT_TEST_KILL_AFTER_CLAIM=2:N) kills rank 2 right after
// it claimed a cell and before it published it. Rank 1 starts only once rank 0 has heard
// nothing from rank 2 for a second, so that every one of its messages lies behind the cell
// rank 2 left unpublished (started together, rank 1 could finish first on a loaded
// machine, and the hole would never be met): they must all arrive.
namespace {

// Rank 0: the next message, or nothing (retry) after progressing once.
bool pop_message(weft::comp_t cq, int* from, message* m) {
  weft::status_t s = weft::cq_pop(cq);
  if (s.error.is_retry()) {
    weft::progress();
    return false;
  }
  *from = s.size == sizeof(*m) ? s.rank : -1;
  if (s.size == sizeof(*m)) memcpy(m, s.buf, sizeof(*m));
  std::free(s.buf);
  return true;
}

// Rank 0: counts messages in order per sender; `bad` counts any out of order or damaged.
struct hole_tally {
  uint64_t from[3] = {0, 0, 0};
  int bad = 0;
  void take(int rank, const message& m) {
    if (rank != 1 && rank != 2) {
      ++bad;
      return;
    }
    if (m.seq != from[rank] || !intact(rank, m)) ++bad;
    ++from[rank];
  }
};

}  // namespace

int scenario_hole() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 3) die("hole needs 3 ranks");
  constexpr uint64_t kCount = 20000;
  weft::comp_t cq = weft::alloc_cq_x().depth(1 << 16)();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();
  if (me != 0) {
    if (me == 1) wait_cq(cq);  // rank 0's go: rank 2 has stopped
    for (uint64_t i = 0; i < kCount; ++i) {
      message m = make(me, i);
      post_until([&] { return weft::post_am(0, &m, sizeof(m), weft::comp_t{}, rc); });
    }
    if (me == 2) die("rank 2 was to be killed by the test hook (WEFT_TEST_KILL_AFTER_CLAIM)");
    wait_cq(cq);  // rank 0 has everything: rank 1 may go
    finish_and_exit("hole");
  }
  hole_tally t;
  deadline d(60);
  auto quiet_since = std::chrono::steady_clock::now();
  while (t.from[2] == 0 ||
         std::chrono::steady_clock::now() - quiet_since < std::chrono::seconds(1)) {
    int from;
    message m;
    if (pop_message(cq, &from, &m)) {
      t.take(from, m);
      quiet_since = std::chrono::steady_clock::now();
    }
    d.check("rank 2's messages to stop");
  }
  uint64_t go = 1;
  post_until([&] { return weft::post_am(1, &go, sizeof(go), weft::comp_t{}, rc); });
  while (t.from[1] < kCount) {
    int from;
    message m;
    if (pop_message(cq, &from, &m)) t.take(from, m);
    d.check("rank 1's messages behind the cell rank 2 left unpublished");
  }
  printf("rank 0: %llu messages from rank 1, %llu from rank 2 before it was killed\n",
         static_cast<unsigned long long>(t.from[1]), static_cast<unsigned long long>(t.from[2]));
  CHECK_EQ(t.bad, 0);
  CHECK(t.from[2] < kCount);
  post_until([&] { return weft::post_am(1, &go, sizeof(go), weft::comp_t{}, rc); });
  progress_for(0.2);
  finish_and_exit("hole");
}

// A peer that is quiet while nothing waits on it is not dead: after a pause longer than
// WEFT_PEER_TIMEOUT (3 s) without checks, rank 0 waits on rank 1, which sends 0.7 s later.
int scenario_quiet_peer() {
  const int me = weft::get_rank_me();
  weft::barrier();
  char buf[16] = {};
  weft::comp_t sync = weft::alloc_sync();
  if (me == 0) {
    // Checks run while this receive waits, and hear nothing from rank 1.
    weft::post_recv(1, buf, sizeof(buf), 1, sync);
    progress_for(0.3);
    CHECK(weft::cancel_recv(1, buf, 1, sync));
    weft::status_t s;
    wait_sync(sync, &s);
    CHECK(s.error.is_cancelled());
    sleep_s(4.0);  // no progress, no checks: longer than WEFT_PEER_TIMEOUT
    s = weft::post_recv(1, buf, sizeof(buf), 2, sync);
    if (s.error.is_posted()) wait_sync(sync, &s);
    CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::done));
    CHECK(strcmp(buf, "still here") == 0);
  } else if (me == 1) {
    sleep_s(5.0);
    char msg[16] = "still here";
    weft::status_t s = post_until([&] { return weft::post_send(0, msg, sizeof(msg), 2, sync); });
    if (s.error.is_posted()) wait_sync(sync, &s);
    CHECK(s.error.is_done());
  }
  weft::free_comp(&sync);
  return finish("quiet_peer");
}

// Rank 1 is stopped for 5 s, past WEFT_PEER_TIMEOUT (2 s): rank 0 takes it for dead. When
// rank 1 resumes, nothing it sends reaches rank 0's completion objects, and it learns that
// rank 0 expelled it: its operations with rank 0 fail with an error naming rank 0.
int scenario_expel() {
  const int me = weft::get_rank_me();
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::comp_t sync = weft::alloc_sync();
  char buf[16] = {};
  weft::barrier();
  if (me == 0) {
    weft::post_recv(1, buf, sizeof(buf), 1, sync);  // never sent
    weft::status_t s;
    wait_sync(sync, &s);
    CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
    CHECK_EQ(s.rank, 1);
    // Rank 1 resumes meanwhile and sends: none of it may be delivered here.
    int delivered = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
    while (std::chrono::steady_clock::now() < end) {
      weft::progress();
      for (s = weft::cq_pop(cq); s.error.is_done(); s = weft::cq_pop(cq)) {
        ++delivered;
        std::free(s.buf);
      }
    }
    CHECK_EQ(delivered, 0);
    finish_and_exit("expel");
  }
  if (me == 1) {
    if (pid_t helper = fork(); helper == 0) {
      sleep_s(5.0);
      kill(getppid(), SIGCONT);
      _exit(0);
    } else {
      raise(SIGSTOP);
      waitpid(helper, nullptr, 0);
    }
    // Resumed: rank 0 has taken this rank for dead meanwhile.
    weft::post_recv(0, buf, sizeof(buf), 9, sync);  // never sent
    std::string error;
    weft::status_t s{};
    deadline d(20);
    uint64_t value = 7;
    while (error.empty() && !weft::sync_test(sync, &s)) {
      error = error_of([&] { weft::post_am(0, &value, sizeof(value), weft::comp_t{}, rc); });
      weft::progress();
      d.check("an error naming the rank that expelled this one");
    }
    if (error.empty()) {  // the receive failed first; a post now is refused
      CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
      CHECK_EQ(s.rank, 0);
      error = error_of([&] { weft::post_am(0, &value, sizeof(value), weft::comp_t{}, rc); });
    }
    printf("rank 1: %s\n", error.c_str());
    CHECK(contains(error, "rank = 0") && contains(error, "expelled"));
    finish_and_exit("expel");
  }
  finish_and_exit("expel");
}

// Rank 1 is killed; ranks 0 and 2 exit with code 42 as soon as they see it. weftrun must
// report the killed rank's status (137), the first failure in time.
int scenario_exit_on_death() {
  const int me = weft::get_rank_me();
  weft::barrier();
  if (me == 1) {
    usleep(200000);
    raise(SIGKILL);
  }
  char buf[8];
  weft::comp_t sync = weft::alloc_sync();
  weft::post_recv(1, buf, sizeof(buf), 3, sync);  // never sent
  weft::status_t s;
  wait_sync(sync, &s);
  fflush(stdout);
  _exit(s.error.errorcode == weft::errorcode_t::error_peer_dead ? 42 : 1);
}

// Progresses with nothing pending until the launcher dies (the test kills weftrun), which
// must end the rank with an error within seconds; or fails after 60 s.
int scenario_idle() {
  weft::barrier();
  deadline d(60);
  for (;;) {
    weft::progress();
    d.check("an error saying that the launcher died");
  }
}

// Rank 1 registers a region, hands it to rank 0 and is killed; rank 0, which has not noticed
// yet, puts into it: the put fails as the peer's death (or the post is refused naming the
// rank), never as a refused region or a system error of the copy.
int scenario_rma_to_dead() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("rma_to_dead needs 2 ranks");
  constexpr size_t kSize = 16 << 20;
  std::vector<char> region(kSize);
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();
  if (me == 1) {
    weft::mr_t mr = weft::register_memory(region.data(), kSize);
    weft::rmr_t h = weft::get_rmr(mr);
    post_until([&] { return weft::post_am(0, &h, sizeof(h), weft::comp_t{}, rc); });
    wait_cq(cq);  // rank 0 has the handle
    raise(SIGKILL);
  }
  weft::status_t hs = wait_cq(cq);
  weft::rmr_t h;
  memcpy(&h, hs.buf, sizeof(h));
  std::free(hs.buf);
  weft::comp_t done = weft::alloc_cq();
  // A first put while rank 1 lives: the backends that fetch a key from its owner have it, so
  // the next put goes to the wire.
  weft::status_t first =
      post_until([&] { return weft::post_put(1, region.data(), 8, done, 0, h); });
  if (first.error.is_posted()) first = wait_cq(done);
  CHECK(first.error.is_done());
  uint64_t ok = 1;
  post_until([&] { return weft::post_am(1, &ok, sizeof(ok), weft::comp_t{}, rc); });
  sleep_s(0.5);  // rank 1 dies meanwhile; nothing here progresses, so nothing notices
  weft::status_t s{};
  std::string e = error_of(
      [&] { s = post_until([&] { return weft::post_put(1, region.data(), kSize, done, 0, h); }); });
  if (e.empty() && s.error.is_posted()) s = wait_cq(done);
  printf("rank 0: put to the dead rank: %s\n", e.empty() ? s.error.get_str() : e.c_str());
  if (e.empty()) {
    CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
    CHECK_EQ(s.rank, 1);
  } else {
    CHECK(contains(e, "rank = 1") && !contains(e, "No such process"));
  }
  finish_and_exit("rma_to_dead");
}

// Rank 1 sends four rendezvous messages and an eager one that rank 0 has not received yet,
// and is killed. Once rank 0 knows it dead, each receive that matches one of its
// rendezvous (by rank and tag, and a receive from any rank) ends with error_peer_dead naming
// it, at once: its data can never come. The eager message, whole before the death, arrives.
// MP_TEST_EXPECT_AHEAD: how many of the four went ahead of their clear-to-send (rank 1
// tells rank 0 in the eager message).
int scenario_rts_from_dead() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("rts_from_dead needs 2 ranks");
  constexpr size_t big = 100000;
  using P = weft::matching_policy_t;
  std::vector<char> buf(big, 1);
  weft::comp_t sync = weft::alloc_sync_x().threshold(5)();
  weft::barrier();
  if (me == 1) {
    const uint64_t a0 = weft::get_default_device().get_counter(weft::counter_t::sent_ahead);
    for (int tag = 70; tag < 74; ++tag)
      post_until([&] {
        return weft::post_send_x(0, buf.data(), big, tag, sync)
            .matching_policy(tag == 71 ? P::tag_only : P::rank_tag)();
      });
    uint64_t ahead = weft::get_default_device().get_counter(weft::counter_t::sent_ahead) - a0;
    post_until([&] { return weft::post_send(0, &ahead, sizeof(ahead), 74, sync); });
    weft::barrier();  // behind its messages: rank 0 has them
    raise(SIGKILL);
  }
  weft::barrier();
  char none[8];
  weft::comp_t gone = weft::alloc_sync();
  CHECK(weft::post_recv(1, none, sizeof(none), 79, gone).error.is_posted());  // never sent
  weft::status_t g;
  wait_sync(gone, &g);  // rank 0 knows rank 1 dead
  CHECK_EQ(int(g.error.errorcode), int(weft::errorcode_t::error_peer_dead));
  const auto t0 = std::chrono::steady_clock::now();
  for (int tag : {70, 71, 73}) {
    weft::comp_t r = weft::alloc_sync();
    weft::status_t s = weft::post_recv_x(tag == 71 ? 0 : 1, buf.data(), big, tag, r)
                           .matching_policy(tag == 71 ? P::tag_only : P::rank_tag)();
    if (s.error.is_posted()) wait_sync(r, &s);
    printf("rank 0: receive of tag %d: %s (rank %d)\n", tag, s.error.get_str(), s.rank);
    CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
    CHECK_EQ(s.rank, 1);
    CHECK_EQ(int(s.tag), tag);
    weft::free_comp(&r);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(waited < 1.0);  // at once: nothing waits for a peer check
  uint64_t ahead = UINT64_MAX;
  weft::comp_t r = weft::alloc_sync();
  weft::status_t s = weft::post_recv(1, &ahead, sizeof(ahead), 74, r);
  if (s.error.is_posted()) wait_sync(r, &s);
  CHECK(s.error.is_done());
  const char* want = getenv("MP_TEST_EXPECT_AHEAD");
  printf("rank 0: rank 1 sent %llu of 4 ahead\n", (unsigned long long)ahead);
  CHECK_EQ(ahead, uint64_t(want ? atoi(want) : 0));
  weft::free_comp(&r);
  weft::free_comp(&gone);
  finish_and_exit("rts_from_dead");  // the dead rank cannot join a barrier or finalize
}

// The same, racing: rank 1 sends 64 rendezvous messages to any receive of their tag, tells
// rank 0 they are all out, and dies 0-2 ms after rank 0 acknowledged that count (by its
// pid) while rank 0 receives them (and a second thread of rank 0 progresses, so the death
// is found while receives match). Every receive ends, either whole (every byte checked) or
// with error_peer_dead naming rank 1; none may wait. The acknowledgment: a send that
// returned done may still sit in the transport's own queue (UCX over tcp queues it behind
// the rendezvous traffic), and a process killed then takes it along; the count must
// arrive for the receives to mean anything (a CI run on a loaded machine lost it).
int scenario_rts_race_death() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("rts_race_death needs 2 ranks");
  constexpr int n = 64;
  constexpr size_t size = 100000;
  using P = weft::matching_policy_t;
  std::vector<char> buf(size);
  weft::barrier();
  if (me == 1) {
    fill(buf.data(), size, 21);
    weft::comp_t sent = weft::alloc_sync_x().threshold(n + 1)();
    for (int i = 0; i < n; ++i)
      post_until([&] {
        return weft::post_send_x(0, buf.data(), size, 80, sent).matching_policy(P::tag_only)();
      });
    int all = n, ack = 0;
    post_until([&] { return weft::post_send(0, &all, sizeof(all), 81, sent); });
    weft::comp_t got = weft::alloc_sync();
    weft::status_t a = post_until([&] { return weft::post_recv(0, &ack, sizeof(ack), 82, got); });
    if (a.error.is_posted()) wait_sync(got, &a);
    die_within_2ms();  // some of the data goes first
  }
  int all = 0;
  weft::comp_t r = weft::alloc_sync();
  weft::status_t s = post_until([&] { return weft::post_recv(1, &all, sizeof(all), 81, r); });
  if (s.error.is_posted()) wait_sync(r, &s);
  CHECK(s.error.is_done());
  CHECK_EQ(all, n);
  post_until([&] { return weft::post_send(1, &all, sizeof(all), 82, weft::comp_t{}); });
  int whole = 0, failed = 0;
  {
    progress_thread helper;  // completions and the death's failures on either thread
    for (int i = 0; i < n; ++i) {
      memset(buf.data(), 0, size);
      s = weft::post_recv_x(0, buf.data(), size, 80, r).matching_policy(P::tag_only)();
      if (s.error.is_posted()) wait_sync(r, &s);
      if (s.error.is_done()) {
        ++whole;
        CHECK_EQ(verify(buf.data(), size, 21), SIZE_MAX);
      } else {
        ++failed;
        CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
        CHECK_EQ(s.rank, 1);
      }
    }
  }
  printf("rank 0: %d received whole, %d failed with the dead sender\n", whole, failed);
  CHECK_EQ(whole + failed, n);
  weft::free_comp(&r);
  finish_and_exit("rts_race_death");
}

// Posts (retrying) to dying rank 1: true when posted, false when refused at the call
// naming the rank, as a post is once the death is known.
template <typename Post>
bool posted_or_refused(Post&& post) {
  weft::status_t s{};
  const std::string e = error_of([&] { s = post_until(post); });
  if (!e.empty()) {
    CHECK(contains(e, "rank = 1"));
    return false;
  }
  CHECK(s.error.is_posted());
  return true;
}

// The other direction: rank 0 sends 64 rendezvous messages to receives rank 1 posted, and
// rank 1 dies 0-2 ms into taking them while rank 0's main thread and a second thread
// progress (completions and the death's failures on either). Every send ends exactly once:
// done, or error_peer_dead naming rank 1 (or its post is refused naming rank 1, once the
// death is known); nothing more comes from the queue after.
int scenario_send_race_death() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("send_race_death needs 2 ranks");
  constexpr int n = 64;
  constexpr size_t size = 100000;
  std::vector<char> buf(size);
  if (me == 1) {
    std::vector<std::vector<char>> in(n, std::vector<char>(size));
    weft::comp_t r = weft::alloc_sync_x().threshold(n)();
    for (auto& b : in)
      CHECK(
          post_until([&] { return weft::post_recv(0, b.data(), size, 82, r); }).error.is_posted());
    weft::barrier();
    die_within_2ms();
  }
  fill(buf.data(), size, 22);
  weft::comp_t cq = weft::alloc_cq();
  weft::barrier();
  int posted = 0, refused = 0, done = 0, failed = 0, extra = 0;
  {
    progress_thread helper;  // completions and the death's failures on either thread
    // A post after the death is known is refused at the call, naming the rank.
    for (int i = 0; i < n; ++i) {
      if (posted_or_refused([&] { return weft::post_send(1, buf.data(), size, 82, cq); }))
        ++posted;
      else
        ++refused;
    }
    for (int i = 0; i < posted; ++i) {
      weft::status_t s = wait_cq(cq);
      if (s.error.is_done()) {
        ++done;
      } else {
        ++failed;
        CHECK_EQ(int(s.error.errorcode), int(weft::errorcode_t::error_peer_dead));
        CHECK_EQ(s.rank, 1);
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200))
      if (!weft::cq_pop(cq).error.is_retry()) ++extra;
  }
  printf("rank 0: %d sends done, %d failed with the dead receiver, %d refused, %d extra\n", done,
         failed, refused, extra);
  CHECK_EQ(extra, 0);
  finish_and_exit("send_race_death");
}

// Rank 0 posts receives from rank 1, which sends nothing and dies 0-2 ms after the
// barrier, one after another while a second thread progresses: every receive posted ends
// once, with error_peer_dead naming rank 1 (none waits for ever: a receive inserted after
// the death's scan passed its bucket did), and once the death is known a post is refused
// naming the rank. mp.recv_race_death.delayed holds open the window between a post's look
// at the peer and its insert (WEFT_TEST_RECV_INSERT_DELAY).
int scenario_recv_race_death() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("recv_race_death needs 2 ranks");
  weft::barrier();
  if (me == 1) die_within_2ms();
  int sink = 0;  // no data ever comes: every receive may share it
  weft::comp_t cq = weft::alloc_cq();
  int posted = 0, refused = 0, failed = 0, other = 0;
  {
    progress_thread helper;  // the death's failures on either thread
    deadline d(30);
    while (posted_or_refused([&] { return weft::post_recv(1, &sink, sizeof(sink), 83, cq); })) {
      ++posted;
      d.check("a receive from the dead rank to be refused");
    }
    ++refused;
    for (int i = 0; i < posted; ++i) {
      weft::status_t s = wait_cq(cq);
      if (s.error.errorcode == weft::errorcode_t::error_peer_dead && s.rank == 1)
        ++failed;
      else
        ++other;
    }
  }
  printf("rank 0: %d receives posted, %d failed with the dead sender, %d otherwise, %d refused\n",
         posted, failed, other, refused);
  CHECK_EQ(refused, 1);
  CHECK_EQ(failed, posted);
  CHECK_EQ(other, 0);
  finish_and_exit("recv_race_death");
}

// Rank 1 floods a queue rank 0 has freed: every message is dropped and reported, but the
// default log shows the first ten and then a count a second, not a line a message.
int scenario_drop_flood() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("drop_flood needs 2 ranks");
  weft::comp_t gone = weft::alloc_cq(), marker = weft::alloc_cq();
  weft::rcomp_t rgone = weft::register_rcomp(gone), rmarker = weft::register_rcomp(marker);
  if (me == 0) weft::free_comp(&gone);
  weft::barrier();
  if (me == 1) {
    uint64_t v = 0;
    for (int i = 0; i < 20000; ++i)
      post_until([&] { return weft::post_am(0, &v, sizeof(v), weft::comp_t{}, rgone); });
    post_until([&] { return weft::post_am(0, &v, sizeof(v), weft::comp_t{}, rmarker); });
    weft::free_comp(&gone);
  } else {
    weft::status_t s = wait_cq(marker);  // behind every dropped one in the lane
    std::free(s.buf);
  }
  weft::barrier();
  weft::free_comp(&marker);
  return finish("drop_flood");
}
