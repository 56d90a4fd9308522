// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/regions.hpp"

#include "bootstrap/bootstrap.hpp"
#include "net/shm/layout.hpp"
#include "net/shm/shareable.hpp"
#include "util/fail.hpp"

namespace weft::net::shm {

namespace {
const char* const not_registered = "the region has been deregistered (or was never registered)";
const char* const no_region = "key 0 names no registered region (a handle made by hand?)";
}  // namespace

region_table::region_table(bootstrap::bootstrap& b, int context_id, size_t nentries)
    : me_(b.rank()), nentries_(uint32_t(nentries)), in_use_(nentries, false) {
  const int me = me_, n = b.size();
  // One page of header, then the entries (slot 0 is never used).
  static_assert(sizeof(header) <= 4096);
  const size_t bytes = 4096 + sizeof(region_entry) * nentries;
  segs_.resize(size_t(n));
  headers_.resize(size_t(n));
  tables_.resize(size_t(n));
  std::string name;
  if (n > 1)
    name = "/weft-" + b.job_id() + "-" + std::to_string(context_id) + "-mr-" + std::to_string(me);
  segs_[size_t(me)] = std::make_unique<segment>();
  segs_[size_t(me)]->create(name, bytes, "WEFT_SHM_REGIONS");
  char* base = static_cast<char*>(segs_[size_t(me)]->base());
  header* h = new (base) header{};
  h->attached.store(0, std::memory_order_relaxed);
  h->max_probe.store(0, std::memory_order_relaxed);
  h->cookie = b.cookie();
  auto* own = reinterpret_cast<region_entry*>(base + 4096);
  for (size_t i = 0; i < nentries; ++i) {
    auto* e = new (&own[i]) region_entry{};
    e->map_fd = -1;
    e->state.store(0, std::memory_order_relaxed);
    e->name_key.store(0, std::memory_order_relaxed);
    e->name_generation.store(0, std::memory_order_relaxed);
    e->users.store(0, std::memory_order_relaxed);
  }
  headers_[size_t(me)] = h;
  tables_[size_t(me)] = own;
  // The fence even when alone: in a mixed job it is collective over every host.
  const std::string key = "shm-mr-" + std::to_string(context_id);
  if (n > 1) b.put(key, name);
  b.fence();
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    segs_[size_t(r)] = std::make_unique<segment>();
    const std::string theirs = b.get(r, key);
    segs_[size_t(r)]->attach(theirs, bytes);
    char* pb = static_cast<char*>(segs_[size_t(r)]->base());
    headers_[size_t(r)] = reinterpret_cast<header*>(pb);
    if (headers_[size_t(r)]->cookie != b.cookie())
      fail_foreign_segment("alloc_runtime (shm region table)", b.job_rank(r), theirs);
    tables_[size_t(r)] = reinterpret_cast<region_entry*>(pb + 4096);
    headers_[size_t(r)]->attached.fetch_add(1, std::memory_order_acq_rel);
  }
  segs_[size_t(me)]->unlink_when_attached(h->attached, uint32_t(n - 1), "region table");
}

