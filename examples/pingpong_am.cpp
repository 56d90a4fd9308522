// SPDX-License-Identifier: BSD-3-Clause
// Active-message ping-pong between ranks 0 and 1: prints one-way latency and message rate
// for 8-byte messages, and send/receive bandwidth for larger ones. Every message carries
// its sequence number and every byte received is checked; each rank ends with a line
// saying how much it checked.
//   weftrun -n 2 pingpong_am [iterations] [--bw]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <weft/weft.hpp>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

long g_checked = 0, g_wrong = 0;

void send_am(int peer, uint64_t value, weft::rcomp_t rcomp) {
  while (weft::post_am(peer, &value, sizeof(value), weft::comp_t{}, rcomp).error.is_retry())
    weft::progress();
}

// The next active message's value (its 8 bytes), or ~0 for a wrong one (counted).
uint64_t wait_am(weft::comp_t cq) {
  for (;;) {
    weft::status_t s = weft::cq_pop(cq);
    if (s.error.is_retry()) {
      weft::progress();
      continue;
    }
    uint64_t v = ~uint64_t(0);
    if (s.error.is_done() && s.size == sizeof(v))
      memcpy(&v, s.buf, sizeof(v));
    else
      ++g_wrong;
    std::free(s.buf);
    ++g_checked;
    return v;
  }
}

void expect(bool ok) {
  if (!ok) ++g_wrong;
}

}  // namespace

int main(int argc, char** argv) {
  long iters = argc > 1 ? atol(argv[1]) : 100000;
  bool bw = argc > 2 && !strcmp(argv[2], "--bw");
  weft::g_runtime_init();
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  if (n < 2) {
    if (me == 0) fprintf(stderr, "pingpong_am needs 2 ranks: weftrun -n 2 %s\n", argv[0]);
    weft::g_runtime_fina();
    return 1;
  }
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rcomp = weft::register_rcomp(cq);
  weft::barrier();
  const int peer = 1 - me;
  uint64_t bytes_checked = 0;

  if (me < 2) {
    // Latency: one-way = round trip / 2.
    const long warm = iters / 10;
    double t0 = 0;
    for (long i = -warm; i < iters; ++i) {
      if (i == 0) t0 = now_s();
      const uint64_t seq = uint64_t(i + warm);
      if (me == 0) {
        send_am(peer, seq, rcomp);
        expect(wait_am(cq) == seq);
      } else {
        expect(wait_am(cq) == seq);
        send_am(peer, seq, rcomp);
      }
    }
    double lat = (now_s() - t0) / iters / 2;
    // Message rate: windows of 64 messages, each closed by an acknowledgment.
    const int window = 64;
    const long rounds = iters / window;
    t0 = now_s();
    for (long r = 0; r < rounds; ++r) {
      const uint64_t first = uint64_t(r) * window;
      if (me == 0) {
        for (int w = 0; w < window; ++w) send_am(peer, first + uint64_t(w), rcomp);
        expect(wait_am(cq) == first);
      } else {
        // Each of the window's numbers once, in any order.
        uint64_t sum = 0;
        bool in_range = true;
        for (int w = 0; w < window; ++w) {
          const uint64_t v = wait_am(cq);
          in_range &= v >= first && v < first + window;
          sum += v;
        }
        expect(in_range && sum == first * window + window * (window - 1) / 2);
        send_am(peer, first, rcomp);
      }
    }
    double rate = double(rounds * window) / (now_s() - t0);
    if (me == 0) {
      printf("8-byte active messages: one-way latency %.3f us, message rate %.2f M/s\n", lat * 1e6,
             rate / 1e6);
      fflush(stdout);
    }
  }

  if (bw && me < 2) {
    weft::comp_t sync = weft::alloc_sync_x().threshold(16)();
    for (size_t size :
         {size_t(8), size_t(1024), size_t(8192), size_t(65536), size_t(1) << 20, size_t(4) << 20}) {
      std::vector<char> buf(size * 16, char(me + 1));
      // 256 MiB a size, at most 20000 rounds: small sizes are bound by the rounds' round
      // trips, and the test suite runs this beside other jobs on two cores.
      const long reps = std::clamp<long>(long((size_t(256) << 20) / (size * 16)), 10, 20000);
      double t0 = 0;
      for (long r = -2; r < reps; ++r) {
        if (r == 0) t0 = now_s();
        for (int w = 0; w < 16; ++w) {
          char* p = buf.data() + size * size_t(w);
          weft::status_t s;
          do {
            s = me == 0
                    ? weft::post_send_x(peer, p, size, weft::tag_t(w), sync).allow_done(false)()
                    : weft::post_recv_x(peer, p, size, weft::tag_t(w), sync).allow_done(false)();
            if (s.error.is_retry()) weft::progress();
          } while (s.error.is_retry());
        }
        weft::sync_wait(sync, nullptr);
        if (me == 0)
          expect(wait_am(cq) == uint64_t(r + 2));
        else
          send_am(peer, uint64_t(r + 2), rcomp);
      }
      if (me == 1) {  // the last round's data, from rank 0's buffers
        for (char c : buf) expect(c == 1);
        bytes_checked += buf.size();
      }
      double gbps = double(size) * 16 * reps / (now_s() - t0) / 1e9;
      if (me == 0) {
        printf("send/recv bandwidth %9zu B: %8.3f GB/s\n", size, gbps);
        fflush(stdout);
      }
    }
    weft::free_comp(&sync);
  }
  weft::barrier();
  weft::free_comp(&cq);
  weft::g_runtime_fina();
  if (g_wrong) {
    fprintf(stderr, "rank %d: pingpong_am: %ld wrong messages or bytes\n", me, g_wrong);
    return 1;
  }
  printf("rank %d: pingpong_am: %ld messages and %llu bytes checked, all correct\n", me, g_checked,
         static_cast<unsigned long long>(bytes_checked));
  return 0;
}
