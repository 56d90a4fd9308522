// SPDX-License-Identifier: BSD-3-Clause
// Resources under contention: every item goes through exactly once, nothing is lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "backlog/backlog_queue.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/kvs_wire.hpp"
#include "bootstrap/pmi_wire.hpp"
#include "comp/comp.hpp"
#include "core/request.hpp"
#include "match/matching_engine.hpp"
#include "pool/packet_pool.hpp"
#include "util/index_stack.hpp"
#include "util/mpmc_array.hpp"
#include "util/mpmc_queue.hpp"
#include "util/small_copy.hpp"
#include "util/stream_copy.hpp"
#include "util/thread_index.hpp"

using namespace weft;
using namespace weft::impl;

namespace {
constexpr int kThreads = 4;

template <typename Fn>
void run_threads(int n, Fn&& fn) {
  std::vector<std::thread> ts;
  for (int t = 0; t < n; ++t) ts.emplace_back(fn, t);
  for (auto& t : ts) t.join();
}

// Signals `per` done statuses of rank `rank`, tagged 0, 1, ..., waiting out a full ring.
void signal_in_order(cq_impl& cq, int rank, int per) {
  for (int i = 0; i < per; ++i) {
    status_t s;
    s.error = errorcode_t::done;
    s.rank = rank;
    s.tag = tag_t(i);
    while (!cq.signal(s)) std::this_thread::yield();
  }
}

// Pops from a thread that never signals until the producers (`producing` of them left)
// have finished and the queue is drained. Producer p's statuses carry rank p and tags 0, 1,
// ...: each must come out done and in that order; next[p] counts those that did.
void pop_in_order(cq_impl& cq, const std::atomic<int>& producing, std::vector<int>& next) {
  // Read before the pop: a pop that finds nothing after every producer had finished
  // means the queue is drained.
  status_t s;
  for (;;) {
    const bool finished = producing.load() == 0;
    if (cq.pop(s)) {
      ASSERT_TRUE(s.error.is_done());
      ASSERT_EQ(s.tag, tag_t(next[size_t(s.rank)]++));
    } else if (finished) {
      break;
    }
  }
}
}  // namespace

TEST(CompletionQueue, ManyProducersManyConsumersDeliverEachStatusOnce) {
  cq_impl cq(1024);
  const int per = 20000;
  std::atomic<int> produced_done{0};
  std::vector<std::atomic<int>> seen(size_t(kThreads * per));
  run_threads(kThreads * 2, [&](int t) {
    if (t < kThreads) {
      for (int i = 0; i < per; ++i) {
        status_t s;
        s.error = errorcode_t::done;
        s.rank = t;
        s.tag = tag_t(t * per + i);
        while (!cq.signal(s)) std::this_thread::yield();
      }
      produced_done.fetch_add(1);
    } else {
      status_t s;
      for (;;) {
        if (cq.pop(s)) {
          seen[s.tag].fetch_add(1);
          EXPECT_EQ(s.rank, int(s.tag) / per);
        } else if (produced_done.load() == kThreads && cq.size() == 0) {
          if (!cq.pop(s)) break;
          seen[s.tag].fetch_add(1);
        }
      }
    }
  });
  for (auto& c : seen) ASSERT_EQ(c.load(), 1);
}

TEST(CompletionQueue, FullQueueRefusesInsteadOfGrowing) {
  cq_impl cq(4);
  status_t s;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(cq.signal(s));
  EXPECT_FALSE(cq.signal(s));
  EXPECT_TRUE(cq.pop(s));
  EXPECT_TRUE(cq.signal(s));
}

// A queue keeps a ring per signalling thread (util/sharded_queue.hpp): what one thread
// signalled comes out in its order, to a consumer that never signals.
TEST(CompletionQueue, EachProducersOrderIsKept) {
  cq_impl cq(256);
  const int per = 20000;
  std::atomic<int> producing{kThreads};
  std::vector<int> next(kThreads, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      signal_in_order(cq, t, per);
      producing.fetch_sub(1);
    });
  pop_in_order(cq, producing, next);
  for (auto& t : ts) t.join();
  for (int n : next) EXPECT_EQ(n, per);
}

