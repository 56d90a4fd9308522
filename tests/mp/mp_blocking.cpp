// SPDX-License-Identifier: BSD-3-Clause
// blocking: progress_x().block_us() really sleeps until a message arrives. Rank 0 waits for
// an active message, calling progress with a 2-second block each time; the sender sends it
// 300 ms after a barrier. Rank 0 checks the message, that it waited (at least 250 ms,
// counted from before the barrier) and was woken by the message (within 2 s, long before
// its block ran out), and counts how often progress returned meanwhile: with a wait object
// (the shm futex or doorbell socket, libfabric's wait fd, UCX's event fd) a handful of times; a
// backend that can only nap (MP_TEST_MAY_NAP=1 in the test's environment: libfabric's shm
// provider has no wait fd) is allowed thousands.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

namespace {

// Rank `from` sends one active message 300 ms after a barrier; rank 0 sleeps for it.
void wake_once(int from, weft::comp_t cq, weft::rcomp_t rc, bool may_nap) {
  using namespace mp;
  const int me = weft::get_rank_me();
  // Rank 0's clock starts before it enters the barrier: the sender cannot leave the barrier
  // before rank 0 has entered it, so the message is sent at least 300 ms after t0 however
  // far apart the ranks leave the barrier on a loaded host (CI once saw 60 ms).
  const double t0 = now_s();
  weft::barrier();
  if (me == from) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int v = 4200 + from;
    post_until([&] { return weft::post_am(0, &v, sizeof(v), weft::comp_t{}, rc); });
  } else if (me == 0) {
    long calls = 0;
    weft::status_t s;
    do {
      weft::progress_x().block_us(2000000)();
      ++calls;
      s = weft::cq_pop(cq);
    } while (s.error.is_retry() && now_s() - t0 < 20);
    const double waited = now_s() - t0;
    CHECK(s.error.is_done());
    CHECK_EQ(s.size, sizeof(int));
    if (s.error.is_done()) CHECK_EQ(*static_cast<int*>(s.buf), 4200 + from);
    std::free(s.buf);
    printf("rank 0: woken by rank %d after %.3f s, %ld returns from blocking progress%s\n", from,
           waited, calls, may_nap ? " (naps allowed)" : "");
    CHECK(waited >= 0.25);
    CHECK(waited < 2.0);
    if (!may_nap) CHECK(calls <= 64);
  }
}

}  // namespace

// Woken by rank 1 and by the last rank (in a mixed job of two ranks per host: one through
// shared memory's doorbell, one through the network's descriptor).
int scenario_blocking() {
  using namespace mp;
  const int n = weft::get_rank_n();
  const char* naps = getenv("MP_TEST_MAY_NAP");
  const bool may_nap = naps && !strcmp(naps, "1");
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  wake_once(1, cq, rc, may_nap);
  if (n > 2) wake_once(n - 1, cq, rc, may_nap);
  weft::barrier();
  weft::deregister_rcomp(rc);
  weft::free_comp(&cq);
  return finish("blocking");
}
