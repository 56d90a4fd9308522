// SPDX-License-Identifier: BSD-3-Clause
// Helpers for the multi-process tests: checks that report and count, and waiting loops
// with deadlines so a lost message fails the test instead of hanging it.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <weft/weft.hpp>

namespace mp {

inline int g_failures = 0;
inline int g_checks = 0;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    ++::mp::g_checks;                                                                           \
    if (!(cond)) {                                                                              \
      ++::mp::g_failures;                                                                       \
      fprintf(stderr, "rank %d: CHECK failed at %s:%d: %s\n", ::mp::rank(), __FILE__, __LINE__, \
              #cond);                                                                           \
    }                                                                                           \
  } while (0)

#define CHECK_EQ(a, b)                                                                           \
  do {                                                                                           \
    ++::mp::g_checks;                                                                            \
    auto va_ = (a);                                                                              \
    auto vb_ = (b);                                                                              \
    if (!(va_ == vb_)) {                                                                         \
      ++::mp::g_failures;                                                                        \
      fprintf(stderr, "rank %d: CHECK_EQ failed at %s:%d: %s = %lld, %s = %lld\n", ::mp::rank(), \
              __FILE__, __LINE__, #a, (long long)va_, #b, (long long)vb_);                       \
    }                                                                                            \
  } while (0)

inline int rank() {
  auto rt = weft::get_g_runtime();
  return rt.is_empty() ? -1 : weft::get_rank_me();
}

[[noreturn]] inline void die(const std::string& why) {
  fprintf(stderr, "rank %d: FATAL: %s\n", rank(), why.c_str());
  fflush(stderr);
  std::exit(3);
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct deadline {
  std::chrono::steady_clock::time_point end;
  explicit deadline(double seconds = 60)
      : end(std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(seconds))) {}
  void check(const char* what) const {
    if (std::chrono::steady_clock::now() > end) die(std::string("timed out waiting for ") + what);
  }
};

inline unsigned char pattern(size_t i, size_t seed) {
  return (unsigned char)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

inline void fill(void* p, size_t n, size_t seed) {
  auto* c = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) c[i] = pattern(i, seed);
}

// Index of the first wrong byte, or SIZE_MAX.
inline size_t verify(const void* p, size_t n, size_t seed) {
  auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i] != pattern(i, seed)) return i;
  return SIZE_MAX;
}

// Posts until the status is not retry, progressing meanwhile.
template <typename Post>
weft::status_t post_until(Post&& post, weft::device_t dev = {}) {
  deadline d;
  for (;;) {
    weft::status_t s = post();
    if (!s.error.is_retry()) return s;
    weft::progress_x().device(dev)();
    d.check("a post to stop returning retry");
  }
}

inline void wait_sync(weft::comp_t sync, weft::status_t* out, weft::device_t dev = {}) {
  deadline d;
  while (!weft::sync_test(sync, out)) {
    weft::progress_x().device(dev)();
    d.check("a synchronizer");
  }
}

// Sends `mine` to rank `from` and returns what rank `to` sent (a region's handle: each
// rank registers, then hands its handle to the rank that will write to it).
inline weft::rmr_t swap_rmr(int to, int from, weft::rmr_t mine) {
  weft::rmr_t theirs{};
  weft::comp_t rs = weft::alloc_sync(), ss = weft::alloc_sync();
  weft::status_t r =
      post_until([&] { return weft::post_recv(to, &theirs, sizeof(theirs), 900, rs); });
  weft::status_t s =
      post_until([&] { return weft::post_send(from, &mine, sizeof(mine), 900, ss); });
  weft::status_t st;
  if (!r.error.is_done()) wait_sync(rs, &st);
  if (!s.error.is_done()) wait_sync(ss, &st);
  weft::free_comp(&rs);
  weft::free_comp(&ss);
  return theirs;
}

inline weft::status_t wait_cq(weft::comp_t cq, weft::device_t dev = {}) {
  deadline d;
  for (;;) {
    weft::status_t s = weft::cq_pop(cq);
    if (!s.error.is_retry()) return s;
    weft::progress_x().device(dev)();
    d.check("a completion queue entry");
  }
}

// The end of a scenario's checks: reports failures now, and keeps the rank for the success
// line, which main prints only once the rank has finalized (report), so that a hang or a
// crash in finalize shows as a missing line and an exit code, never as a pass.
inline int g_rank = -1;
inline int finish(const char* name) {
  fflush(stdout);
  if (rank() >= 0) g_rank = rank();  // after a finalize, the rank main noted at init
  if (g_failures) {
    fprintf(stderr, "rank %d: %s: %d of %d checks failed\n", g_rank, name, g_failures, g_checks);
    return 1;
  }
  return 0;
}
// MP_TEST_EXPECT_SPLIT=1 (set beside a low WEFT_SHM_SPLIT): this rank read halves of split
// rendezvous data as their target (bytes_split_read of the default device), so the
// scenario's data checks covered the split path.
inline void check_split_taken() {
  const char* want = getenv("MP_TEST_EXPECT_SPLIT");
  if (!want || std::string(want) != "1") return;
  const uint64_t read = weft::get_default_device().get_counter(weft::counter_t::bytes_split_read);
  printf("rank %d: %llu bytes of split rendezvous data read\n", weft::get_rank_me(),
         static_cast<unsigned long long>(read));
  CHECK(read > 0);
}
// The success line the test drivers look for, one per rank: "rank R: SCENARIO: all N
// checks passed".
inline void report(const char* scenario, int rc) {
  if (rc == 0) printf("rank %d: %s: all %d checks passed\n", g_rank, scenario, g_checks);
  fflush(stdout);
}
// For a scenario whose rank cannot finalize (a peer is dead): the report, then _exit.
[[noreturn]] inline void finish_and_exit(const char* scenario) {
  const int rc = finish(scenario);
  report(scenario, rc);
  fflush(stderr);
  _exit(rc);
}

enum class comp_kind { sync, cq, handler };
inline const char* name(comp_kind k) {
  return k == comp_kind::sync ? "sync" : k == comp_kind::cq ? "cq" : "handler";
}

// A completion object of any kind that can be waited on uniformly.
struct any_comp {
  comp_kind kind;
  weft::comp_t comp;
  std::vector<weft::status_t> got;  // handler: statuses in arrival order
  std::atomic<int> handler_count{0};

  explicit any_comp(comp_kind k) : kind(k) {
    switch (k) {
      case comp_kind::sync: comp = weft::alloc_sync(); break;
      case comp_kind::cq: comp = weft::alloc_cq(); break;
      case comp_kind::handler:
        got.resize(4096);
        comp = weft::alloc_handler([this](weft::status_t s) {
          got[size_t(handler_count.load())] = s;
          handler_count.fetch_add(1);
        });
        break;
    }
  }
  ~any_comp() { weft::free_comp(&comp); }
  weft::status_t wait(weft::device_t dev = {}) {
    switch (kind) {
      case comp_kind::sync: {
        weft::status_t s;
        wait_sync(comp, &s, dev);
        return s;
      }
      case comp_kind::cq: return wait_cq(comp, dev);
      case comp_kind::handler: {
        deadline d;
        while (handler_count.load() == 0) {
          weft::progress_x().device(dev)();
          d.check("a handler call");
        }
        handler_count.store(0);
        return got[0];
      }
    }
    return {};
  }
};

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const weft::fatal_error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

}  // namespace mp