uint32_t region_table::home(rkey_t k) const {
  // A 64-bit finalizer over both halves: names that differ in either spread apart.
  uint64_t x = k.key ^ (k.generation * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  // Scaled into [0, nentries - 1) by a multiply, not a division: a put computes this twice
  // (at posting and at the owner), and a 64-bit division takes 30-90 cycles.
  return 1 + uint32_t(((x >> 32) * uint64_t(nentries_ - 1)) >> 32);
}

bool region_table::named(const region_entry& e, rkey_t k) {
  return e.name_key.load(std::memory_order_relaxed) == k.key &&
         e.name_generation.load(std::memory_order_relaxed) == k.generation;
}

const char* region_table::outside(const region_entry& e, uint64_t addr, size_t size) {
  if (addr < e.base || size > e.size || addr - e.base > e.size - size)
    return "access outside the registered region";
  return nullptr;
}

uint32_t region_table::add(void* base, size_t size, rkey_t name) {
  uint32_t slot = home(name), distance = 0;
  {
    std::lock_guard<std::mutex> g(lock_);
    if (used_ + 1 >= nentries_)
      util::fail("register_memory (shm)", "regions", std::to_string(nentries_ - 1),
                 "every slot of the region table is in use (WEFT_SHM_REGIONS)");
    while (in_use_[slot]) {
      slot = next(slot);
      ++distance;
    }
    in_use_[slot] = true;
    ++used_;
  }
  region_entry& e = tables_[size_t(me_)][slot];
  e.base = reinterpret_cast<uint64_t>(base);
  e.size = size;
  int fd = -1;
  uint64_t ino = 0, offset = 0;
  e.map_fd = find_shareable(base, size, fd, offset, ino) ? fd : -1;
  e.map_ino = ino;
  e.map_offset = offset;
  e.name_key.store(name.key, std::memory_order_relaxed);
  e.name_generation.store(name.generation, std::memory_order_relaxed);
  // Raised before the record goes live, so a peer that learns the name (by a message sent
  // after this returns) also sees how far to look.
  std::atomic<uint32_t>& reach = headers_[size_t(me_)]->max_probe;
  uint32_t seen = reach.load(std::memory_order_relaxed);
  while (seen < distance && !reach.compare_exchange_weak(seen, distance, std::memory_order_release))
    ;
  const uint64_t generation = (e.state.load(std::memory_order_relaxed) >> 1) + 1;
  e.state.store(generation << 1 | 1, std::memory_order_seq_cst);
  return slot;
}

void region_table::retire(uint32_t slot) {
  region_entry& e = tables_[size_t(me_)][slot];
  e.state.store(e.state.load(std::memory_order_relaxed) & ~uint64_t(1), std::memory_order_seq_cst);
}

bool region_table::idle(uint32_t slot) const {
  return tables_[size_t(me_)][slot].users.load(std::memory_order_seq_cst) == 0;
}

void region_table::recycle(uint32_t slot) {
  std::lock_guard<std::mutex> g(lock_);
  in_use_[slot] = false;
  --used_;
}

template <typename F>
const char* region_table::search(int rank, rkey_t k, F&& found) const {
  if (rank < 0 || size_t(rank) >= tables_.size()) return "no such rank on this host";
  region_entry* t = tables_[size_t(rank)];
  const uint32_t reach = headers_[size_t(rank)]->max_probe.load(std::memory_order_acquire);
  uint32_t slot = home(k);
  for (uint32_t p = 0; p <= reach; ++p, slot = next(slot)) {
    region_entry& e = t[slot];
    const uint64_t state = e.state.load(std::memory_order_acquire);
    if (!(state & 1) || !named(e, k)) continue;
    const char* why = not_registered;
    if (found(e, slot, state, why)) return why;
  }
  return not_registered;
}

const char* region_table::check(int rank, rkey_t k, uint64_t addr, size_t size) const {
  if (k.key == 0) return no_region;
  return search(rank, k, [&](region_entry& e, uint32_t, uint64_t, const char*& why) {
    why = outside(e, addr, size);
    return true;
  });
}

const char* region_table::acquire(int rank, rkey_t k, uint64_t addr, size_t size, uint32_t& held) {
  held = 0;
  if (k.key == 0) return no_region;
  return search(rank, k, [&](region_entry& e, uint32_t slot, uint64_t state, const char*& why) {
    // The increment and the owner's retire are both sequentially consistent: either the
    // owner sees this access and waits for it, or the second load sees the record retired
    // (or reused). Held and unchanged, the record's fields stay as read until released.
    e.users.fetch_add(1, std::memory_order_seq_cst);
    if (e.state.load(std::memory_order_seq_cst) != state || !named(e, k)) {
      e.users.fetch_sub(1, std::memory_order_release);
      return false;  // search on
    }
    why = outside(e, addr, size);
    if (why)
      e.users.fetch_sub(1, std::memory_order_release);
    else
      held = slot;
    return true;
  });
}

bool region_table::live(int rank, rkey_t k) const {
  if (k.key == 0) return false;
  return search(rank, k, [](region_entry&, uint32_t, uint64_t, const char*& why) {
           why = nullptr;
           return true;
         }) == nullptr;
}

bool region_table::shareable(int rank, rkey_t k) const {
  bool yes = false;
  if (k.key == 0) return false;
  search(rank, k, [&](region_entry& e, uint32_t, uint64_t, const char*&) {
    yes = e.map_fd >= 0;
    return true;
  });
  return yes;
}

void region_table::release(int rank, uint32_t slot) {
  if (slot == 0 || rank < 0 || size_t(rank) >= tables_.size()) return;
  tables_[size_t(rank)][slot].users.fetch_sub(1, std::memory_order_release);
}

}  // namespace weft::net::shm
