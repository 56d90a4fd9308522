#include "net/shm/regions.hpp"

#include "bootstrap/bootstrap.hpp"
#include "util/fail.hpp"

namespace weft::net::shm {

region_table::region_table(bootstrap::bootstrap& b, int context_id, size_t nentries)
    : me_(b.rank()), nentries_(nentries) {
  const int me = me_, n = b.size();
  // One page of header: the attach counter, then the entries (slot 0 is never used).
  const size_t bytes = 4096 + sizeof(region_entry) * nentries;
  segs_.resize(size_t(n));
  tables_.resize(size_t(n));
  std::string name;
  if (n > 1)
    name = "/weft-" + b.job_id() + "-" + std::to_string(context_id) + "-mr-" + std::to_string(me);
  segs_[size_t(me)] = std::make_unique<segment>();
  segs_[size_t(me)]->create(name, bytes);
  char* base = static_cast<char*>(segs_[size_t(me)]->base());
  auto* attached = new (base) std::atomic<uint32_t>(0);
  auto* own = reinterpret_cast<region_entry*>(base + 4096);
  for (size_t i = 0; i < nentries; ++i) {
    auto* e = new (&own[i]) region_entry{};
    e->state.store(0, std::memory_order_relaxed);
    e->users.store(0, std::memory_order_relaxed);
  }
  tables_[size_t(me)] = own;
  for (uint32_t i = uint32_t(nentries) - 1; i >= 1; --i) free_.push_back(i);
  // The fence even when alone: in a mixed job it is collective over every host.
  const std::string key = "shm-mr-" + std::to_string(context_id);
  if (n > 1) b.put(key, name);
  b.fence();
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    segs_[size_t(r)] = std::make_unique<segment>();
    segs_[size_t(r)]->attach(b.get(r, key), bytes);
    char* pb = static_cast<char*>(segs_[size_t(r)]->base());
    tables_[size_t(r)] = reinterpret_cast<region_entry*>(pb + 4096);
    reinterpret_cast<std::atomic<uint32_t>*>(pb)->fetch_add(1, std::memory_order_acq_rel);
  }
  segs_[size_t(me)]->unlink_when_attached(*attached, uint32_t(n - 1), "region table");
}

region_entry* region_table::entry(int rank, uint64_t key) const {
  if (rank < 0 || size_t(rank) >= tables_.size() || key == 0 || key >= nentries_) return nullptr;
  return &tables_[size_t(rank)][key];
}

rkey_t region_table::add(void* base, size_t size) {
  uint32_t slot;
  {
    std::lock_guard<std::mutex> g(lock_);
    if (free_.empty())
      util::fail("register_memory (shm)", "regions", std::to_string(nentries_ - 1),
                 "every slot of the region table is in use (WEFT_SHM_REGIONS)");
    slot = free_.back();
    free_.pop_back();
  }
  region_entry* e = entry(me_, slot);
  e->base = reinterpret_cast<uint64_t>(base);
  e->size = size;
  // A slot's generation only grows: a handle from an earlier registration never matches.
  const uint64_t gen = (e->state.load(std::memory_order_relaxed) >> 1) + 1;
  e->state.store(gen << 1 | 1, std::memory_order_seq_cst);
  return rkey_t{slot, gen};
}

void region_table::retire(rkey_t k) {
  entry(me_, k.key)->state.store(k.generation << 1, std::memory_order_seq_cst);
}

bool region_table::idle(rkey_t k) const {
  return entry(me_, k.key)->users.load(std::memory_order_seq_cst) == 0;
}

void region_table::recycle(rkey_t k) {
  std::lock_guard<std::mutex> g(lock_);
  free_.push_back(uint32_t(k.key));
}

const char* region_table::check(int rank, rkey_t k, uint64_t addr, size_t size) const {
  if (k.key == 0) return nullptr;
  region_entry* e = entry(rank, k.key);
  if (!e) return "unknown region key";
  if (e->state.load(std::memory_order_seq_cst) != (k.generation << 1 | 1))
    return "the region has been deregistered";
  if (addr < e->base || size > e->size || addr - e->base > e->size - size)
    return "access outside the registered region";
  return nullptr;
}

const char* region_table::acquire(int rank, rkey_t k, uint64_t addr, size_t size) {
  if (k.key == 0) return nullptr;
  region_entry* e = entry(rank, k.key);
  if (!e) return "unknown region key";
  // The increment and the owner's retire are both sequentially consistent: either the
  // owner sees this access and waits for it, or this load sees the region retired.
  e->users.fetch_add(1, std::memory_order_seq_cst);
  const char* why = check(rank, k, addr, size);
  if (why) e->users.fetch_sub(1, std::memory_order_release);
  return why;
}

void region_table::release(int rank, rkey_t k) {
  if (k.key == 0) return;
  if (region_entry* e = entry(rank, k.key)) e->users.fetch_sub(1, std::memory_order_release);
}

}  // namespace weft::net::shm
