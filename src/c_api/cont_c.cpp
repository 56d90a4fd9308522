// SPDX-License-Identifier: BSD-3-Clause
// The C calls for continuations (weft/weft.h): a C body receives weft_status_t entries,
// converted as each operation signals, so no copy is made when it runs.
#include "c_api/guard.hpp"
#include "cont/cont.hpp"
#include "util/fail.hpp"
#include "weft/cont.hpp"
#include "weft/weft.h"

using namespace weft;
using capi::c_comp;
using capi::cmp;
using capi::guard;
using capi::need;

namespace {

void store_c(void* array, size_t i, const status_t& s) {
  static_cast<weft_status_t*>(array)[i] = capi::to_c(s);
}

}  // namespace

extern "C" {

void weft_cont_request_attr_init(weft_cont_request_attr_t* attr) {
  if (attr) *attr = weft_cont_request_attr_t{0, 0, -1, 0, 0};
}

int weft_alloc_cont_request(const weft_cont_request_attr_t* attr, weft_comp_t* request) {
  return guard([&] {
    weft_cont_request_attr_t a;
    weft_cont_request_attr_init(&a);
    if (attr) a = *attr;
    if (a.thread_any != 0 && a.thread_any != 1)
      util::fail("alloc_cont_request", "thread_any", std::to_string(a.thread_any), "0 or 1");
    *need(request, "alloc_cont_request", "request") =
        c_comp(alloc_cont_request_x()
                   .poll_only(a.poll_only != 0)
                   .enqueue_complete(a.enqueue_complete != 0)
                   .max_poll(a.max_poll)
                   .thread(a.thread_any ? cont_thread_t::any : cont_thread_t::application)
                   .async_signal_safe(a.async_signal_safe != 0)());
  });
}

int weft_alloc_cont(weft_comp_t request, weft_cont_fn_t fn, void* user_data,
                    weft_status_t* statuses, size_t capacity, weft_comp_t* cont) {
  return guard([&] {
    need(cont, "alloc_cont", "cont");
    if (!fn) util::fail("alloc_cont", "fn", "NULL", "a continuation needs a function");
    if (!statuses != !capacity)
      util::fail("alloc_cont", "statuses", statuses ? "an array of capacity 0" : "NULL",
                 "give an array and its capacity, or neither");
    comp_t r = cmp(request);
    if (!r.p) util::fail("alloc_cont", "request", "NULL", "a continuation request");
    impl::comp_impl* c = util::live(r.p, "alloc_cont", "request");
    if (c->kind != impl::comp_kind::cont_request)
      util::fail("alloc_cont", "request", util::to_hex(c), "not a continuation request");
    impl::cont_body b;
    b.c_fn = fn;
    b.user_data = user_data;
    b.statuses = statuses;
    b.capacity = capacity;
    b.to_c = statuses ? &store_c : nullptr;
    *cont = c_comp(comp_t{util::tagged(
        static_cast<impl::comp_impl*>(static_cast<impl::cont_request_impl*>(c)->make(b)))});
  });
}

int weft_arm_cont(weft_comp_t cont, size_t nposted, int* flag) {
  return guard([&] { *need(flag, "arm_cont", "flag") = arm_cont(cmp(cont), nposted).is_done(); });
}

int weft_cont_request_test(weft_comp_t request, int* flag) {
  return guard([&] { *need(flag, "cont_request_test", "flag") = cont_request_test(cmp(request)); });
}

int weft_cont_request_wait(weft_comp_t request) {
  return guard([&] { cont_request_wait(cmp(request)); });
}

int weft_watch_cont_request(weft_comp_t request, weft_comp_t comp, int* flag) {
  return guard([&] {
    *need(flag, "watch_cont_request", "flag") =
        watch_cont_request(cmp(request), cmp(comp)).is_done();
  });
}

}  // extern "C"
