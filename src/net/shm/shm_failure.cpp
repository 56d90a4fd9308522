// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend when a local peer dies: its transfers forgotten, a lane
// stopped by its unpublished claim repaired, and whether a peer still lives.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"
#include "util/process.hpp"
#include "util/settings.hpp"

namespace weft::net::shm {

void shm_device::forget_peer(int rank) {
  const int me = ctx_.boot().rank();
  outgoing_.remove_if([&](const outgoing_put& o) {
    if (o.rank != rank) return false;
    if (o.ahead && !o.accepted) unaccepted_.fetch_sub(1, std::memory_order_acq_rel);
    if (o.finished) return true;  // channel and region given back already
    channel_of(own_channels_, o.channel)->busy.store(0, std::memory_order_release);
    if (o.get_reply) ctx_.regions().release(me, o.held);
    return true;
  });
  incoming_.remove_if([&](const incoming_put& in) {
    if (in.rank != rank) return false;
    if (!in.copied) ctx_.regions().release(me, in.held);
    return true;
  });
  deferred_.remove_if([&](const deferred& d) {
    if (d.rank != rank) return false;
    if (!d.refuse) ctx_.regions().release(me, d.held);
    return true;
  });
  // A note the dead peer will never take: its operation fails (the data went, the note not);
  // an answer it will never read (split_done, a put's acknowledgment) is dropped.
  events_.remove_if([rank](local_event& e) {
    if (e.rank != rank) return false;
    if (e.kind == local_event::notify) {
      e.kind = e.then;
      e.ok = false;
      return false;
    }
    return e.kind == local_event::split_done;
  });
  acks_.remove_if([rank](const pending_ack& a) { return a.rank == rank; });
  {
    peer& p = *peers_[size_t(rank)];
    util::lock_guard<util::spinlock> g(p.ahead_lock);
    for (auto& m : p.ahead) m.size = 0;
  }
  {
    util::lock_guard<util::spinlock> g(splits_lock_);
    std::erase_if(splits_, [rank](const pending_split& p) { return p.rank == rank; });
  }
  util::lock_guard<util::spinlock> g(gets_lock_);
  std::erase_if(gets_, [rank](const pending_get& p) { return p.rank == rank; });
  puts_.erase_if([rank](const put_ring::entry& p) { return p.rank == rank; });
}

// A cell at a lane's head that a sender claimed and never published stops the lane for
// every sender. When the claim's stamp names a local process that has died, the cell is
// published as a hole that the consumers skip; its message died with its sender. A sender
// killed in the two stores between its claim and its stamp leaves an older stamp: such a
// cell is skipped once it has stayed unpublished for hole_grace_ns while a local peer has
// died (a live sender publishes within microseconds unless stopped).
size_t shm_device::repair() {
  const int64_t now = util::now_ns();
  size_t fixed = repair_lane(own_answers_, answers_hold_, geo_.nlanes, now);
  for (size_t l = 0; l < geo_.nlanes; ++l) fixed += repair_lane(own_lanes_[l], holds_[l], l, now);
  return fixed;
}

bool shm_device::repair_lane(const lane& ln, lane_hold& h, size_t l, int64_t now) {
  constexpr int64_t settle_ns = 100 * 1000 * 1000, hole_grace_ns = 2000 * 1000 * 1000ll;
  const uint64_t head = ln.head->value.load(std::memory_order_acquire);
  cell_header* c = ln.cell(head, mask_);
  if (ln.tail->value.load(std::memory_order_acquire) == head ||
      c->seq.load(std::memory_order_acquire) != head) {  // empty, or published
    h.stuck_since_ns.store(0, std::memory_order_relaxed);
    return false;
  }
  const int64_t since = h.stuck_since_ns.load(std::memory_order_relaxed);
  if (since == 0 || h.stuck_at.load(std::memory_order_relaxed) != head) {
    h.stuck_at.store(head, std::memory_order_relaxed);
    h.stuck_since_ns.store(now, std::memory_order_relaxed);
    return false;
  }
  const int64_t stuck = now - since;
  if (stuck < settle_ns) return false;
  const int src = c->src;
  const bool stamped = c->lap == uint8_t(head >> lap_shift_) && src < int(peers_.size());
  const bool writer_dead = stamped && src != ctx_.boot().rank() && !peer_alive(src);
  if (!writer_dead && !(stuck > hole_grace_ns && any_local_peer_dead())) return false;
  const std::string lane_name =
      l == geo_.nlanes ? std::string("the answer lane") : "lane " + std::to_string(l);
  WEFT_LOG(warn,
           "shm: %s of this device stopped at a message %s claimed and never published; "
           "skipping it (the message is lost with its sender)",
           lane_name.c_str(),
           writer_dead ? ("rank " + std::to_string(ctx_.boot().job_rank(src))).c_str()
                       : "a sender that died");
  c->kind = kind_hole;
  c->len = 0;
  c->seq.store(head + 1, std::memory_order_release);
  h.stuck_since_ns.store(0, std::memory_order_relaxed);
  return true;
}

bool shm_device::any_local_peer_dead() {
  for (size_t r = 0; r < peers_.size(); ++r)
    if (int(r) != ctx_.boot().rank() && !peer_alive(int(r))) return true;
  return false;
}

#ifdef WEFT_TEST_HOOKS
namespace {
// Claims left before the test hook kills this process; 0: never (set by the context).
std::atomic<int64_t> claims_to_kill{0};
}  // namespace

// Test builds only: WEFT_TEST_KILL_AFTER_CLAIM=R:N makes rank R kill itself with SIGKILL
// right after its N-th claim of an inbox cell, stamped but not yet published.
void shm_device::arm_test_hook() {
  const std::string v = util::get_text(util::setting::test_kill_after_claim);
  const std::string me = util::get_text(util::setting::rank);
  int r = -1;
  long long n = 0;
  if (sscanf(v.c_str(), "%d:%lld", &r, &n) == 2 && !me.empty() && atoi(me.c_str()) == r && n > 0)
    claims_to_kill.store(n, std::memory_order_relaxed);
}

void shm_device::test_hook_after_claim() {
  if (claims_to_kill.load(std::memory_order_relaxed) > 0 && claims_to_kill.fetch_sub(1) == 1)
    raise(SIGKILL);
}
#endif

bool shm_device::peer_alive(int rank) {
  const peer& p = *peers_[size_t(rank)];
  return !p.gone.load(std::memory_order_relaxed) && util::process_exists(p.pid);
}

}  // namespace weft::net::shm
