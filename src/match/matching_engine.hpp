// SPDX-License-Identifier: BSD-3-Clause
// Matching engine (LCI paper 4.1.3): a hash table of buckets under their own spinlocks,
// each with two FIFOs of entries: sends that wait for a receive, and receives that wait for
// a send. insert() either removes and returns the oldest entry of the other FIFO with the
// same key, or appends the new entry to its own and returns nullptr. Two FIFOs, not one:
// with one, a window of receives posted under one key made each insert walk past all the
// receives before it (64 posted: 470 instructions a receive, against 40). Entries are
// intrusive (embedded in requests), so matching never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "util/generation.hpp"
#include "util/spinlock.hpp"
#include "weft/types.hpp"

namespace weft::impl {

enum class entry_type : uint8_t { send = 0, recv = 1 };

// What a send and a receive match on: the source rank and the 64-bit tag as the policy
// keeps them (rank << 32 | low tag bits, high tag bits), or a user function's key alone.
struct match_key {
  uint64_t lo = 0, hi = 0;
  bool operator==(const match_key& o) const { return lo == o.lo && hi == o.hi; }
};

struct match_entry {
  match_entry* next = nullptr;
  match_key key;
  int rank = -1;  // source rank of a send, expected rank of a receive (or -1)
  entry_type type = entry_type::send;
  uint8_t policy = 0;
};

class matching_engine_impl {
 public:
  WEFT_GENERATIONAL_MEMORY  // behind matching_engine_t handles, which carry a generation
  matching_engine_impl(uint32_t id, size_t nbuckets, make_key_fn_t user_fn);

  uint32_t id() const { return id_; }
  size_t nbuckets() const { return mask_ + 1; }
  // Inline: once per receive posted and once per send arriving.
  match_key make_key(int rank, tag_t tag, matching_policy_t policy) const {
    if (user_fn_) [[unlikely]]
      return match_key{user_fn_(rank, tag, policy), 0};
    const bool by_rank =
        policy == matching_policy_t::rank_tag || policy == matching_policy_t::rank_only;
    const bool by_tag =
        policy == matching_policy_t::rank_tag || policy == matching_policy_t::tag_only;
    const uint64_t r = by_rank ? uint64_t(uint32_t(rank)) : 0;
    const uint64_t t = by_tag ? uint64_t(tag) : 0;
    return match_key{(r << 32) | (t & 0xffffffffu), t >> 32};
  }
  // The policy stored in entries: keys made by a user function form one class of their own.
  uint8_t stored_policy(matching_policy_t p) const { return user_fn_ ? 0x80 : uint8_t(p); }

  match_entry* insert(match_entry* e);
  // Removes and returns a complementary entry without inserting anything.
  match_entry* take(const match_key& key, uint8_t policy, entry_type want);
  // Removes the first entry of type `type` with this key that satisfies pred.
  template <typename Pred>
  match_entry* remove_if(const match_key& key, uint8_t policy, entry_type type, Pred&& pred);
  // Removes every receive expecting `rank` (its sender died) that `take` accepts (all when
  // take is null).
  std::vector<match_entry*> remove_recvs_from(
      int rank, bool (*take)(const match_entry*, const void*) = nullptr, const void* ctx = nullptr);
  size_t entries() const;

 private:
  struct fifo {
    match_entry* head = nullptr;
    match_entry* tail = nullptr;
  };
  struct alignas(util::cache_line) bucket {
    util::spinlock lock;
    fifo waiting[2];  // by entry_type: sends, receives
  };
  bucket& bucket_of(const match_key& key, uint8_t policy) {
    uint64_t h = (key.lo ^ (key.hi * 0xC2B2AE3D27D4EB4Full) ^ (uint64_t(policy) << 61)) *
                 0x9E3779B97F4A7C15ull;
    return buckets_[(h >> 20) & mask_];
  }
  // The first entry of `f` with this key that `pred` accepts, taken out of the FIFO.
  template <typename Pred>
  static match_entry* unlink_first(fifo& f, const match_key& key, uint8_t policy, Pred&& pred) {
    match_entry* prev = nullptr;
    for (match_entry* e = f.head; e; prev = e, e = e->next) {
      if (e->key == key && e->policy == policy && pred(e)) {
        (prev ? prev->next : f.head) = e->next;
        if (f.tail == e) f.tail = prev;
        e->next = nullptr;
        return e;
      }
    }
    return nullptr;
  }

  uint32_t id_;
  size_t mask_;
  make_key_fn_t user_fn_;
  std::unique_ptr<bucket[]> buckets_;
};

template <typename Pred>
match_entry* matching_engine_impl::remove_if(const match_key& key, uint8_t policy, entry_type type,
                                             Pred&& pred) {
  bucket& b = bucket_of(key, policy);
  util::lock_guard<util::spinlock> g(b.lock);
  return unlink_first(b.waiting[int(type)], key, policy, pred);
}

}  // namespace weft::impl
