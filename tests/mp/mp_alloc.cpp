// SPDX-License-Identifier: BSD-3-Clause
// alloc_memory's regions: puts and gets into a peer's allocation (over shared memory,
// copied through the initiator's mapping of it), allocations made and freed more times
// than a peer keeps mappings (so that mappings of freed regions are undone and their slots
// reused), four threads racing to map a region first, a stale handle refused after
// free_memory, and the misuses of free_memory, deregister_memory and alloc_memory.
// `alloc_mapped` also checks, by the device's counters, that every byte went through a
// mapping and none by cross-memory attach.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

// Round `round`: every rank allocates a region and hands it to the previous rank, which
// puts into its first half and gets its second half (filled by the owner). Returns the
// bytes this rank moved.
uint64_t one_round(int round, int to, int from, weft::comp_t sync) {
  const int me = weft::get_rank_me();
  const size_t size = 65536 + size_t(round) * 4096, half = size / 2;
  weft::mr_t mr = weft::alloc_memory(size);
  auto* base = static_cast<unsigned char*>(mr.get_attr_base());
  CHECK(std::all_of(base, base + size, [](unsigned char c) { return c == 0; }));  // zeroed
  fill(base + half, size - half, size_t(1000 + round * 10 + me));
  const weft::rmr_t theirs = swap_rmr(to, from, weft::get_rmr(mr));
  weft::barrier();
  std::vector<unsigned char> out(half), in(size - half, 0x77);
  fill(out.data(), half, size_t(round * 10 + me));
  weft::status_t s =
      post_until([&] { return weft::post_put(to, out.data(), half, sync, 0, theirs); });
  if (!s.error.is_done()) wait_sync(sync, &s);
  CHECK(s.error.is_done());
  s = post_until([&] { return weft::post_get(to, in.data(), in.size(), sync, half, theirs); });
  if (!s.error.is_done()) wait_sync(sync, &s);
  CHECK(s.error.is_done());
  CHECK_EQ(verify(in.data(), in.size(), size_t(1000 + round * 10 + to)), SIZE_MAX);
  weft::barrier();  // every put into this rank's region has completed
  CHECK_EQ(verify(base, half, size_t(round * 10 + from)), SIZE_MAX);
  weft::barrier();  // nobody reads this rank's region any more
  weft::free_memory(&mr);
  CHECK(mr.is_empty());
  return size;
}

// Four threads put into a fresh region of the next rank at once, so that they race to map
// it first. Returns the bytes this rank moved.
uint64_t threads_round(int to, int from) {
  constexpr int nthreads = 4, nputs = 16;
  constexpr size_t chunk = 8192;
  const int me = weft::get_rank_me();
  weft::mr_t mr = weft::alloc_memory(nthreads * nputs * chunk);
  const weft::rmr_t theirs = swap_rmr(to, from, weft::get_rmr(mr));
  weft::barrier();
  std::vector<int> done(nthreads, 0);  // puts that completed done, per thread
  std::vector<std::thread> ts;
  for (int t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      weft::comp_t sync = weft::alloc_sync();
      std::vector<unsigned char> buf(chunk);
      for (int i = 0; i < nputs; ++i) {
        const size_t at = size_t(t * nputs + i);
        fill(buf.data(), chunk, 7000 + size_t(me) * 100 + at);
        weft::status_t s = post_until(
            [&] { return weft::post_put(to, buf.data(), chunk, sync, at * chunk, theirs); });
        if (!s.error.is_done()) wait_sync(sync, &s);
        done[size_t(t)] += s.error.is_done();
      }
      weft::free_comp(&sync);
    });
  for (auto& t : ts) t.join();
  for (int d : done) CHECK_EQ(d, nputs);
  weft::barrier();
  const auto* base = static_cast<const unsigned char*>(mr.get_attr_base());
  for (size_t at = 0; at < size_t(nthreads * nputs); ++at)
    CHECK_EQ(verify(base + at * chunk, chunk, 7000 + size_t(from) * 100 + at), SIZE_MAX);
  weft::barrier();
  weft::free_memory(&mr);
  return nthreads * nputs * chunk;
}

// After free_memory, a put or a get naming the region is refused, whether at posting or by
// the access itself.
void stale_refused(int to, int from, weft::comp_t sync) {
  weft::mr_t mr = weft::alloc_memory(4096);
  const weft::rmr_t theirs = swap_rmr(to, from, weft::get_rmr(mr));
  weft::barrier();
  weft::free_memory(&mr);
  weft::barrier();
  char buf[64];
  fill(buf, sizeof(buf), 5);
  for (bool put : {true, false}) {
    weft::status_t s;
    const std::string e = error_of([&] {
      s = post_until([&] {
        return put ? weft::post_put(to, buf, 64, sync, 0, theirs)
                   : weft::post_get(to, buf, 64, sync, 0, theirs);
      });
    });
    if (e.empty() && !s.error.is_done()) wait_sync(sync, &s);
    const bool refused = !e.empty() ? contains(e, "deregistered")
                                    : s.error.errorcode == weft::errorcode_t::error_region;
    if (!refused)
      fprintf(stderr, "rank %d: stale %s: \"%s\"\n", weft::get_rank_me(), put ? "put" : "get",
              e.c_str());
    CHECK(refused);
  }
  weft::barrier();
}

void misuse_refused() {
  std::vector<char> own(4096);
  weft::mr_t reg = weft::register_memory(own.data(), own.size());
  std::string e = error_of([&] { weft::free_memory(&reg); });
  CHECK(contains(e, "free_memory") && contains(e, "register_memory"));
  CHECK(!reg.is_empty());
  weft::deregister_memory(&reg);
  weft::mr_t mr = weft::alloc_memory(100);
  e = error_of([&] { weft::deregister_memory(&mr); });
  CHECK(contains(e, "deregister_memory") && contains(e, "alloc_memory"));
  CHECK(!mr.is_empty());
  weft::free_memory(&mr);
  e = error_of([] { weft::alloc_memory(0); });
  CHECK(contains(e, "alloc_memory") && contains(e, "size"));
  weft::mr_t none;
  e = error_of([&] { weft::free_memory(&none); });
  CHECK(contains(e, "free_memory"));
}

int run_alloc(bool mapped, const char* name) {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int to = (me + 1) % n, from = (me - 1 + n) % n;
  weft::device_t dev = weft::get_default_device();
  const uint64_t m0 = dev.get_counter(weft::counter_t::bytes_mapped);
  const uint64_t c0 = dev.get_counter(weft::counter_t::bytes_cross_memory);
  weft::comp_t sync = weft::alloc_sync();
  uint64_t moved = 0;
  for (int round = 0; round < 40; ++round) moved += one_round(round, to, from, sync);
  moved += threads_round(to, from);
  if (mapped) {  // more rounds than a peer has mapping slots (32): none went around
    CHECK_EQ(dev.get_counter(weft::counter_t::bytes_mapped) - m0, moved);
    CHECK_EQ(dev.get_counter(weft::counter_t::bytes_cross_memory) - c0, 0u);
  }
  stale_refused(to, from, sync);
  misuse_refused();
  weft::free_comp(&sync);
  return finish(name);
}

}  // namespace

int scenario_alloc() {
  return run_alloc(false, "alloc");
}

int scenario_alloc_mapped() {
  return run_alloc(true, "alloc_mapped");
}
