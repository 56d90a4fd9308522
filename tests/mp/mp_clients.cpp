// SPDX-License-Identifier: BSD-3-Clause
// Scenarios of what a task runtime does with the interface (issue 20):
//   no_defaults  every rank allocates a runtime without defaults, then its own pool, device
//                and engine: device 0 of each rank talks to device 0 of the others (an
//                active message and a tagged send to the right neighbour, a barrier on the
//                device), and the global runtime's traffic is untouched.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

int scenario_no_defaults() {
  using namespace mp;
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  weft::runtime_t rt = weft::alloc_runtime_x().alloc_defaults(false)();
  weft::packet_pool_t pool = weft::alloc_packet_pool_x().runtime(rt)();
  weft::device_t d = weft::alloc_device_x().runtime(rt).packet_pool(pool)();
  CHECK_EQ(d.get_attr_index(), 0);
  weft::matching_engine_t e = weft::alloc_matching_engine_x().runtime(rt)();
  weft::comp_t cq = weft::alloc_cq_x().runtime(rt)();
  weft::rcomp_t rc = weft::register_rcomp_x(cq).runtime(rt)();
  weft::comp_t sync = weft::alloc_sync_x().runtime(rt)();
  weft::barrier_x().runtime(rt).device(d)();  // everyone registered before the first message
  int am = 1000 + me, sent = 2000 + me, got = -1;
  post_until(
      [&] { return weft::post_am_x(right, &am, sizeof(am), weft::comp_t{}, rc).device(d)(); }, d);
  weft::status_t r =
      weft::post_recv_x(left, &got, sizeof(got), 5, sync).device(d).matching_engine(e)();
  post_until(
      [&] {
        return weft::post_send_x(right, &sent, sizeof(sent), 5, weft::comp_t{})
            .device(d)
            .matching_engine(e)();
      },
      d);
  deadline dl;
  weft::status_t s;
  while (!(s = weft::cq_pop(cq)).error.is_done()) {
    weft::progress_x().device(d)();
    dl.check("the active message on device 0");
  }
  CHECK_EQ(*static_cast<int*>(s.buf), 1000 + left);
  CHECK_EQ(s.rank, left);
  std::free(s.buf);
  if (r.error.is_posted())
    while (!weft::sync_test(sync, &r)) {
      weft::progress_x().device(d)();
      dl.check("the send on device 0");
    }
  CHECK(r.error.is_done());
  CHECK_EQ(got, 2000 + left);
  weft::barrier_x().runtime(rt).device(d)();
  weft::free_comp(&sync);
  weft::free_comp(&cq);
  weft::free_matching_engine(&e);
  weft::free_device(&d);
  weft::free_packet_pool(&pool);
  weft::free_runtime(&rt);
  weft::barrier();  // the global runtime still works
  return finish("no_defaults");
}

//   loaded       a job loads only the libraries its backend and bootstrap use: a weftrun
//                shared-memory job maps neither PMIx nor libfabric nor UCX (each cost
//                start-up time when linked outright); one on WEFT_BACKEND=ofi maps
//                libfabric and still not UCX or PMIx.
namespace {
bool mapped(const char* name) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) mp::die("cannot read /proc/self/maps");
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, name) != nullptr;
  fclose(f);
  return found;
}
}  // namespace

int scenario_loaded() {
  using namespace mp;
  const char* be = getenv("WEFT_BACKEND");
  const bool ofi = be && !strcmp(be, "ofi");
  weft::barrier();  // the backend is up, its libraries (if any) loaded
  CHECK_EQ(mapped("/libfabric.so"), ofi);
  CHECK(!mapped("/libucp.so") && !mapped("/libuct.so") && !mapped("/libucs.so"));
  CHECK(!mapped("/libpmix.so"));
  if (!ofi) CHECK(!mapped("/libinfinipath.so"));  // a libfabric provider's own library
  printf("rank %d: libfabric %s, UCX and PMIx not loaded\n", weft::get_rank_me(),
         ofi ? "loaded" : "not loaded");
  return finish("loaded");
}
