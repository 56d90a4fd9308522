// SPDX-License-Identifier: BSD-3-Clause
// The PaRSEC pattern of bench/mpix_bench.c on Weft: rank 0 keeps N receives outstanding
// (one per tag), each completed by a continuation that posts its receive again with a new
// continuation; the whole progress loop is cont_request_test. Rank 1 sends rounds of N
// 8-byte messages, each once rank 0 says it completed the previous round. Rank 0 prints
// the cost per completed receive.
//   weftrun -n 2 bench_cont_pattern [--n N] [--msgs M] [--reps R]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <weft/weft.hpp>

namespace {

constexpr weft::tag_t ready_tag = 1 << 20;

struct slot {
  uint64_t buf = 0;
  weft::tag_t tag = 0;
  weft::comp_t cont;
  long* done = nullptr;
  weft::comp_t cr;
};

void on_recv(weft::status_t* st, size_t, void* data);

// Posts the slot's receive with a new continuation; a receive that matched at once (an
// unexpected message) counts and is posted again.
void post(slot* s) {
  for (;;) {
    s->cont = weft::alloc_cont_x(s->cr, on_recv, s)();
    weft::status_t r;
    do r = weft::post_recv(1, &s->buf, 8, s->tag, s->cont);
    while (r.error.is_retry() && (weft::progress(), true));
    if (weft::arm_cont(s->cont, r.error.is_posted() ? 1 : 0).is_posted()) return;
    ++*s->done;
  }
}

void on_recv(weft::status_t*, size_t, void* data) {
  auto* s = static_cast<slot*>(data);
  if (s->tag & (weft::tag_t(1) << 30)) return;  // cancelled at the end of the run
  ++*s->done;
  post(s);
}

double receiver(int n, long msgs) {
  weft::comp_t cr = weft::alloc_cont_request();
  std::vector<slot> slots(static_cast<size_t>(n));
  long done = 0;
  for (int i = 0; i < n; ++i) {
    slots[size_t(i)].tag = weft::tag_t(i);
    slots[size_t(i)].done = &done;
    slots[size_t(i)].cr = cr;
    post(&slots[size_t(i)]);
  }
  weft::barrier();
  const auto t0 = std::chrono::steady_clock::now();
  long round_end = n;
  char ready = 0;
  while (done < msgs) {
    weft::cont_request_test(cr);
    if (done >= round_end && done < msgs) {
      while (weft::post_send(1, &ready, 0, ready_tag, weft::comp_t{}).error.is_retry())
        weft::progress();
      round_end += n;
    }
  }
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  weft::barrier();
  for (auto& s : slots) {  // the outstanding receives: cancelled, their continuations end
    s.tag |= weft::tag_t(1) << 30;
    weft::cancel_recv(1, &s.buf, s.tag & ~(weft::tag_t(1) << 30), s.cont);
  }
  weft::cont_request_wait(cr);
  weft::free_comp(&cr);
  return t / double(msgs) * 1e9;
}

void sender(int n, long msgs) {
  uint64_t v = 1;
  char ready;
  weft::comp_t s = weft::alloc_sync();
  weft::barrier();
  for (long sent = 0; sent < msgs;) {
    for (int i = 0; i < n && sent < msgs; ++i, ++sent)
      while (weft::post_send(0, &v, 8, weft::tag_t(i), weft::comp_t{}).error.is_retry())
        weft::progress();
    if (sent < msgs && weft::post_recv(0, &ready, 0, ready_tag, s).error.is_posted())
      while (!weft::sync_test(s, nullptr)) weft::progress();
  }
  weft::free_comp(&s);
  weft::barrier();
}

}  // namespace

int main(int argc, char** argv) {
  int n = 30, reps = 3;
  long msgs = 300000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n"))
      n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--msgs"))
      msgs = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
  }
  weft::g_runtime_init();
  if (weft::get_rank_n() != 2 || n < 1 || n > (1 << 20) || msgs < n || reps < 1) {
    std::fprintf(stderr, "usage: weftrun -n 2 bench_cont_pattern [--n N] [--msgs M] [--reps R]\n");
    return 2;
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    if (weft::get_rank_me() == 0) {
      const double ns = receiver(n, msgs);
      best = ns < best ? ns : best;
    } else {
      sender(n, msgs);
    }
  }
  if (weft::get_rank_me() == 0)
    std::printf(
        "RESULT system=weft api=cont mode=process threads=1 resources=n%d workload=completion "
        "size=8 value=%.1f unit=ns\n",
        n, best);
  weft::g_runtime_fina();
  return 0;
}
