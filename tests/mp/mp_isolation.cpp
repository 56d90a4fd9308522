// SPDX-License-Identifier: BSD-3-Clause
// Isolation between jobs: what carries another job's cookie is refused, and a remote memory
// handle of one job is refused by another.
//   foreign      run with WEFT_TEST_FOREIGN_COOKIE=1 (a hook of test builds): rank 1 has
//                another job's cookie. Over the network, each rank's active messages to the
//                other must be dropped unread (the shm and ucx backends already refuse at
//                start-up, which their tests check through the error).
//   foreign_rmr  two jobs at once, sharing the file MP_TEST_RMR_FILE: the "owner" job's
//                rank 1 publishes a registration's handle there; the "user" job's rank 0 puts
//                and gets with it to its own rank 1, and both must be refused; the owner's
//                memory must be untouched.
//   late_device  rank 1 allocates a device 4 s after rank 0 (for tests/scripts/isolation.sh).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

int scenario_foreign() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("foreign needs 2 ranks");
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  // A few: dropped messages never return their credits.
  constexpr int kSent = 4;
  for (int i = 0; i < kSent; ++i) {
    uint64_t v = 0xf0f0f0f0ull + uint64_t(i);
    CHECK(!post_until([&] {
             return weft::post_am(1 - me, &v, sizeof(v), weft::comp_t{}, rc);
           }).error.is_error());
  }
  int arrived = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < end) {
    weft::status_t s = weft::cq_pop(cq);
    if (s.error.is_retry()) {
      weft::progress();
      continue;
    }
    ++arrived;
    std::free(s.buf);
  }
  CHECK_EQ(arrived, 0);
  // No barrier or finalize: neither rank hears the other, by design.
  finish_and_exit("foreign");
}

namespace {

std::string rmr_file() {
  const char* f = getenv("MP_TEST_RMR_FILE");
  if (!f || !*f) die("foreign_rmr needs MP_TEST_RMR_FILE");
  return f;
}

bool file_exists(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f) fclose(f);
  return f != nullptr;
}

// Progresses until `path` exists.
void wait_for_file(const std::string& path, const char* what) {
  deadline d(60);
  while (!file_exists(path)) {
    weft::progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    d.check(what);
  }
}

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) die("cannot write " + tmp);
  fputs(text.c_str(), f);
  fclose(f);
  if (rename(tmp.c_str(), path.c_str()) != 0) die("cannot rename " + tmp);
}

// The owner's rank 1: registers memory, publishes its handle, and checks that it is
// untouched once the other job has tried it.
void own_region(const std::string& file) {
  std::vector<unsigned char> mem(4096, 0x5a);
  weft::mr_t mr = weft::register_memory(mem.data(), mem.size());
  const weft::rmr_t r = weft::get_rmr(mr);
  char text[128];
  snprintf(text, sizeof(text), "%llx %llx %llx %llx\n", (unsigned long long)r.base,
           (unsigned long long)r.size, (unsigned long long)r.key, (unsigned long long)r.generation);
  write_file(file, text);
  wait_for_file(file + ".done", "the other job to try the handle");
  size_t touched = 0;
  for (unsigned char c : mem) touched += c != 0x5a;
  CHECK_EQ(touched, size_t(0));
  weft::deregister_memory(&mr);
}

// Whether a put or get with `r` to `to` was refused: at the call (an error naming the
// remote buffer) or by its completion (an error status).
template <typename Post>
bool refused(const char* what, Post&& post) {
  weft::status_t s{};
  const std::string e = error_of([&] { s = post_until(post); });
  printf("rank 0: the %s with the other job's handle: %s\n", what,
         !e.empty()           ? e.c_str()
         : s.error.is_error() ? "ended with an error status"
                              : "done");
  if (!e.empty()) return contains(e, "remote_buffer") || contains(e, "rmr");
  return s.error.is_error();
}

void use_foreign_region(const std::string& file) {
  wait_for_file(file, "the other job's handle");
  weft::rmr_t r{};
  unsigned long long v[4];
  FILE* f = fopen(file.c_str(), "r");
  if (!f || fscanf(f, "%llx %llx %llx %llx", &v[0], &v[1], &v[2], &v[3]) != 4)
    die("cannot read the handle in " + file);
  fclose(f);
  r.base = v[0];
  r.size = v[1];
  r.key = v[2];
  r.generation = v[3];
  char buf[64];
  memset(buf, 0x33, sizeof(buf));
  weft::comp_t sync = weft::alloc_sync();
  auto finish_with = [&](weft::status_t s) {
    if (s.error.is_posted()) wait_sync(sync, &s);
    return s;
  };
  CHECK(
      refused("put", [&] { return finish_with(weft::post_put(1, buf, sizeof(buf), sync, 0, r)); }));
  CHECK(
      refused("get", [&] { return finish_with(weft::post_get(1, buf, sizeof(buf), sync, 0, r)); }));
  weft::free_comp(&sync);
  write_file(file + ".done", "tried\n");
}

}  // namespace

int scenario_foreign_rmr() {
  const int me = weft::get_rank_me();
  if (weft::get_rank_n() != 2) die("foreign_rmr needs 2 ranks");
  const std::string file = rmr_file();
  const char* role = getenv("MP_TEST_RMR_ROLE");
  const bool owner = role && !strcmp(role, "owner");
  if (!owner && !(role && !strcmp(role, "user")))
    die("foreign_rmr needs MP_TEST_RMR_ROLE=owner or user");
  if (owner && me == 1) own_region(file);
  if (!owner && me == 0) use_foreign_region(file);
  return finish("foreign_rmr");
}

// For the isolation script: rank 1 allocates a device 4 s after rank 0, so that rank 0's
// segment for it stays in /dev/shm meanwhile (one is unlinked once every peer mapped it).
int scenario_late_device() {
  weft::barrier();
  if (weft::get_rank_me() == 1) std::this_thread::sleep_for(std::chrono::seconds(4));
  weft::device_t d = weft::alloc_device();
  weft::barrier();
  weft::free_device(&d);
  CHECK(true);
  return finish("late_device");
}
