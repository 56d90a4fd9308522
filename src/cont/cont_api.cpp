// SPDX-License-Identifier: BSD-3-Clause
// The public calls of weft/cont.hpp: argument checks, then the objects of cont.hpp.
#include <string>

#include "cont/cont.hpp"
#include "util/fail.hpp"
#include "util/generation.hpp"

namespace weft {

using impl::comp_kind;
using impl::cont_impl;
using impl::cont_request_impl;

namespace {

[[noreturn, gnu::cold, gnu::noinline]] void refuse(const impl::comp_impl* c, const char* call,
                                                   const char* arg, const char* want) {
  if (!c) util::fail(call, arg, "empty", want);
  util::fail(call, arg, util::to_hex(c), std::string("not ") + want);
}

// The object behind handle `h`, checked to be live and of kind `k`. Inline, the failures
// out of line: every continuation passes here twice (alloc_cont, arm_cont).
template <typename T>
[[gnu::always_inline]] inline T* as(comp_t h, comp_kind k, const char* call, const char* arg,
                                    const char* want) {
  impl::comp_impl* c = h.p ? util::live(h.p, call, arg) : nullptr;
  if (!c || c->kind != k) [[unlikely]]
    refuse(c, call, arg, want);
  return static_cast<T*>(c);
}

[[gnu::always_inline]] inline cont_request_impl* request(comp_t h, const char* call) {
  return as<cont_request_impl>(h, comp_kind::cont_request, call, "request",
                               "a continuation request (alloc_cont_request_x)");
}

}  // namespace

namespace detail {

comp_t alloc_cont_request_impl(const cont_request_args& a) {
  if (a.max_poll < -1)
    util::fail("alloc_cont_request", "max_poll", std::to_string(a.max_poll),
               "must be -1 (unlimited) or at least 0");
  if (a.max_poll == 0 && a.poll_only)
    util::fail("alloc_cont_request", "max_poll", "0",
               "with poll_only no continuation would ever run (seed 3.5)");
  if (uint8_t(a.thread) > uint8_t(cont_thread_t::any))
    util::fail("alloc_cont_request", "thread", std::to_string(int(a.thread)), "application or any");
  return comp_t{util::tagged(static_cast<impl::comp_impl*>(new cont_request_impl(a)))};
}

comp_t alloc_cont_impl(const cont_args& a) {
  cont_request_impl* cr = request(a.request, "alloc_cont");
  if (!a.fn) util::fail("alloc_cont", "fn", "nullptr", "a continuation needs a function");
  if (!a.statuses != !a.capacity)
    util::fail("alloc_cont", "statuses", a.statuses ? "an array of capacity 0" : "nullptr",
               "give an array and its capacity, or neither");
  impl::cont_body b;
  b.fn = a.fn;
  b.user_data = a.user_data;
  b.statuses = a.statuses;
  b.capacity = a.capacity;
  return comp_t{util::tagged(static_cast<impl::comp_impl*>(cr->make(b)))};
}

}  // namespace detail

error_t arm_cont(comp_t cont, size_t nposted) {
  return as<cont_impl>(cont, comp_kind::cont, "arm_cont", "cont", "a continuation (alloc_cont_x)")
      ->arm(nposted);
}

bool cont_request_test(comp_t r) {
  return request(r, "cont_request_test")->test();
}

void cont_request_wait(comp_t r) {
  cont_request_impl* cr = request(r, "cont_request_wait");
  while (!cr->test()) {
  }
}

error_t watch_cont_request(comp_t r, comp_t comp) {
  cont_request_impl* cr = request(r, "watch_cont_request");
  if (!comp.p) util::fail("watch_cont_request", "comp", "empty", "give a completion object");
  impl::comp_impl* c = util::live(comp.p, "watch_cont_request", "comp");
  if (c == cr) util::fail("watch_cont_request", "comp", util::to_hex(c), "the request itself");
  if (c->kind >= comp_kind::graph)
    util::fail("watch_cont_request", "comp", util::to_hex(c),
               "a graph or a continuation request cannot be signalled; use a continuation");
  return cr->watch(c);
}

cont_request_info_t cont_request_info(comp_t r) {
  return request(r, "cont_request_info")->info();
}

void mark_weft_thread() {
  impl::t_weft_thread = true;
}

}  // namespace weft
