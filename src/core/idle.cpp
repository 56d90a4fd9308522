// SPDX-License-Identifier: BSD-3-Clause
// What progress does with the core when it finds nothing to do and this host is
// oversubscribed (WEFT_YIELD). Yielding serves ranks that share cores with one another: the
// rank waited for runs at once. It fails where the core also runs work that does not yield
// (another job, a rank or thread computing): each yield waits out that work's time slice,
// and a round trip costs milliseconds (a 4-rank job of 20000 waited puts on 2 cores beside
// two busy processes: 35 s instead of 0.2 s). Two yields that each kept the thread off the
// core that long are the sign: for a while after them, an idle thread sleeps until a
// message arrives (a peer's publish rings the device's bell), and the scheduler, which
// favours a thread woken from sleep, runs it as soon as its message is there. Between ranks
// alone, sleeping costs a wake-up per message (5x the latency of yielding), so a thread
// goes back to yielding after a while and looks again.
#include <sched.h>

#include "core/device.hpp"
#include "core/runtime.hpp"
#include "net/backend.hpp"
#include "util/clock.hpp"

namespace weft::impl {
namespace {

// A yield longer than this found work on the core that does not yield.
constexpr int64_t long_yield_ns = 200 * 1000;
// Two long yields this close together turn sleeping on (one can be a start-up's page
// faults or a daemon's wake-up).
constexpr int64_t long_yields_apart_ns = 10 * 1000 * 1000;
// How long a thread then sleeps instead of yielding before it yields again to look.
constexpr int64_t sleep_mode_ns = 50 * 1000 * 1000;
// A sleeping thread first polls this long: a reply already on its way costs no wake-up.
constexpr int64_t poll_before_sleep_ns = 2 * 1000;
// The longest sleep: what arrives without ringing the bell (a completion signalled by
// another thread of this process, another device's message) waits at most this long.
constexpr uint32_t max_sleep_us = 1000;

struct idle_state {
  uint32_t last_poll = 0;     // the thread's poll count at its last idle progress
  int64_t idle_since_ns = 0;  // when its current run of idle progress calls began
  int64_t sleep_until_ns = 0;
  int64_t long_yield_at_ns = -long_yields_apart_ns;  // when the last long yield ended
};
thread_local idle_state t_idle;

}  // namespace

void device_impl::give_core_away(uint32_t polls) {
  idle_state& st = t_idle;
  const int64_t now = util::now_ns();
  // Consecutive calls of this thread that found nothing have consecutive poll counts.
  if (polls != st.last_poll + 1) st.idle_since_ns = now;
  st.last_poll = polls;
  if (now < st.sleep_until_ns) {
    if (now - st.idle_since_ns < poll_before_sleep_ns) return;
    // The backend refuses to sleep while it has work in hand: then yield after all.
    if (backlog_empty() && net->wait_for_message(max_sleep_us)) return;
  }
  sched_yield();
  const int64_t after = util::now_ns();
  if (after - now <= long_yield_ns) return;
  if (after - st.long_yield_at_ns < long_yields_apart_ns) st.sleep_until_ns = after + sleep_mode_ns;
  st.long_yield_at_ns = after;
}

}  // namespace weft::impl