// The depth bounds each signalling thread's ring: one thread's full ring refuses it (its
// sender sees retry) while another thread still has room of its own.
TEST(CompletionQueue, TheDepthBoundsEachSignallingThread) {
  cq_impl cq(4);
  status_t s;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(cq.signal(s));
  EXPECT_FALSE(cq.signal(s));
  std::thread other([&] {
    status_t o;
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(cq.signal(o));
    EXPECT_FALSE(cq.signal(o));
  });
  other.join();
  int n = 0;
  while (cq.pop(s)) ++n;
  EXPECT_EQ(n, 8);
}

// Threads of index 16 and up share one ring, with a compare-and-swap on its tail, while the
// lower ones each push into their own without one (util/sharded_queue.hpp): with 20
// producers alive at once some must be past 16, and every status still arrives once, in
// its producer's order, to a consumer that never signals.
TEST(CompletionQueue, ThreadsPastTheOwnRingsShareOneAndLoseNothing) {
  constexpr int producers = 20, per = 5000;
  cq_impl cq(64);
  std::atomic<int> producing{producers}, started{0};
  std::atomic<size_t> max_index{0};
  std::vector<int> next(producers, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < producers; ++t)
    ts.emplace_back([&, t] {
      size_t seen = max_index.load();
      const size_t mine = util::thread_index();
      while (mine > seen && !max_index.compare_exchange_weak(seen, mine)) {
      }
      // All alive at once, each with its index: no index is handed on to a later thread.
      started.fetch_add(1);
      while (started.load() < producers) std::this_thread::yield();
      signal_in_order(cq, t, per);
      producing.fetch_sub(1);
    });
  pop_in_order(cq, producing, next);
  for (auto& t : ts) t.join();
  EXPECT_GE(max_index.load(), size_t(16));  // the shared ring was used
  for (int n : next) EXPECT_EQ(n, per);
}

TEST(Synchronizer, ReadyAfterThresholdSignalsFromManyThreads) {
  const int per = 1000;
  sync_impl sync(size_t(kThreads * per));
  EXPECT_FALSE(sync.test(nullptr));
  run_threads(kThreads, [&](int t) {
    for (int i = 0; i < per; ++i) {
      status_t s;
      s.tag = tag_t(t * per + i);
      sync.signal(s);
    }
  });
  std::vector<status_t> out(size_t(kThreads * per));
  ASSERT_TRUE(sync.test(out.data()));
  std::set<tag_t> tags;
  for (auto& s : out) tags.insert(s.tag);
  EXPECT_EQ(tags.size(), size_t(kThreads * per));
  EXPECT_FALSE(sync.test(nullptr));  // reset for reuse
}

TEST(MatchingEngine, ConcurrentSendsAndReceivesPairUpExactly) {
  matching_engine_impl me(0, 64, nullptr);  // few buckets: force contention
  const int keys = 50, per_key = 200;
  std::vector<request> sends(size_t(keys * per_key)), recvs(size_t(keys * per_key));
  std::atomic<int> matched{0};
  std::vector<std::atomic<int>> recv_hits(recvs.size());
  run_threads(kThreads, [&](int t) {
    for (size_t i = size_t(t); i < sends.size(); i += kThreads) {
      for (int side = 0; side < 2; ++side) {
        request& r = side ? recvs[i] : sends[i];
        r.key = me.make_key(int(i % keys), tag_t(i % keys), matching_policy_t::rank_tag);
        r.policy = me.stored_policy(matching_policy_t::rank_tag);
        r.type = side ? entry_type::recv : entry_type::send;
        r.index = uint32_t(i);
        if (auto* m = static_cast<request*>(me.insert(&r))) {
          EXPECT_EQ(m->key, r.key);
          EXPECT_NE(m->type, r.type);
          request* recv = side ? &r : m;
          recv_hits[size_t(recv - recvs.data())].fetch_add(1);
          matched.fetch_add(1);
        }
      }
    }
  });
  EXPECT_EQ(matched.load(), keys * per_key);
  for (auto& h : recv_hits) ASSERT_EQ(h.load(), 1);
  EXPECT_EQ(me.entries(), 0u);
}

