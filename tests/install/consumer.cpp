// SPDX-License-Identifier: BSD-3-Clause
// Built against an installed Weft: sends itself a message and checks it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <weft/weft.hpp>

#ifdef EXPECT_CXX17
static_assert(__cplusplus == 201703L, "the public headers must build a C++17 consumer as C++17");
#endif

int main() {
  weft::g_runtime_init();
  weft::comp_t cq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  char msg[] = "installed";
  weft::post_am(weft::get_rank_me(), msg, sizeof(msg), weft::comp_t{}, rc);
  weft::status_t s;
  do {
    weft::progress();
    s = weft::cq_pop(cq);
  } while (s.error.is_retry());
  int ok = s.size == sizeof(msg) && !strcmp(static_cast<char*>(s.buf), msg);
  printf("consumer: weft %s (%d), message %s\n", weft::get_version(), WEFT_VERSION,
         ok ? "ok" : "WRONG");
  std::free(s.buf);
  weft::free_comp(&cq);
  weft::g_runtime_fina();
  return ok ? 0 : 1;
}
