// SPDX-License-Identifier: BSD-3-Clause
#include "match/matching_engine.hpp"

#include "util/mpmc_queue.hpp"

namespace weft::impl {

matching_engine_impl::matching_engine_impl(uint32_t id, size_t nbuckets, make_key_fn_t user_fn)
    : id_(id),
      mask_(util::round_up_pow2(nbuckets ? nbuckets : 1) - 1),
      user_fn_(user_fn),
      buckets_(new bucket[mask_ + 1]) {}

match_key matching_engine_impl::make_key(int rank, tag_t tag, matching_policy_t policy) const {
  if (user_fn_) return match_key{user_fn_(rank, tag, policy), 0};
  uint64_t r = (policy == matching_policy_t::rank_tag || policy == matching_policy_t::rank_only)
                   ? uint64_t(uint32_t(rank))
                   : 0;
  uint64_t t = (policy == matching_policy_t::rank_tag || policy == matching_policy_t::tag_only)
                   ? uint64_t(tag)
                   : 0;
  return match_key{(r << 32) | (t & 0xffffffffu), t >> 32};
}

match_entry* matching_engine_impl::unlink_first(bucket& b, const match_key& key, uint8_t policy,
                                                entry_type want) {
  match_entry* prev = nullptr;
  for (match_entry* e = b.head; e; prev = e, e = e->next) {
    if (e->key == key && e->policy == policy && e->type == want) {
      (prev ? prev->next : b.head) = e->next;
      if (b.tail == e) b.tail = prev;
      e->next = nullptr;
      return e;
    }
  }
  return nullptr;
}

match_entry* matching_engine_impl::insert(match_entry* e) {
  bucket& b = bucket_of(e->key, e->policy);
  entry_type want = e->type == entry_type::send ? entry_type::recv : entry_type::send;
  util::lock_guard<util::spinlock> g(b.lock);
  if (match_entry* m = unlink_first(b, e->key, e->policy, want)) return m;
  e->next = nullptr;
  (b.tail ? b.tail->next : b.head) = e;
  b.tail = e;
  return nullptr;
}

match_entry* matching_engine_impl::take(const match_key& key, uint8_t policy, entry_type want) {
  bucket& b = bucket_of(key, policy);
  util::lock_guard<util::spinlock> g(b.lock);
  if (!b.head) return nullptr;
  return unlink_first(b, key, policy, want);
}

std::vector<match_entry*> matching_engine_impl::remove_recvs_from(
    int rank, bool (*take)(const match_entry*, const void*), const void* ctx) {
  std::vector<match_entry*> out;
  for (size_t i = 0; i <= mask_; ++i) {
    bucket& b = buckets_[i];
    util::lock_guard<util::spinlock> g(b.lock);
    match_entry* prev = nullptr;
    for (match_entry* e = b.head; e;) {
      match_entry* next = e->next;
      if (e->type == entry_type::recv && e->rank == rank && (!take || take(e, ctx))) {
        (prev ? prev->next : b.head) = next;
        if (b.tail == e) b.tail = prev;
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
    for (match_entry* e = b.head; e; e = e->next) ++n;
  }
  return n;
}

}  // namespace weft::impl
