// SPDX-License-Identifier: BSD-3-Clause
// A device's counters: every rank sends its right neighbour active messages of each
// protocol (inject, eager, rendezvous) on a device of their own, then reads that device's
// counters and checks each against what was sent and received. Run with WEFT_STATS=1 to see
// every device's counters printed at finalize as well.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <weft/weft.hpp>

namespace {
struct traffic {
  size_t size;
  uint64_t count;
};
// Sizes for inject (<= 32 bytes), eager (<= packet_size - 32) and rendezvous.
constexpr traffic kinds[] = {{8, 100}, {1000, 100}, {100000, 10}};
}  // namespace

int main() {
  weft::g_runtime_init();
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  const int right = (me + 1) % n;
  // Its own device: the barrier's messages go through the default one.
  weft::device_t dev = weft::alloc_device();
  weft::comp_t arrived = weft::alloc_cq(), sent = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(arrived);
  std::vector<char> buf(100000, 'w');

  uint64_t messages = 0, bytes = 0, pending = 0;
  for (const traffic& t : kinds) {
    for (uint64_t i = 0; i < t.count; ++i) {
      weft::status_t s;
      while (
          (s = weft::post_am_x(right, buf.data(), t.size, sent, rc).device(dev)()).error.is_retry())
        weft::progress_x().device(dev)();
      if (s.error.is_posted()) ++pending;
    }
    messages += t.count;
    bytes += t.size * t.count;
  }
  uint64_t got = 0, got_bytes = 0;
  while (got < messages || pending > 0) {
    weft::progress_x().device(dev)();
    weft::status_t s = weft::cq_pop(arrived);
    if (s.error.is_done()) {
      ++got;
      got_bytes += s.size;
      std::free(s.buf);
    }
    if (weft::cq_pop(sent).error.is_done()) --pending;
  }
  weft::barrier();  // every rank's traffic is over: the counters are final

  using weft::counter_t;
  const struct {
    counter_t c;
    uint64_t want;
  } checks[] = {
      {counter_t::sent_inject, kinds[0].count},
      {counter_t::sent_eager, kinds[1].count},
      {counter_t::sent_rendezvous, kinds[2].count},
      {counter_t::bytes_sent, bytes},
      {counter_t::received_eager, kinds[0].count + kinds[1].count},
      {counter_t::received_rendezvous, kinds[2].count},
      {counter_t::bytes_received, got_bytes},
      // A rendezvous message is taken after a clear-to-send, or (shared memory) with its
      // data sent ahead of one.
      {counter_t::handshakes, kinds[2].count - dev.get_counter(counter_t::received_ahead)},
      {counter_t::peers_dead, 0},
  };
  int bad = 0;
  for (const auto& k : checks) {
    const uint64_t v = dev.get_counter(k.c);
    if (v != k.want) {
      fprintf(stderr, "rank %d: counter %s = %llu, expected %llu\n", me,
              weft::get_counter_name(k.c), (unsigned long long)v, (unsigned long long)k.want);
      ++bad;
    }
  }
  if (got_bytes != bytes) ++bad;
  printf("rank %d: counters: %llu messages, %llu bytes, %llu retries; %s\n", me,
         (unsigned long long)got, (unsigned long long)got_bytes,
         (unsigned long long)dev.get_counter(counter_t::retries),
         bad ? "MISMATCH" : "all 10 checks passed");
  weft::free_device(&dev);
  weft::free_comp(&arrived);
  weft::free_comp(&sent);
  weft::g_runtime_fina();
  return bad ? 1 : 0;
}
