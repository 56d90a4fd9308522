// SPDX-License-Identifier: BSD-3-Clause
// weft-soak: a randomized soak and fault test of Weft. N ranks x T threads send each other
// a random mix of messages, active messages and puts and gets (with and without
// notification), sizes from 0 bytes to 8 MiB biased small; every payload is checked where
// it lands and entered in an exactly-once ledger; optionally one rank is killed or stopped
// at a random moment, or one message is deliberately dropped, duplicated or corrupted to
// prove that the checks catch it. Rank 0 prints the verdict:
//   soak: operations X verified Y lost L duplicated D corrupted C
// See docs/soak.md.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "control.hpp"
#include "worker.hpp"

using namespace soak;

void job::failure(const std::string& what) {
  std::lock_guard<std::mutex> g(lock);
  if (++failures_logged <= 20) fprintf(stderr, "soak: rank %d: %s\n", me, what.c_str());
  if (failures_logged == 21) fprintf(stderr, "soak: rank %d: more failures not shown\n", me);
}

namespace {

// Stops this process for `seconds`: a child wakes it with SIGCONT, then exits.
void stop_self(double seconds) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    const timespec ts{time_t(seconds), long((seconds - double(time_t(seconds))) * 1e9)};
    nanosleep(&ts, nullptr);
    kill(parent, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  waitpid(child, nullptr, 0);
}

// The victim's plan: which rank, and when, from the job's seed.
void plan_fault(job& J, double* at) {
  if (J.opt.victim == fault::none || J.n < 2) return;
  rng g(mix(J.seed, 0xfa17));
  J.victim = 1 + int(g.below(uint64_t(J.n - 1)));
  *at = J.opt.seconds * (0.2 + 0.5 * g.unit());
  if (J.opt.stop_for == 0) J.opt.stop_for = 35;  // past WEFT_PEER_TIMEOUT's default of 30 s
  if (J.me == 0)
    printf("soak: rank %d will be %s at %.1f s%s\n", J.victim,
           J.opt.victim == fault::kill ? "killed" : "stopped", *at,
           J.opt.victim == fault::stop ? (" for " + std::to_string(J.opt.stop_for) + " s").c_str()
                                       : "");
}

// The main thread while the workers run: progress lines, the fault, a watchdog.
void supervise(job& J, double fault_at) {
  double next_report = J.opt.report_every;
  bool faulted = false;
  const double give_up = J.opt.seconds + 3 * J.opt.drain + J.opt.stop_for + 60;
  while (J.posting_done.load() < J.opt.threads) {
    const double now = J.elapsed();
    if (!faulted && J.me == J.victim && now >= fault_at) {
      faulted = true;
      fflush(stdout);
      if (J.opt.victim == fault::kill) raise(SIGKILL);
      stop_self(J.opt.stop_for);
    }
    if (J.me == 0 && J.opt.report_every > 0 && now >= next_report && now < J.opt.seconds) {
      printf("soak: %.0f of %.0f s\n", now, J.opt.seconds);
      fflush(stdout);
      next_report += J.opt.report_every;
    }
    if (now > give_up) {
      fprintf(stderr, "soak: rank %d: hung: the drain did not end after %.0f s\n", J.me, now);
      _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  job J;
  J.opt = parse(argc, argv);
  weft::g_runtime_init();
  J.me = weft::get_rank_me();
  J.n = weft::get_rank_n();
  J.seed = J.opt.seed ? J.opt.seed : uint64_t(clock::now().time_since_epoch().count()) | 1;
  setup(J);
  double fault_at = 0;
  plan_fault(J, &fault_at);
  if (J.me == 0)
    printf("soak: %d ranks x %d threads (%s devices), %.0f s, seed %" PRIu64 ", inject %s\n", J.n,
           J.opt.threads, J.opt.shared ? "shared" : "dedicated", J.opt.seconds, J.seed,
           name(J.opt.bug));
  post_control_receives(J);
  weft::barrier();

  std::vector<std::unique_ptr<worker>> workers;
  for (int t = 0; t < J.opt.threads; ++t) workers.push_back(std::make_unique<worker>(J, t));
  J.start = clock::now();
  J.deadline = J.start + std::chrono::duration_cast<clock::duration>(
                             std::chrono::duration<double>(J.opt.seconds));
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { w->run(); });
  supervise(J, fault_at);

  std::vector<std::vector<uint64_t>> fins(size_t(J.n), std::vector<uint64_t>(J.fin_words(), 0));
  for (int r = 0; r < J.n; ++r)
    for (auto& w : workers) w->sent_to(r, fins[size_t(r)]);
  exchange_fins(J, fins);
  for (auto& th : threads) th.join();

  tally m = J.total;
  m.errors += J.control_errors.load();
  const bool bad = m.lost || m.duplicated || m.corrupted || m.errors || m.hung;
  const int rc = bad ? 1 : 0;
  printf("soak rank %d: %s: operations %" PRIu64 " verified %" PRIu64 " lost %" PRIu64
         " duplicated %" PRIu64 " corrupted %" PRIu64 " errors %" PRIu64 " hung %" PRIu64
         " with-dead-peer %" PRIu64 "\n",
         J.me, bad ? "FAILED" : "ok", m.operations, m.verified, m.lost, m.duplicated, m.corrupted,
         m.errors, m.hung, m.dead_errors + m.dead_refused);
  fflush(stdout);
  report all = gather(J, m, rc);
  int exit_code = rc;
  if (J.me == 0) {
    const tally& s = all.sum;
    const int expected_missing = J.victim >= 0 ? 1 : 0;  // a stopped one may be expelled
    printf("soak: %d ranks reported (%d never did), %.3f GB moved, %" PRIu64
           " operations with the dead rank ended in errors naming it, %" PRIu64
           " other errors, %" PRIu64 " hung\n",
           all.ranks, all.missing, double(s.bytes) / 1e9, s.dead_errors + s.dead_refused, s.errors,
           s.hung);
    printf("soak: operations %" PRIu64 " verified %" PRIu64 " lost %" PRIu64 " duplicated %" PRIu64
           " corrupted %" PRIu64 "\n",
           s.operations, s.verified, s.lost, s.duplicated, s.corrupted);
    fflush(stdout);
    exit_code = (all.rc || all.missing > expected_missing) ? 1 : 0;
  }
  if (J.opt.victim != fault::none) {
    fflush(stderr);
    _exit(exit_code);  // a dead peer cannot join a barrier or finalize
  }
  weft::barrier();
  weft::deregister_memory(&J.inbox_mr);
  weft::deregister_memory(&J.pattern_mr);
  workers.clear();
  for (auto& cq : J.remote_cqs) weft::free_comp(&cq);
  weft::free_comp(&J.ctrl_cq);
  for (size_t t = 1; t < J.devices.size(); ++t) weft::free_device(&J.devices[t]);
  weft::g_runtime_fina();
  return exit_code;
}
