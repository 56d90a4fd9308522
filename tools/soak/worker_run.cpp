// SPDX-License-Identifier: BSD-3-Clause
// A weft-soak thread's life: traffic until the deadline, then the drain (everything in
// flight ends, or is counted hung), then serving until every channel into it delivered
// what its sender says it sent.
#include "worker_parts.hpp"

namespace soak {

// One round: progress, every completion and arrival, every post that got retry again.
void worker::service(bool repost) {
  weft::progress_x().device(dev)();
  for (;;) {
    weft::status_t s = weft::cq_pop(local_cq);
    if (s.error.is_retry()) break;
    auto* c = static_cast<context*>(s.user_context);
    if (c->is_channel)
      received(*static_cast<channel*>(c), s);
    else
      complete(*static_cast<op*>(c), s);
  }
  for (;;) {
    weft::status_t s = weft::cq_pop(remote_cq);
    if (s.error.is_retry()) break;
    arrived(s);
  }
  for (auto& o : ops)
    if (o->st == op::state::unposted) post(*o);
  if (repost)
    for (auto& c : inbound)
      if (c->st == channel::state::unposted) post_recv(*c);
}

bool worker::idle() const {
  for (auto& o : ops)
    if (o->st != op::state::free) return false;
  return true;
}

void worker::run() {
  for (auto& c : inbound) post_recv(*c);
  while (clock::now() < J.deadline) {
    service(true);
    for (auto& o : ops)
      if (o->st == op::state::free) start_op(*o);
  }
  // The drain: what is in flight ends (with an error, if its peer died).
  const auto drain =
      std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(J.opt.drain));
  auto until = clock::now() + drain;
  while (!idle() && clock::now() < until) service(true);
  for (auto& o : ops)
    if (o->st != op::state::free) {
      ++mine.hung;
      J.failure("an operation with rank " + std::to_string(o->rank) + " still in flight after " +
                std::to_string(J.opt.drain) + " s of drain");
    }
  J.posting_done.fetch_add(1);
  while (!J.fins_known.load()) service(true);
  until = clock::now() + drain;
  while (!channels_done() && clock::now() < until) service(true);
  finish_channels();
  std::lock_guard<std::mutex> g(J.lock);
  J.total.add(mine);
}

}  // namespace soak
