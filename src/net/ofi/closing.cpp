// SPDX-License-Identifier: BSD-3-Clause
// How an ofi device leaves: it gives back the peers' registrations it holds
// (release_remote_keys), then makes sure that what it sent has arrived before its connections
// close (flush_to_peers: a goodbye to each peer, answered).
#include <chrono>

#include "net/ofi/ofi_backend.hpp"
#include "util/log.hpp"

namespace weft::net::ofi {
namespace {
// Whatever arrives while a device closes has no one left to take it.
struct discarding_sink final : sink {
  bool on_message(int, const void*, size_t) override { return true; }
  void on_put_local_done(void*, bool) override {}
  void on_get_done(void*, bool) override {}
  bool on_remote_notify(int, const void*, size_t) override { return true; }
  bool expects_data(int, uint64_t, size_t, const void*, size_t) override { return false; }
  bool on_ahead(int, uint32_t, const void*, size_t) override { return true; }  // ofi has none
};
}  // namespace

void ofi_device::release_remote_keys() {
  {
    util::lock_guard<util::spinlock> g(keys_lock_);
    for (auto& [who, rk] : keys_) {
      if (rk.state == remote_key::refused) continue;  // acknowledged already, or never held
      revoke_ack a{who.second, device_generation_};
      send_control(who.first, kind_revoke_ack, &a, sizeof(a));
    }
  }
  // Until every send buffer is back (the messages left), for a second at most: a peer that
  // is gone is no reason to hang here.
  discarding_sink s;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    poll(s, 64);
    bool idle;
    {
      util::lock_guard<util::spinlock> g(keys_lock_);
      util::lock_guard<util::spinlock> h(send_lock_);
      idle = control_out_.empty() && free_sends_.size() == send_ops_.size();
    }
    if (idle || std::chrono::steady_clock::now() > until) return;
  }
}

// A completed send means the data left this process, not that it arrived: a provider that
// closes a socket with data still queued (sockets does) loses it, and a peer waiting for the
// last message of a barrier waits forever. So each peer this device exchanged messages with
// is told goodbye, and the endpoint closes once each has answered, has said goodbye itself
// (it is closing too, and wants nothing more), or has died, or after 2 s.
void ofi_device::flush_to_peers() {
  discarding_sink s;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    int waiting = -1;
    for (int r = 0; r < int(peers_.size()); ++r) {
      if (r == me_ || dead_[size_t(r)].load()) continue;
      const uint8_t t = talk_[size_t(r)].load();
      const bool talked = (t & sent_to) || live_[size_t(r)].heard.load() != 0;
      if (!talked || (t & (bye_heard | bye_answered))) continue;
      waiting = r;
      if (t & bye_sent) continue;
      // Marked first: the peer's own goodbye, answered by poll, must see that ours left.
      talk_[size_t(r)].fetch_or(bye_sent);
      prefix bye = make_prefix(kind_bye, 0);
      if (!send_buffer(r, bye, nullptr, 0, nullptr, 0, nullptr))
        talk_[size_t(r)].fetch_and(uint8_t(~bye_sent));  // tried again next round
    }
    if (waiting < 0) return;
    if (std::chrono::steady_clock::now() > until) {
      WEFT_LOG(warn,
               "ofi device %d: rank %d did not answer its goodbye within 2 s (is its device %d "
               "still progressed?); closing anyway",
               index_, waiting, index_);
      return;
    }
    poll(s, 64);
  }
}

}  // namespace weft::net::ofi
