// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/peer_maps.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace weft::net::shm {

peer_maps::peer_maps(const region_table& regions, std::vector<pid_t> pids, int me)
    : regions_(regions), pids_(std::move(pids)) {
  ranks_.resize(pids_.size());
  for (size_t r = 0; r < pids_.size(); ++r)
    if (int(r) != me) ranks_[r] = std::make_unique<per_rank>();
}

peer_maps::~peer_maps() {
  for (auto& pr : ranks_) {
    if (!pr) continue;
    for (slot& s : pr->slots)
      if (s.base) munmap(s.base, s.len);
    if (pr->pidfd >= 0) close(pr->pidfd);
  }
}

char* peer_maps::map(int rank, rkey_t k, const region_entry& e, uint64_t addr, uint32_t& use) {
  if (e.map_fd < 0 || rank < 0 || size_t(rank) >= ranks_.size() || !ranks_[size_t(rank)])
    return nullptr;
  per_rank& pr = *ranks_[size_t(rank)];
  char* base = find(pr, k, use);
  if (!base) base = add(rank, pr, k, e, use);
  return base ? base + e.map_offset + (addr - e.base) : nullptr;
}

void peer_maps::done(int rank, uint32_t use) {
  ranks_[size_t(rank)]->slots[use].refs.fetch_sub(1, std::memory_order_release);
}

// Lock-free: counts this access in the slot mapping `k`, if any.
char* peer_maps::find(per_rank& pr, rkey_t k, uint32_t& use) {
  for (uint32_t i = 0; i < nslots; ++i) {
    slot& s = pr.slots[i];
    int64_t r = s.refs.load(std::memory_order_acquire);
    if (r < 0 || s.key.load(std::memory_order_relaxed) != k.key ||
        s.generation.load(std::memory_order_relaxed) != k.generation)
      continue;
    while (r >= 0 && !s.refs.compare_exchange_weak(r, r + 1, std::memory_order_acquire))
      ;
    if (r < 0) continue;  // emptied meanwhile
    // Counted; but the slot may have been emptied and refilled between the loads above
    // and the count: the name decides.
    if (s.key.load(std::memory_order_relaxed) == k.key &&
        s.generation.load(std::memory_order_relaxed) == k.generation) {
      use = i;
      return s.base;
    }
    s.refs.fetch_sub(1, std::memory_order_release);
  }
  return nullptr;
}

char* peer_maps::add(int rank, per_rank& pr, rkey_t k, const region_entry& e, uint32_t& use) {
  std::lock_guard<std::mutex> g(lock_);
  if (char* base = find(pr, k, use)) return base;  // another thread mapped it first
  uint32_t i = 0;
  if (pr.denied || !take_slot(rank, pr, i)) return nullptr;
  size_t len = 0;
  char* base = open_file(rank, pr, e, len);
  if (!base) return nullptr;
  slot& s = pr.slots[i];
  s.base = base;
  s.len = len;
  s.key.store(k.key, std::memory_order_relaxed);
  s.generation.store(k.generation, std::memory_order_relaxed);
  s.refs.store(1, std::memory_order_release);  // counting this access
  use = i;
  return base;
}

// An empty slot, or one whose region has been deregistered and that nobody copies
// through (emptied here: its mapping undone). Under lock_.
bool peer_maps::take_slot(int rank, per_rank& pr, uint32_t& index) {
  for (uint32_t i = 0; i < nslots; ++i)
    if (pr.slots[i].refs.load(std::memory_order_acquire) < 0) {
      index = i;
      return true;
    }
  for (uint32_t i = 0; i < nslots; ++i) {
    slot& s = pr.slots[i];
    const rkey_t k{s.key.load(std::memory_order_relaxed),
                   s.generation.load(std::memory_order_relaxed)};
    int64_t idle = 0;
    if (regions_.live(rank, k) ||
        !s.refs.compare_exchange_strong(idle, -1, std::memory_order_acquire))
      continue;
    munmap(s.base, s.len);
    s.base = nullptr;
    index = i;
    return true;
  }
  return false;
}

// Maps the owner's file behind record `e`, or nullptr (and `denied` when attaching to the
// owner is refused).
char* peer_maps::open_file(int rank, per_rank& pr, const region_entry& e, size_t& len) {
  if (pr.pidfd < 0) {
    pr.pidfd = int(syscall(SYS_pidfd_open, pids_[size_t(rank)], 0));
    if (pr.pidfd < 0) {
      pr.denied = true;
      return nullptr;
    }
  }
  const int fd = int(syscall(SYS_pidfd_getfd, pr.pidfd, e.map_fd, 0));
  if (fd < 0) {
    pr.denied = errno == EPERM || errno == ENOSYS;
    return nullptr;
  }
  struct stat st {};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && uint64_t(st.st_ino) == e.map_ino && st.st_size > 0) {
    len = size_t(st.st_size);
    base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  return base == MAP_FAILED ? nullptr : static_cast<char*>(base);
}

}  // namespace weft::net::shm
