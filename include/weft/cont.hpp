// SPDX-License-Identifier: BSD-3-Clause
// Continuations (the MPI Continuations proposal, seed 002, in Weft's model): a callback on a
// group of operations, run once every one of them has completed, tracked by a continuation
// request that a runtime tests or waits on instead of polling an array of requests.
//
// Weft has no operation handle (an operation is given its completion object when posted,
// and one that returns done never signals it), so a continuation is itself a completion
// object: allocate it from a continuation request, pass it as the local completion of the
// posts it covers, then arm it with the number of them that returned posted.
//
//   comp_t cr = weft::alloc_cont_request_x().max_poll(16)();
//   comp_t c = weft::alloc_cont_x(cr, on_halo, task).statuses(st, 2)();
//   int n = 0;
//   n += weft::post_send(peer, out, len, tag, c).error.is_posted();
//   n += weft::post_recv(peer, in, len, tag, c).error.is_posted();
//   if (weft::arm_cont(c, n).is_done()) on_halo_now(task);  // the seed's flag
//   ...
//   while (!weft::cont_request_test(cr)) {}  // runs ready continuations
//
// The calls against the seed's: alloc_cont_request_x = MPIX_Continue_init (the options are
// its info keys); alloc_cont_x + posts + arm_cont = MPIX_Continue (one post) and
// MPIX_Continueall (several), arm_cont's done = flag 1; cont_request_test / wait = MPI_Test /
// MPI_Wait on the continuation request; free_comp = MPI_Request_free; watch_cont_request =
// a continuation attached to a continuation request. See docs/continuations.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/off.hpp"
#include "weft/types.hpp"

namespace weft {

// A continuation's body: the statuses of its operations in the order they completed (the
// array given with .statuses(); null without it) and their number, and the user data.
using cont_fn_t = void (*)(status_t* statuses, size_t count, void* user_data);

// Which threads may run a continuation outside a test of its request (seed 3.5).
enum class cont_thread_t : uint8_t {
  application,  // only the program's own threads (default)
  any,          // also threads that Weft's layers start (the engine's progress thread)
};

#define WEFT_CONT_ARG(type, name)       \
  auto& name(type v) {                  \
    a_.name = v;                        \
    return static_cast<self_t&>(*this); \
  }

namespace detail {
struct cont_request_args {
  runtime_t runtime;
  bool poll_only = false;
  bool enqueue_complete = false;
  int64_t max_poll = -1;  // -1: unlimited
  cont_thread_t thread = cont_thread_t::application;
  bool async_signal_safe = false;
};
WEFT_API comp_t alloc_cont_request_impl(const cont_request_args& a);
struct cont_args {
  comp_t request;
  cont_fn_t fn = nullptr;
  void* user_data = nullptr;
  status_t* statuses = nullptr;
  size_t capacity = 0;
};
WEFT_API comp_t alloc_cont_impl(const cont_args& a);
}  // namespace detail

// A continuation request (MPIX_Continue_init). Options, each the seed's info key:
//   poll_only: continuations run only inside a test or wait of this request, never from
//     other progress calls or other threads;
//   enqueue_complete: a continuation whose operations were all complete when armed is run
//     by a later test instead of being reported done (and not run);
//   max_poll: at most this many continuations per test (-1: unlimited; 0 with poll_only is
//     refused, as nothing would ever run);
//   thread: application (default) or any (see cont_thread_t);
//   async_signal_safe: a hint that the callbacks are async-signal-safe. Weft never runs a
//     continuation from a signal handler, so it changes nothing (kept for the C and MPIX
//     interfaces, reported by cont_request_info).
// Free it with free_comp: with continuations still active it is released once they have
// all run (they still run, from progress, as if poll_only were off).
class alloc_cont_request_x {
  using self_t = alloc_cont_request_x;
  detail::cont_request_args a_;

 public:
  WEFT_CONT_ARG(runtime_t, runtime)
  WEFT_CONT_ARG(bool, poll_only)
  WEFT_CONT_ARG(bool, enqueue_complete)
  WEFT_CONT_ARG(int64_t, max_poll)
  WEFT_CONT_ARG(cont_thread_t, thread)
  WEFT_CONT_ARG(bool, async_signal_safe)
  comp_t operator()() const { return detail::alloc_cont_request_impl(a_); }
  comp_t call() const { return (*this)(); }
};
#undef WEFT_CONT_ARG
inline comp_t alloc_cont_request() {
  return alloc_cont_request_x()();
}

// A continuation registered with `request`: a completion object to pass as the local
// completion of the posts it covers; `fn(statuses, count, user_data)` runs once after
// arm_cont, when every one of them has signalled. .statuses(array, capacity): where their
// statuses go (in completion order; it must stay valid until the callback has run). It is
// released by Weft after its callback ran or after arm_cont reported done.
class alloc_cont_x {
  using self_t = alloc_cont_x;
  detail::cont_args a_;

 public:
  alloc_cont_x(comp_t request, cont_fn_t fn, void* user_data) {
    a_.request = request;
    a_.fn = fn;
    a_.user_data = user_data;
  }
  auto& statuses(status_t* array, size_t capacity) {
    a_.statuses = array;
    a_.capacity = capacity;
    return *this;
  }
  comp_t operator()() const { return detail::alloc_cont_impl(a_); }
  comp_t call() const { return (*this)(); }
};

// Arms continuation `cont` with the number of its posts that returned posted. Returns done
// when all of them have completed already (zero, or every one signalled before this call):
// the statuses are written and the callback will not run, unless the request was made with
// enqueue_complete (then posted, and a later test runs it). Otherwise posted. Arming twice,
// with more operations than were posted with it, or with fewer than have signalled it, is
// a fatal_error naming the call and the count. Never runs a callback itself.
WEFT_API error_t arm_cont(comp_t cont, size_t nposted);

// Progresses the request's runtime once, runs ready continuations (up to max_poll) on this
// thread, and returns whether none is left active (the request is then complete, and
// reusable: continuations may be registered with it again). One thread at a time: a second
// thread testing or waiting on the same request meanwhile, or a continuation testing its
// own request, is a fatal_error.
WEFT_API bool cont_request_test(comp_t request);
// Tests until none is left active.
WEFT_API void cont_request_wait(comp_t request);
// Attaches `comp` to continuation request `request` as to an operation: `comp` is signalled
// once (status done, user_context = request's handle) when no continuation is left active
// on it. Returns done when none is now (nothing will be signalled), else posted. With a
// continuation of another request as `comp`, a runtime waits for a whole phase (chaining).
WEFT_API error_t watch_cont_request(comp_t request, comp_t comp);
// The request's options and state, for tools and tests.
struct cont_request_info_t {
  bool poll_only, enqueue_complete, async_signal_safe;
  int64_t max_poll;
  cont_thread_t thread;
  size_t active;  // registered continuations that have not run yet
  size_t queued;  // ready, waiting for a test
};
WEFT_API cont_request_info_t cont_request_info(comp_t request);
// Marks the calling thread as one that Weft's own layers started (the engine's threads):
// continuations of requests with thread = application do not run on it. Programs do not
// call it.
WEFT_API void mark_weft_thread();

}  // namespace weft
