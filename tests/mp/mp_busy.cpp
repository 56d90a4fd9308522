// SPDX-License-Identifier: BSD-3-Clause
// busy_target: rendezvous active messages to a target that computes between its progress
// calls (docs/shm.md, "a target that computes"). Rank 0 sends 64 KiB active messages to
// rank 1, 16 in flight. First 128 while rank 1 progresses all the time, so that
// WEFT_SHM_PUT=auto has a figure for each mechanism; then 256 while rank 1 progresses once
// every 2 ms and spins between. Rank 1 checks every message's bytes. Rank 0 checks its
// counters: with auto, if the pipelined copy carried any of the second batch, the transfers
// that found every channel held by the stalled target went around them by cross-memory
// attach (channels_bypassed); forced to one mechanism (WEFT_SHM_PUT=pipeline or cma),
// never.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

namespace {

constexpr size_t kSize = 64 << 10, kWindow = 16, kWarm = 128, kBusy = 256;

// Rank 0: sends messages [first, first + n), at most kWindow in flight.
void send_batch(weft::comp_t cq, weft::rcomp_t rc, size_t first, size_t n) {
  using namespace mp;
  std::vector<std::vector<char>> bufs(kWindow, std::vector<char>(kSize));
  std::vector<size_t> free_slots;
  for (size_t k = 0; k < kWindow; ++k) free_slots.push_back(k);
  size_t done = 0;
  for (size_t i = first; i < first + n || done < n;) {
    if (i < first + n && !free_slots.empty()) {
      const size_t k = free_slots.back();
      free_slots.pop_back();
      std::memcpy(bufs[k].data(), &i, sizeof(i));
      fill(bufs[k].data() + 8, kSize - 8, i);
      weft::status_t s = post_until([&] {
        return weft::post_am_x(1, bufs[k].data(), kSize, cq, rc).user_context(&bufs[k])();
      });
      CHECK(s.error.is_posted());
      ++i;
      continue;
    }
    weft::status_t s = wait_cq(cq);
    CHECK(s.error.is_done());
    free_slots.push_back(size_t(static_cast<std::vector<char>*>(s.user_context) - bufs.data()));
    ++done;
  }
}

// Rank 1: takes what arrived, checking each message (from rank 0, whole, each index once:
// `seen`); returns how many.
size_t take(weft::comp_t cq, std::vector<bool>& seen) {
  using namespace mp;
  size_t n = 0;
  for (weft::status_t s; !(s = weft::cq_pop(cq)).error.is_retry(); ++n) {
    CHECK(s.error.is_done());
    CHECK_EQ(s.rank, 0);
    CHECK_EQ(s.size, kSize);
    size_t idx = 0;
    std::memcpy(&idx, s.buf, sizeof(idx));
    CHECK(idx < seen.size() && !seen[idx]);
    if (idx < seen.size()) seen[idx] = true;
    CHECK_EQ(verify(static_cast<char*>(s.buf) + 8, kSize - 8, idx), SIZE_MAX);
    std::free(s.buf);
  }
  return n;
}

void spin_for(double seconds) {  // computing: no progress
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace

int scenario_busy_target() {
  using namespace mp;
  const int me = weft::get_rank_me();
  const char* put = getenv("WEFT_SHM_PUT");
  const std::string mode = put && *put ? put : "auto";
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::device_t dev = weft::get_default_device();
  std::vector<bool> seen(kWarm + kBusy);
  if (me == 0) {
    send_batch(cq, rc, 0, kWarm);
  } else {
    deadline d;
    for (size_t got = 0; got < kWarm; got += take(cq, seen)) {
      weft::progress();
      d.check("the first batch");
    }
  }
  weft::barrier();
  const uint64_t p0 = dev.get_counter(weft::counter_t::bytes_pipelined);
  const uint64_t c0 = dev.get_counter(weft::counter_t::bytes_cross_memory);
  const uint64_t b0 = dev.get_counter(weft::counter_t::channels_bypassed);
  if (me == 0) {
    send_batch(cq, rc, kWarm, kBusy);
  } else {
    deadline d;
    for (size_t got = 0; got < kBusy; got += take(cq, seen)) {
      weft::progress();
      spin_for(0.002);
      d.check("the second batch");
    }
  }
  weft::barrier();
  if (me == 0) {
    const uint64_t p = dev.get_counter(weft::counter_t::bytes_pipelined) - p0;
    const uint64_t c = dev.get_counter(weft::counter_t::bytes_cross_memory) - c0;
    const uint64_t b = dev.get_counter(weft::counter_t::channels_bypassed) - b0;
    printf(
        "rank 0: WEFT_SHM_PUT=%s, target busy: %llu bytes pipelined, %llu by cross-memory "
        "attach, %llu transfers around the channels\n",
        mode.c_str(), static_cast<unsigned long long>(p), static_cast<unsigned long long>(c),
        static_cast<unsigned long long>(b));
    CHECK_EQ(p + c, uint64_t(kSize * kBusy));
    if (mode == "auto") CHECK(b > 0 || p == 0);
    if (mode != "auto") CHECK_EQ(b, uint64_t(0));
    CHECK(b * kSize <= c);
  }
  weft::free_comp(&cq);
  return finish("busy_target");
}
