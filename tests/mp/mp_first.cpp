// SPDX-License-Identifier: BSD-3-Clause
// first_transfer: a device's first large message takes no page faults in the shared-memory
// staging slots (they are mapped when the device is created, not by that message). Each
// of two ranks counts its minor page faults across a 1 MiB ping-pong through the pipeline
// (the user buffers touched beforehand) and checks the count is a small fraction of the
// 128 pages the staging slots would fault in.
#include <sys/resource.h>

#include <cstdio>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

namespace {
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
}  // namespace

int scenario_first_transfer() {
  using namespace mp;
  const int me = weft::get_rank_me(), peer = 1 - me;
  const size_t n = size_t(1) << 20;
  std::vector<char> out(n), in(n);
  fill(out.data(), n, size_t(me));
  fill(in.data(), n, 99);  // touched: only Weft's own pages may fault below
  weft::comp_t sync = weft::alloc_sync();
  weft::barrier();
  const long before = minor_faults();
  auto wait = [&](weft::status_t s) {
    if (s.error.is_posted()) weft::sync_wait(sync, nullptr);
  };
  if (me == 0) {
    wait(post_until([&] { return weft::post_send(peer, out.data(), n, 1, sync); }));
    wait(post_until([&] { return weft::post_recv(peer, in.data(), n, 2, sync); }));
  } else {
    wait(post_until([&] { return weft::post_recv(peer, in.data(), n, 1, sync); }));
    wait(post_until([&] { return weft::post_send(peer, out.data(), n, 2, sync); }));
  }
  const long faults = minor_faults() - before;
  printf("rank %d: first 1 MiB transfer each way: %ld minor page faults\n", me, faults);
  CHECK_EQ(verify(in.data(), n, size_t(peer)), SIZE_MAX);
  CHECK(faults < 32);
  weft::free_comp(&sync);
  return finish("first_transfer");
}
