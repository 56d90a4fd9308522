// SPDX-License-Identifier: BSD-3-Clause
#include "match/matching_engine.hpp"

#include "util/mpmc_queue.hpp"

namespace weft::impl {

matching_engine_impl::matching_engine_impl(uint32_t id, size_t nbuckets, make_key_fn_t user_fn)
    : id_(id),
      mask_(util::round_up_pow2(nbuckets ? nbuckets : 1) - 1),
      user_fn_(user_fn),
      buckets_(new bucket[mask_ + 1]) {}

namespace {
constexpr auto any_entry = [](const match_entry*) { return true; };
}

match_entry* matching_engine_impl::insert(match_entry* e) {
  bucket& b = bucket_of(e->key, e->policy);
  const int want = e->type == entry_type::send ? int(entry_type::recv) : int(entry_type::send);
  util::lock_guard<util::spinlock> g(b.lock);
  if (match_entry* m = unlink_first(b.waiting[want], e->key, e->policy, any_entry)) return m;
  fifo& mine = b.waiting[int(e->type)];
  e->next = nullptr;
  (mine.tail ? mine.tail->next : mine.head) = e;
  mine.tail = e;
  return nullptr;
}

match_entry* matching_engine_impl::take(const match_key& key, uint8_t policy, entry_type want) {
  bucket& b = bucket_of(key, policy);
  util::lock_guard<util::spinlock> g(b.lock);
  return unlink_first(b.waiting[int(want)], key, policy, any_entry);
}

std::vector<match_entry*> matching_engine_impl::remove_recvs_from(
    int rank, bool (*take)(const match_entry*, const void*), const void* ctx) {
  std::vector<match_entry*> out;
  for (size_t i = 0; i <= mask_; ++i) {
    fifo& f = buckets_[i].waiting[int(entry_type::recv)];
    util::lock_guard<util::spinlock> g(buckets_[i].lock);
    match_entry* prev = nullptr;
    for (match_entry* e = f.head; e;) {
      match_entry* next = e->next;
      if (e->rank == rank && (!take || take(e, ctx))) {
        (prev ? prev->next : f.head) = next;
        if (f.tail == e) f.tail = prev;
        e->next = nullptr;
        out.push_back(e);
      } else {
        prev = e;
      }
      e = next;
    }
  }
  return out;
}

size_t matching_engine_impl::entries() const {
  size_t n = 0;
  for (size_t i = 0; i <= mask_; ++i) {
    bucket& b = buckets_[i];
    util::lock_guard<util::spinlock> g(b.lock);
    for (const fifo& f : b.waiting)
      for (match_entry* e = f.head; e; e = e->next) ++n;
  }
  return n;
}

}  // namespace weft::impl