TEST(MatchingEngine, PoliciesDoNotCrossMatch) {
  matching_engine_impl me(0, 1024, nullptr);
  request s, r;
  s.key = me.make_key(1, 5, matching_policy_t::rank_tag);
  s.policy = me.stored_policy(matching_policy_t::rank_tag);
  s.type = entry_type::send;
  EXPECT_EQ(me.insert(&s), nullptr);
  // rank_only with the same rank builds a different key class: no match.
  r.key = me.make_key(1, 0, matching_policy_t::rank_only);
  r.policy = me.stored_policy(matching_policy_t::rank_only);
  r.type = entry_type::recv;
  EXPECT_EQ(me.insert(&r), nullptr);
  EXPECT_EQ(me.entries(), 2u);
  // FIFO among equal keys
  request s2;
  s2.key = s.key;
  s2.policy = s.policy;
  s2.type = entry_type::send;
  EXPECT_EQ(me.insert(&s2), nullptr);
  request r2;
  r2.key = s.key;
  r2.policy = s.policy;
  r2.type = entry_type::recv;
  EXPECT_EQ(me.insert(&r2), &s);
}

// One bucket holds every key: waiting receives and waiting sends of several keys side by
// side (match/matching_engine.hpp keeps a FIFO of each kind). Each key keeps its order,
// an arrival takes only the other kind, and cancel (remove_if) and a dead peer's sweep
// (remove_recvs_from) touch only receives.
TEST(MatchingEngine, OneBucketKeepsEachKeysOrderAndTheKindsApart) {
  matching_engine_impl me(0, 1, nullptr);
  const uint8_t pol = me.stored_policy(matching_policy_t::rank_tag);
  auto entry = [&](request& r, int rank, tag_t tag, entry_type type) {
    r.key = me.make_key(rank, tag, matching_policy_t::rank_tag);
    r.policy = pol;
    r.type = type;
    r.rank = rank;
    return &r;
  };
  // Receives A1 B1 A2 A3 posted; a send C from rank 2 waits beside them.
  request a1, b1, a2, a3, c;
  EXPECT_EQ(me.insert(entry(a1, 0, 7, entry_type::recv)), nullptr);
  EXPECT_EQ(me.insert(entry(b1, 1, 7, entry_type::recv)), nullptr);
  EXPECT_EQ(me.insert(entry(a2, 0, 7, entry_type::recv)), nullptr);
  EXPECT_EQ(me.insert(entry(a3, 0, 7, entry_type::recv)), nullptr);
  EXPECT_EQ(me.insert(entry(c, 2, 9, entry_type::send)), nullptr);
  EXPECT_EQ(me.entries(), 5u);
  // Sends for A and B take the oldest receive of their own key.
  request sa, sb;
  EXPECT_EQ(me.insert(entry(sb, 1, 7, entry_type::send)), &b1);
  EXPECT_EQ(me.insert(entry(sa, 0, 7, entry_type::send)), &a1);
  // A receive for C takes the waiting send; taking another send of C finds none.
  request rc;
  EXPECT_EQ(me.insert(entry(rc, 2, 9, entry_type::recv)), &c);
  EXPECT_EQ(me.take(c.key, pol, entry_type::send), nullptr);
  // Cancelling a receive of A takes the one asked for, not the oldest; a send is never it.
  EXPECT_EQ(me.remove_if(a2.key, pol, entry_type::recv, [&](match_entry* e) { return e == &a3; }),
            &a3);
  EXPECT_EQ(me.remove_if(a2.key, pol, entry_type::send, [](match_entry*) { return true; }),
            nullptr);
  // A send from rank 0 waits; rank 0 dies: its receive goes, the send stays.
  request s0;
  EXPECT_EQ(me.insert(entry(s0, 0, 8, entry_type::send)), nullptr);
  const std::vector<match_entry*> gone = me.remove_recvs_from(0);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], &a2);
  EXPECT_EQ(me.entries(), 1u);
  EXPECT_EQ(me.take(s0.key, pol, entry_type::send), &s0);
  EXPECT_EQ(me.entries(), 0u);
}

TEST(PacketPool, ThreadsStealAndNoPacketIsHeldTwice) {
  packet_pool_impl pool(256, 64);
  std::vector<std::atomic<int>> owner(64);
  for (auto& o : owner) o.store(-1);
  std::atomic<long> gets{0};
  auto slot_of = [&](void* p) { return size_t((static_cast<char*>(p) - pool.region()) / 256); };
  run_threads(kThreads, [&](int t) {
    std::vector<void*> held;
    for (int i = 0; i < 20000; ++i) {
      if (held.size() < 8 && (i % 3 != 2)) {
        if (void* p = pool.get()) {
          ASSERT_TRUE(pool.owns(p));
          int expect = -1;
          ASSERT_TRUE(owner[slot_of(p)].compare_exchange_strong(expect, t)) << "packet held twice";
          held.push_back(p);
          gets.fetch_add(1);
        }
      } else if (!held.empty()) {
        void* p = held.back();
        held.pop_back();
        owner[slot_of(p)].store(-1);
        pool.put(p);
      }
    }
    for (void* p : held) {
      owner[slot_of(p)].store(-1);
      pool.put(p);
    }
  });
  EXPECT_GT(gets.load(), 10000);
  EXPECT_EQ(pool.available(), 64u);
}

