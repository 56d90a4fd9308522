// SPDX-License-Identifier: BSD-3-Clause
// mechanism: which way large messages moved over shared memory. Rank 0 sends 160 messages
// of 1 MiB to rank 1, four in flight, each with its own pattern, which rank 1 checks; then
// rank 0 reads its device's counters of the bytes each mechanism moved and checks them
// against WEFT_SHM_PUT: pipeline or cma, all of them that way; auto with the test hook
// WEFT_TEST_PIPELINE_DELAY making the pipelined copy slow, at least 4 bytes in 5 by
// cross-memory attach (auto must notice and switch); auto alone, every byte one way or the
// other (either may be the faster one on this machine this minute).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

int scenario_mechanism() {
  using namespace mp;
  const int me = weft::get_rank_me();
  constexpr size_t size = size_t(1) << 20, nmsgs = 160, window = 4;
  const char* put = getenv("WEFT_SHM_PUT");
  const std::string mode = put && *put ? put : "auto";
  const char* delay = getenv("WEFT_TEST_PIPELINE_DELAY");
  const bool slow_pipeline = delay && atoi(delay) > 0;
  std::vector<std::vector<char>> bufs(window, std::vector<char>(size));
  weft::comp_t sync = weft::alloc_sync_x().threshold(window)();
  weft::device_t dev = weft::get_default_device();
  const uint64_t p0 = dev.get_counter(weft::counter_t::bytes_pipelined);
  const uint64_t c0 = dev.get_counter(weft::counter_t::bytes_cross_memory);
  for (size_t m = 0; m < nmsgs; m += window) {
    for (size_t k = 0; k < window; ++k) {
      if (me == 0) fill(bufs[k].data(), size, m + k);
      weft::status_t s = post_until([&] {
        return me == 0 ? weft::post_send(1, bufs[k].data(), size, int(k), sync)
                       : weft::post_recv(0, bufs[k].data(), size, int(k), sync);
      });
      CHECK(s.error.is_posted());
    }
    std::vector<weft::status_t> st(window);
    wait_sync(sync, st.data());
    for (size_t k = 0; k < window; ++k) {
      CHECK(st[k].error.is_done());
      CHECK_EQ(st[k].size, size);
      if (me == 1) CHECK_EQ(verify(bufs[k].data(), size, m + k), SIZE_MAX);
    }
  }
  if (me == 0) {
    const uint64_t p = dev.get_counter(weft::counter_t::bytes_pipelined) - p0;
    const uint64_t c = dev.get_counter(weft::counter_t::bytes_cross_memory) - c0;
    printf("rank 0: WEFT_SHM_PUT=%s%s: %llu bytes pipelined, %llu by cross-memory attach\n",
           mode.c_str(), slow_pipeline ? " (pipeline slowed)" : "",
           static_cast<unsigned long long>(p), static_cast<unsigned long long>(c));
    CHECK_EQ(p + c, uint64_t(size * nmsgs));
    if (mode == "pipeline") CHECK_EQ(c, uint64_t(0));
    if (mode == "cma") CHECK_EQ(p, uint64_t(0));
    if (mode == "auto" && slow_pipeline) CHECK(c >= 4 * p);
  }
  weft::barrier();
  weft::free_comp(&sync);
  return finish("mechanism");
}
