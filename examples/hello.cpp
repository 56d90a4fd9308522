// SPDX-License-Identifier: BSD-3-Clause
// Every rank sends a greeting to every rank (itself included) as an active message.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <weft/weft.hpp>

int main() {
  weft::g_runtime_init();
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rcomp = weft::register_rcomp(cq);

  char msg[64];
  snprintf(msg, sizeof(msg), "hello from rank %d of %d", me, n);
  for (int peer = 0; peer < n; ++peer) {
    // Small messages complete at once (done); retry means the peer's queue is full.
    while (weft::post_am(peer, msg, strlen(msg) + 1, weft::comp_t{}, rcomp).error.is_retry())
      weft::progress();
  }
  for (int got = 0; got < n;) {
    weft::progress();
    weft::status_t s = weft::cq_pop(cq);
    if (!s.error.is_done()) continue;
    printf("rank %d received \"%s\" (rank %d, %zu bytes)\n", me, static_cast<char*>(s.buf), s.rank,
           s.size);
    std::free(s.buf);
    ++got;
  }
  weft::barrier();
  weft::free_comp(&cq);
  weft::g_runtime_fina();
  return 0;
}