// A thread's private stack keeps at most npackets / 64 of the packets it puts back; the
// rest reach its deque, where another thread steals them.
TEST(PacketPool, PacketsPutByOneThreadReachAnotherButThePrivateStack) {
  const size_t n = 1024, bound = n / 64;
  packet_pool_impl pool(256, n);
  std::vector<void*> all;
  while (void* p = pool.get()) all.push_back(p);
  ASSERT_EQ(all.size(), n);
  std::atomic<int> stage{0};
  std::thread other([&] {
    for (void* p : all) pool.put(p);
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();  // alive: its stack stays private
  });
  while (stage.load() != 1) std::this_thread::yield();
  EXPECT_EQ(pool.available(), n);
  std::set<void*> again;
  while (void* p = pool.get()) ASSERT_TRUE(again.insert(p).second) << "packet handed out twice";
  EXPECT_GE(again.size(), n - bound);
  EXPECT_LT(again.size(), n);  // the other thread's stack is private: not reachable here
  stage = 2;
  other.join();  // and once it has exited, its stack is back in circulation
  while (void* p = pool.get()) ASSERT_TRUE(again.insert(p).second) << "packet handed out twice";
  EXPECT_EQ(again.size(), n);
  for (void* p : again) pool.put(p);
  EXPECT_EQ(pool.available(), n);
}

// Threads that come and go, each taking and returning packets: their indexes are reused
// and their private stacks come back, so the pool still serves every packet.
TEST(PacketPool, ShortLivedThreadsStrandNoPackets) {
  const size_t n = 256;
  packet_pool_impl pool(128, n);
  for (int t = 0; t < 1000; ++t) {
    std::thread([&] {
      void* got[8];
      for (auto& p : got) ASSERT_NE(p = pool.get(), nullptr);
      for (void* p : got) pool.put(p);
    }).join();
  }
  std::set<void*> all;
  while (void* p = pool.get()) ASSERT_TRUE(all.insert(p).second) << "packet handed out twice";
  EXPECT_EQ(all.size(), n);
  for (void* p : all) pool.put(p);
  size_t max_index = 0;
  for (int t = 0; t < 8; ++t)
    std::thread([&] { max_index = std::max(max_index, weft::util::thread_index()); }).join();
  EXPECT_LT(max_index, 8u);  // indexes of exited threads are given out again
}

TEST(PacketPool, ADoubleReturnIsRefused) {
  packet_pool_impl pool(128, 4);
  void* p = pool.get();
  ASSERT_NE(p, nullptr);
  pool.put(p);
  try {
    pool.put(p);
    FAIL() << "a packet returned twice was accepted";
  } catch (const weft::fatal_error& e) {
    EXPECT_NE(std::string(e.what()).find("put_upacket: packet = 0x"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("returned twice"), std::string::npos) << e.what();
  }
  std::set<void*> all;
  while (void* q = pool.get()) ASSERT_TRUE(all.insert(q).second) << "packet handed out twice";
  EXPECT_EQ(all.size(), 4u);
  for (void* q : all) pool.put(q);
}

TEST(SmallCopy, EveryLengthUpToSixtyFourCopiesExactlyAndNothingElse) {
  char src[80], dst[80];
  for (size_t i = 0; i < sizeof(src); ++i) src[i] = char(i * 7 + 1);
  for (size_t n = 0; n <= 64; ++n) {
    memset(dst, 0x5a, sizeof(dst));
    weft::util::small_copy(dst + 3, src + 5, n);
    for (size_t i = 0; i < sizeof(dst); ++i) {
      const char want = i >= 3 && i < 3 + n ? src[5 + i - 3] : char(0x5a);
      ASSERT_EQ(dst[i], want) << "length " << n << ", byte " << i;
    }
  }
}

// Non-temporal copies: every destination alignment (the head up to a line boundary goes
// by memcpy), lengths around whole lines, and not a byte outside [dst, dst + n).
TEST(StreamCopy, EveryAlignmentAndLengthCopiesExactlyAndNothingElse) {
  std::vector<char> src(1200), dst(1300);
  for (size_t i = 0; i < src.size(); ++i) src[i] = char(i * 13 + 5);
  for (size_t align = 0; align < 64; align += 7)
    for (size_t n : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(127),
                     size_t(128), size_t(200), size_t(1024), size_t(1100)}) {
      std::fill(dst.begin(), dst.end(), char(0x5a));
      char* d = dst.data() + ((64 - (reinterpret_cast<uintptr_t>(dst.data()) & 63)) & 63) + align;
      weft::util::stream_copy(d, src.data() + 3, n);
      weft::util::stream_fence();
      for (size_t i = 0; i < dst.size(); ++i) {
        const char* at = dst.data() + i;
        const char want = at >= d && at < d + n ? src[3 + size_t(at - d)] : char(0x5a);
        ASSERT_EQ(dst[i], want) << "alignment " << align << ", length " << n << ", byte " << i;
      }
    }
}

