// SPDX-License-Identifier: BSD-3-Clause
// The owner's side of registrations that peers ask about before their first access (the ofi
// and ucx backends): which devices hold each registration's key, so that deregistration can
// revoke every copy and wait until each has acknowledged (or is gone). `Entry` is the
// backend's own record (its memory handle, extent, packed key); `Device` has
// `queue_revoke(rank, id)` and `peer_alive(rank)`. Never on the critical path: one mutex.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::net {

// A device that asked, named by its rank, its index and its device_generation (a device freed and
// allocated again at the same index is another asker).
struct key_asker {
  int rank, dev;
  uint64_t device_generation;
  bool operator==(const key_asker&) const = default;
};

template <typename Entry, typename Device>
class key_registry {
 public:
  void add(uint64_t id, std::unique_ptr<Entry> e) {
    std::lock_guard<std::mutex> g(lock_);
    regs_[id].entry = std::move(e);
  }

  // Runs `f(Entry&)` on a live (not revoked) registration under the lock; false when there
  // is none or `f` says no.
  template <typename F>
  bool with_live(uint64_t id, F&& f) {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(id);
    return it != regs_.end() && !it->second.revoked && f(*it->second.entry);
  }

  // A peer's question: as with_live, and on yes the asker is remembered.
  template <typename F>
  bool ask(uint64_t id, const key_asker& who, F&& answer) {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(id);
    if (it == regs_.end() || it->second.revoked || !answer(*it->second.entry)) return false;
    auto& askers = it->second.askers;
    if (std::find(askers.begin(), askers.end(), who) == askers.end()) askers.push_back(who);
    return true;
  }

  // No new askers from now on; every device that asked is told.
  void revoke(uint64_t id) {
    std::vector<key_asker> askers;
    std::vector<Device*> devs;
    {
      std::lock_guard<std::mutex> g(lock_);
      auto it = regs_.find(id);
      if (it == regs_.end()) return;
      it->second.revoked = true;
      askers = it->second.askers;
      devs = devices_;
    }
    for (const key_asker& a : askers)
      if (size_t(a.dev) < devs.size() && devs[size_t(a.dev)])
        devs[size_t(a.dev)]->queue_revoke(a.rank, id);
  }

  // An asker is done with the registration (asked or not: a device being freed says so).
  void acknowledged(uint64_t id, const key_asker& who) {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(id);
    if (it != regs_.end()) std::erase(it->second.askers, who);
  }

  // True once no asker may still access it. An asker that died, or whose local device is
  // gone (nothing could tell it), will never acknowledge nor access again.
  bool idle(uint64_t id) {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(id);
    if (it == regs_.end()) return true;
    std::erase_if(it->second.askers, [&](const key_asker& a) {
      Device* d = size_t(a.dev) < devices_.size() ? devices_[size_t(a.dev)] : nullptr;
      return !d || !d->peer_alive(a.rank);
    });
    return it->second.askers.empty();
  }

  // Takes the record out, for the backend to free.
  std::unique_ptr<Entry> release(uint64_t id) {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(id);
    if (it == regs_.end()) return nullptr;
    std::unique_ptr<Entry> e = std::move(it->second.entry);
    regs_.erase(it);
    return e;
  }

  // Every record still registered (at shutdown).
  template <typename F>
  void for_each(F&& f) {
    std::lock_guard<std::mutex> g(lock_);
    for (auto& [id, r] : regs_) f(*r.entry);
  }

  void attach(int index, Device* d) {
    std::lock_guard<std::mutex> g(lock_);
    if (devices_.size() <= size_t(index)) devices_.resize(size_t(index) + 1, nullptr);
    devices_[size_t(index)] = d;
  }
  void detach(int index) {
    std::lock_guard<std::mutex> g(lock_);
    if (size_t(index) < devices_.size()) devices_[size_t(index)] = nullptr;
  }

 private:
  struct slot {
    std::unique_ptr<Entry> entry;
    bool revoked = false;
    std::vector<key_asker> askers;
  };
  std::mutex lock_;
  std::map<uint64_t, slot> regs_;
  std::vector<Device*> devices_;
};

}  // namespace weft::net
