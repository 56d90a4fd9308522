// SPDX-License-Identifier: BSD-3-Clause
// Per-operation cost of continuations against Weft's plain handler completion: windows of
// 8-byte receives from the same process (each matched by an eager send, so every receive
// returns posted and is completed by progress), completed
//   handler: one handler object for all of them (the callback counts);
//   cont_<g>: one continuation per g receives (g = 1, 8, 64), allocated, posted with, armed,
//     run from progress, and handed back to its request;
// and the same with no message at all ("signal"): comp_signal on a handler against a
// continuation of 1/8/64 signals, the completion machinery alone. Alone (loopback) or
// under weftrun -n 2 (process: rank 1 sends each window once rank 0 has posted its
// receives). Rank 0 prints RESULT lines (ns per operation) and the ratio to the handler.
//   bench_cont [--ops N] [--window W] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <weft/weft.hpp>

namespace {

struct config {
  size_t ops = 200000, window = 256;
  int reps = 5;
};

size_t done_ops = 0;  // the callbacks' count (one thread runs them all)

void on_cont(weft::status_t*, size_t n, void*) {
  done_ops += n;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr weft::tag_t go_tag = 1 << 20;

// One window of receives and their sends; group 0: the handler `h`, else continuations
// of `group` receives each. With two ranks the sends come from rank 1, once rank 0 has
// posted the window's receives and said so.
void window(size_t w, size_t group, weft::comp_t h, weft::comp_t cr, std::vector<uint64_t>& in,
            const std::vector<uint64_t>& out, int peer) {
  const size_t start = done_ops;
  for (size_t i = 0; i < w;) {
    const size_t g = group ? std::min(group, w - i) : 1;
    weft::comp_t c = group ? weft::alloc_cont_x(cr, on_cont, nullptr)() : h;
    size_t posted = 0;
    for (size_t k = 0; k < g; ++k, ++i)
      posted += weft::post_recv(peer, &in[i], 8, weft::tag_t(i), c).error.is_posted();
    if (group && weft::arm_cont(c, posted).is_done()) done_ops += g;
  }
  if (peer == 0) {
    for (size_t i = 0; i < w; ++i)
      while (weft::post_send(0, const_cast<uint64_t*>(&out[i]), 8, weft::tag_t(i), weft::comp_t{})
                 .error.is_retry())
        weft::progress();
  } else {
    uint64_t go = w;
    while (weft::post_send(peer, &go, 8, go_tag, weft::comp_t{}).error.is_retry()) weft::progress();
  }
  while (done_ops - start < w) weft::progress();
}

// Rank 1's side of a two-rank run: a window of sends each time rank 0 says go.
void sender(size_t windows, size_t w) {
  std::vector<uint64_t> out(w, 42);
  weft::comp_t s = weft::alloc_sync();
  for (size_t k = 0; k < windows; ++k) {
    uint64_t go = 0;
    if (weft::post_recv(0, &go, 8, go_tag, s).error.is_posted())
      while (!weft::sync_test(s, nullptr)) weft::progress();
    for (size_t i = 0; i < w; ++i)
      while (weft::post_send(0, &out[i], 8, weft::tag_t(i), weft::comp_t{}).error.is_retry())
        weft::progress();
  }
  weft::free_comp(&s);
}

double messages(const config& c, size_t group, int peer) {
  weft::comp_t h = weft::alloc_handler([](weft::status_t) { ++done_ops; });
  weft::comp_t cr = weft::alloc_cont_request();
  std::vector<uint64_t> in(c.window), out(c.window, 42);
  double best = 1e30;
  for (int r = -1; r < c.reps; ++r) {  // r = -1: warm-up
    const double t0 = now();
    for (size_t done = 0; done < c.ops; done += c.window)
      window(c.window, group, h, cr, in, out, peer);
    if (r >= 0) best = std::min(best, (now() - t0) / double(c.ops));
  }
  weft::cont_request_wait(cr);
  weft::free_comp(&cr);
  weft::free_comp(&h);
  return best * 1e9;
}

double signals(const config& c, size_t group) {
  weft::comp_t h = weft::alloc_handler([](weft::status_t) { ++done_ops; });
  weft::comp_t cr = weft::alloc_cont_request();
  weft::status_t s;
  double best = 1e30;
  for (int r = -1; r < c.reps; ++r) {
    const double t0 = now();
    for (size_t i = 0; i < c.ops;) {
      if (!group) {
        (void)weft::comp_signal(h, s);
        ++i;
        continue;
      }
      weft::comp_t k = weft::alloc_cont_x(cr, on_cont, nullptr)();
      for (size_t j = 0; j < group; ++j) (void)weft::comp_signal(k, s);
      weft::arm_cont(k, group);  // every signal already in: done, as the seed's flag
      i += group;
    }
    if (r >= 0) best = std::min(best, (now() - t0) / double(c.ops));
  }
  weft::free_comp(&cr);
  weft::free_comp(&h);
  return best * 1e9;
}

void print(const char* mode, const char* workload, size_t group, double ns, double handler_ns) {
  std::printf(
      "RESULT system=weft api=cont mode=%s threads=1 resources=group%zu workload=%s "
      "size=8 value=%.1f unit=ns ratio_to_handler=%.3f\n",
      mode, group, workload, ns, ns / handler_ns);
}

}  // namespace

int main(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--ops" && v)
      c.ops = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--window" && v)
      c.window = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--reps" && v)
      c.reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_cont [--ops N] [--window W] [--reps R]\n");
      return 2;
    }
  }
  if (c.window == 0 || c.window > 60000 || c.ops < c.window) {
    std::fprintf(stderr, "bench_cont: --window must be 1..60000 and at most --ops\n");
    return 2;
  }
  weft::g_runtime_init();
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  if (n > 2) {
    std::fprintf(stderr, "bench_cont: 1 or 2 ranks\n");
    return 2;
  }
  const char* mode = n == 1 ? "loopback" : "process";
  if (me == 1) {  // four message runs of reps + 1 rounds each
    sender(4 * size_t(c.reps + 1) * ((c.ops + c.window - 1) / c.window), c.window);
  } else {
    const int peer = n == 1 ? 0 : 1;
    const double h = messages(c, 0, peer);
    print(mode, "recv_handler", 0, h, h);
    for (size_t g : {1, 8, 64}) print(mode, "recv_cont", g, messages(c, g, peer), h);
    const double hs = signals(c, 0);
    print(mode, "signal_handler", 0, hs, hs);
    for (size_t g : {1, 8, 64}) print(mode, "signal_cont", g, signals(c, g), hs);
  }
  weft::barrier();
  weft::g_runtime_fina();
  return 0;
}