TEST(PacketPool, EmptyPoolReturnsNull) {
  packet_pool_impl pool(128, 3);
  void* a = pool.get();
  void* b = pool.get();
  void* c = pool.get();
  EXPECT_TRUE(a && b && c);
  EXPECT_EQ(pool.get(), nullptr);
  pool.put(b);
  EXPECT_EQ(pool.get(), b);
  pool.put(a);
  pool.put(b);
  pool.put(c);
}

// An item that succeeds on its third try; the tries are counted per item.
struct tried_item {
  int id;
};

TEST(BacklogQueue, ItemsRetryUntilTheySucceedFromManyThreads) {
  backlog_queue<tried_item> q(size_t(kThreads) * 500);
  std::vector<std::atomic<int>> tries(size_t(kThreads) * 500);
  std::atomic<int> done{0};
  auto run = [&](tried_item& it) {
    if (tries[size_t(it.id)].fetch_add(1) + 1 < 3) return false;
    done.fetch_add(1);
    return true;
  };
  run_threads(kThreads, [&](int t) {
    for (int i = 0; i < 500; ++i) {
      ASSERT_TRUE(q.push(tried_item{t * 500 + i}));
      q.drain(run);
    }
  });
  while (!q.empty()) q.drain(run);
  EXPECT_EQ(done.load(), kThreads * 500);
  for (auto& t : tries) EXPECT_EQ(t.load(), 3);
}

TEST(BacklogQueue, RefusesPastItsHardCapacityAndKeepsOrder) {
  backlog_queue<tried_item> q(40);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(q.push(tried_item{i}));
  EXPECT_FALSE(q.push(tried_item{40}));
  EXPECT_EQ(q.size(), 40u);
  // The item being tried keeps its place in the count: a push meanwhile finds no room.
  std::vector<int> order;
  q.drain([&](tried_item& it) {
    if (order.empty()) {
      EXPECT_FALSE(q.push(tried_item{99}));
    }
    order.push_back(it.id);
    return it.id % 2 == 0;
  });
  ASSERT_GE(order.size(), 32u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], int(i));
  EXPECT_EQ(q.size(), 40u - (order.size() + 1) / 2);
}

// Transfers waiting for one resource: tried oldest first, stopping at the first that
// cannot go, which keeps its place (and whatever run wrote into it); pushes meanwhile,
// even ones that grow the ring, queue behind.
TEST(BacklogQueue, InOrderDrainStopsAtTheFirstThatCannotGo) {
  backlog_queue<tried_item> q(1000);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(q.push(tried_item{i}));
  std::vector<int> order;
  int room = 3;  // three can go in the first drain
  EXPECT_EQ(q.drain_in_order([&](tried_item& it) {
    order.push_back(it.id);
    if (it.id == 0) {
      for (int i = 10; i < 40; ++i) EXPECT_TRUE(q.push(tried_item{i}));  // grows the ring
    }
    if (room == 0) {
      it.id += 1000;  // what run changes stays with the item
      return false;
    }
    --room;
    return true;
  }),
            3u);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(q.size(), 37u);
  order.clear();
  EXPECT_EQ(q.drain_in_order([&](tried_item& it) {
    order.push_back(it.id);
    return true;
  }),
            37u);
  ASSERT_EQ(order.size(), 37u);
  EXPECT_EQ(order[0], 1003);
  for (size_t i = 1; i < order.size(); ++i) EXPECT_EQ(order[i], int(i) + 3);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.drain_in_order([](tried_item&) { return true; }), 0u);
}

TEST(IndexStack, ConcurrentPopPushKeepsEveryIndexUnique) {
  util::index_stack st(128);
  std::vector<std::atomic<int>> held(128);
  run_threads(kThreads, [&](int) {
    for (int i = 0; i < 50000; ++i) {
      uint32_t x = st.pop();
      if (x == util::index_stack::empty) continue;
      ASSERT_EQ(held[x].fetch_add(1), 0);
      held[x].fetch_sub(1);
      st.push(x);
    }
  });
  std::set<uint32_t> all;
  for (uint32_t x; (x = st.pop()) != util::index_stack::empty;) all.insert(x);
  EXPECT_EQ(all.size(), 128u);
}

TEST(MpmcArray, ReadersSeeAppendsWhileItGrows) {
  util::mpmc_array<long> arr(2);
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      size_t n = arr.size();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(arr.get(i), long(i) * 3);
    }
  });
  for (long i = 0; i < 20000; ++i) arr.push_back(i * 3);
  stop.store(true);
  reader.join();
  EXPECT_EQ(arr.size(), 20000u);
  EXPECT_EQ(arr.get(50000), 0);
}

TEST(RequestSlab, StaleAndForgedHandlesAreRejected) {
  request_slab slab(8);
  request* r = slab.alloc(nullptr);
  ASSERT_NE(r, nullptr);
  r->publish(req_kind::rdv_send);
  uint64_t h = slab.handle(r);
  EXPECT_EQ(slab.lookup(h, req_kind::rdv_send), r);
  EXPECT_EQ(slab.lookup(h, req_kind::rdv_recv), nullptr);
  EXPECT_EQ(slab.lookup(h + (uint64_t(1) << 32), req_kind::rdv_send), nullptr);
  EXPECT_EQ(slab.lookup(1000, req_kind::rdv_send), nullptr);
  slab.free(r);
  EXPECT_EQ(slab.lookup(h, req_kind::rdv_send), nullptr);
  for (int i = 0; i < 8; ++i) EXPECT_NE(slab.alloc(nullptr), nullptr);
  EXPECT_EQ(slab.alloc(nullptr), nullptr);
}

// PMI_process_mapping: which node each rank is on (hydra and Slurm both publish it).
TEST(Bootstrap, ProcessMapping) {
  using weft::bootstrap::parse_process_mapping;
  using v = std::vector<int>;
  EXPECT_EQ(parse_process_mapping("(vector,(0,1,1))", 3), (v{0, 0, 0}));     // one host, hydra
  EXPECT_EQ(parse_process_mapping("(vector,(0,2,2))", 4), (v{0, 0, 1, 1}));  // block
  EXPECT_EQ(parse_process_mapping("(vector,(0,2,1))", 4), (v{0, 1, 0, 1}));  // cyclic
  EXPECT_EQ(parse_process_mapping("(vector,(0,2,1),(2,1,2))", 4), (v{0, 1, 2, 2}));
  EXPECT_EQ(parse_process_mapping("(vector,(3,1,2))", 2), (v{3, 3}));
  EXPECT_TRUE(parse_process_mapping("", 2).empty());
  EXPECT_TRUE(parse_process_mapping("(vector,(0,0,1))", 2).empty());
  EXPECT_TRUE(parse_process_mapping("(vector,(0,1))", 2).empty());
  EXPECT_TRUE(parse_process_mapping("(list,(0,1,1))", 2).empty());
  // A huge node count ends as soon as every rank has its node; a start that would
  // overflow is refused.
  EXPECT_EQ(parse_process_mapping("(vector,(0,2147483647,1))", 2), (v{0, 1}));
  EXPECT_TRUE(parse_process_mapping("(vector,(2147483647,2,1))", 2).empty());
  EXPECT_TRUE(parse_process_mapping("(vector,(-1,1,1))", 2).empty());
}

// PMI-2 frame lengths and bodies, PMI-1 lines: what the launcher sends, parsed strictly.
TEST(Bootstrap, PmiReplies) {
  using namespace weft::bootstrap;
  size_t n = 0;
  EXPECT_TRUE(parse_pmi2_length("42    ", &n));
  EXPECT_EQ(n, 42u);
  EXPECT_TRUE(parse_pmi2_length("000017", &n));
  EXPECT_EQ(n, 17u);
  EXPECT_TRUE(parse_pmi2_length("   113", &n));  // hydra pads on the left
  EXPECT_EQ(n, 113u);
  EXPECT_FALSE(parse_pmi2_length("-00001", &n));  // was SIZE_MAX bytes, then length_error
  EXPECT_FALSE(parse_pmi2_length("      ", &n));
  EXPECT_FALSE(parse_pmi2_length("4 2   ", &n));
  EXPECT_FALSE(parse_pmi2_length(" 4 2  ", &n));
  EXPECT_TRUE(parse_pmi2_length("999999", &n));  // the most 6 digits say: under the bound
  pmi_fields f = parse_pmi2_body("cmd=kvs-get-response;found=TRUE;value=a;;b;");
  EXPECT_EQ(f["value"], "a;b");
  EXPECT_EQ(parse_pmi1_line("cmd=get_result rc=0 value=x junk")["value"], "x");
}

namespace {
// A bootstrap whose other ranks' host records are given: rank 0 of records.size(), its own
// record the one publish_host writes.
class records_bootstrap final : public weft::bootstrap::bootstrap {
 public:
  explicit records_bootstrap(std::vector<std::string> records) : records_(std::move(records)) {
    size_ = int(records_.size());
    publish_host("here");
  }
  const char* name() const override { return "records"; }
  void put(const std::string& key, const std::string& value) override {
    if (key == "weft-host") records_[0] = value;
  }
  std::string get(int rank, const std::string&) override { return records_[size_t(rank)]; }
  void fence() override {}
  const std::string& mine() const { return records_[0]; }

 private:
  std::vector<std::string> records_;
};
}  // namespace

// Hosts and machines from the host records: a host is the part before the last '|', the
// machine the boot id after it. Network-namespace hosts of this machine count towards it
// (WEFT_YIELD=auto), so do ranks of this host without a boot id; another kernel does not.
TEST(Bootstrap, MachineCountsTheRanksOfThisKernel) {
  records_bootstrap probe({""});
  const std::string& rec = probe.mine();
  ASSERT_EQ(rec.rfind("node:here|", 0), 0u) << rec;
  const std::string boot = rec.substr(rec.find('|') + 1);
  ASSERT_FALSE(boot.empty()) << "no boot id read from /proc";
  records_bootstrap b({"", "node:here|", "node:ns2|" + boot, "node:ns3|" + boot, "node:far|other",
                       "id:a|b|" + boot});
  EXPECT_TRUE(b.same_host(1));  // no boot id: the host alone decides
  EXPECT_FALSE(b.same_host(2));
  EXPECT_FALSE(b.same_host(4));
  EXPECT_FALSE(b.same_host(5));    // "id:a|b": a '|' of the name stays in the name
  EXPECT_EQ(b.machine_size(), 5);  // 0, 1 (this host), 2, 3, 5 (this kernel); not 4
  records_bootstrap alone({"", "node:far|other"});
  EXPECT_EQ(alone.machine_size(), 1);
}

// weftrun's key-value requests: a HELLO names a rank only as a plain decimal number.
TEST(Bootstrap, KvsRequests) {
  using weft::bootstrap::parse_kvs_request;
  EXPECT_EQ(parse_kvs_request("HELLO 3").rank, 3);
  EXPECT_EQ(parse_kvs_request("HELLO abc").rank, -1);  // atoi made it rank 0
  EXPECT_EQ(parse_kvs_request("HELLO -1").rank, -1);
  EXPECT_EQ(parse_kvs_request("HELLO 3x").rank, -1);
  EXPECT_EQ(parse_kvs_request("HELLO 12345678901").rank, -1);
  auto h = parse_kvs_request("HELLO 2 00000000000000ff");
  EXPECT_EQ(h.rank, 2);
  EXPECT_TRUE(h.has_cookie);
  EXPECT_EQ(h.cookie, 0xffu);
  EXPECT_FALSE(parse_kvs_request("HELLO 2 ff").has_cookie);  // exactly 16 digits
  EXPECT_FALSE(parse_kvs_request("HELLO 2 00000000000000fg").has_cookie);
  EXPECT_FALSE(parse_kvs_request("HELLO 2 00000000000000ff ").has_cookie);
  auto p = parse_kvs_request("PUT key 6162");
  EXPECT_TRUE(p.has_value);
  EXPECT_EQ(p.key, "key");
  EXPECT_EQ(p.value, "6162");
  EXPECT_FALSE(parse_kvs_request("PUT key").has_value);
}
