// SPDX-License-Identifier: BSD-3-Clause
// Buffer lists of 1..64 entries with mixed sizes: sends and active messages gathered into
// one message, receives scattered, puts and gets between a local list and one region or a
// remote list, with and without notification; truncation; the errors of bad lists.
#include <vector>

#include "mp_common.hpp"
#include "mp_scenarios.hpp"

using namespace mp;

namespace {

// `count` entries of mixed sizes (zero, tiny, around the eager limit, large) in `arena`.
std::vector<weft::buffer_t> make_list(std::vector<unsigned char>& arena, size_t count,
                                      size_t salt) {
  static const size_t sizes[] = {0, 1, 8, 100, 4096, 8000, 70000, 3, 512, 33};
  std::vector<weft::buffer_t> list(count);
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += sizes[(i + salt) % 10] + 16;
  arena.assign(total, 0);
  size_t off = 0;
  for (size_t i = 0; i < count; ++i) {
    list[i] = {arena.data() + off, sizes[(i + salt) % 10]};
    off += list[i].size + 16;  // gaps between entries stay untouched
  }
  return list;
}

size_t list_total(size_t count, size_t salt) {
  std::vector<unsigned char> arena;
  size_t t = 0;
  for (auto& b : make_list(arena, count, salt)) t += b.size;
  return t;
}

// Another partition of exactly `total` bytes into at most 64 entries, with 16-byte gaps.
std::vector<weft::buffer_t> partition(std::vector<unsigned char>& arena, size_t total) {
  static const size_t sizes[] = {7, 300, 9000, 1, 0, 64};
  std::vector<size_t> parts;
  size_t left = total;
  for (size_t i = 0; left && parts.size() < weft::max_buffers - 1; ++i) {
    parts.push_back(std::min(left, sizes[i % 6]));
    left -= parts.back();
  }
  parts.push_back(left);
  arena.assign(total + 16 * parts.size(), 0);
  std::vector<weft::buffer_t> list;
  size_t off = 0;
  for (size_t n : parts) {
    list.push_back({arena.data() + off, n});
    off += n + 16;
  }
  return list;
}

size_t total_of(const std::vector<weft::buffer_t>& l) {
  size_t t = 0;
  for (auto& b : l) t += b.size;
  return t;
}

// Fills the list as one stream with pattern `seed`, or checks it.
void fill_list(const std::vector<weft::buffer_t>& l, size_t seed) {
  std::vector<unsigned char> all(total_of(l));
  fill(all.data(), all.size(), seed);
  size_t off = 0;
  for (auto& b : l) {
    if (b.size) memcpy(b.base, all.data() + off, b.size);
    off += b.size;
  }
}
bool list_holds(const std::vector<weft::buffer_t>& l, size_t seed, size_t upto = SIZE_MAX) {
  std::vector<unsigned char> all(total_of(l));
  size_t off = 0;
  for (auto& b : l) {
    if (b.size) memcpy(all.data() + off, b.base, b.size);
    off += b.size;
  }
  return verify(all.data(), std::min(upto, all.size()), seed) == SIZE_MAX;
}
bool gaps_zero(const std::vector<weft::buffer_t>& l) {
  for (size_t i = 0; i < l.size(); ++i) {
    const unsigned char* end = static_cast<unsigned char*>(l[i].base) + l[i].size;
    for (size_t k = 0; k < 16; ++k)
      if (end[k] != 0) return false;
  }
  return true;
}

weft::status_t complete(weft::status_t s, weft::comp_t sync) {
  if (!s.error.is_posted()) return s;
  weft::status_t out;
  wait_sync(sync, &out);
  return out;
}

void two_sided(int me, int to, int from) {
  weft::comp_t ss = weft::alloc_sync(), rs = weft::alloc_sync();
  weft::comp_t amq = weft::alloc_cq();
  weft::rcomp_t rc = weft::register_rcomp(amq);
  weft::barrier();  // every rank registered before anyone sends to it
  for (size_t count : {1, 2, 7, 13, 64}) {
    for (size_t salt : {0, 5}) {
      const size_t seed = count * 10 + salt;
      std::vector<unsigned char> sa, ra;
      auto send_list = make_list(sa, count, salt + size_t(me));
      const size_t total = total_of(send_list);
      const size_t peer_total = list_total(count, salt + size_t(from));
      auto recv_list = partition(ra, peer_total);
      fill_list(send_list, seed + size_t(me));
      weft::status_t r = post_until([&] {
        return weft::post_recv_x(from, nullptr, 0, 50, rs)
            .buffers(recv_list.data(), recv_list.size())();
      });
      weft::status_t s = post_until([&] {
        return weft::post_send_x(to, nullptr, 0, 50, ss).buffers(send_list.data(), count)();
      });
      s = complete(s, ss);
      CHECK(s.error.is_done());
      CHECK_EQ(s.size, total);
      r = complete(r, rs);
      CHECK(r.error.is_done());
      CHECK_EQ(r.size, peer_total);
      CHECK_EQ(r.rank, from);
      CHECK(list_holds(recv_list, seed + size_t(from), peer_total));
      CHECK(gaps_zero(recv_list));

      // The same list as an active message: one contiguous message at the target.
      s = post_until([&] {
        return weft::post_am_x(to, nullptr, 0, ss, rc)
            .tag(weft::tag_t(seed))
            .buffers(send_list.data(), count)();
      });
      s = complete(s, ss);
      CHECK(s.error.is_done());
      weft::status_t am = wait_cq(amq);
      CHECK(am.error.is_done());
      CHECK_EQ(am.size, peer_total);
      CHECK_EQ(am.tag, weft::tag_t(seed));
      CHECK_EQ(verify(am.buf, am.size, seed + size_t(from)), SIZE_MAX);
      std::free(am.buf);
      weft::barrier();
    }
  }
  // A message larger than the whole list: truncated, the list holds its beginning.
  std::vector<unsigned char> big(9000);
  fill(big.data(), big.size(), 9);
  std::vector<unsigned char> a1(100), a2(50);
  weft::buffer_t small[2] = {{a1.data(), a1.size()}, {a2.data(), a2.size()}};
  weft::status_t r =
      post_until([&] { return weft::post_recv_x(from, nullptr, 0, 51, rs).buffers(small, 2)(); });
  weft::status_t s =
      post_until([&] { return weft::post_send(to, big.data(), big.size(), 51, ss); });
  complete(s, ss);
  r = complete(r, rs);
  CHECK(r.error == weft::errorcode_t::error_truncated);
  CHECK_EQ(r.size, size_t(150));
  CHECK_EQ(verify(a1.data(), 100, 9), SIZE_MAX);
  CHECK(memcmp(a2.data(), big.data() + 100, 50) == 0);
  weft::free_comp(&ss);
  weft::free_comp(&rs);
  weft::free_comp(&amq);
}

// Every rank exposes two regions; lists scatter over both.
void one_sided(int me, int to, int from) {
  constexpr size_t kRegion = 1 << 20;
  std::vector<unsigned char> r1(kRegion + 2 * 64, 0), r2(kRegion + 2 * 64, 0);
  weft::mr_t m1 = weft::register_memory(r1.data() + 64, kRegion);
  weft::mr_t m2 = weft::register_memory(r2.data() + 64, kRegion);
  weft::rmr_t mine[2] = {weft::get_rmr(m1), weft::get_rmr(m2)}, theirs[2];
  {
    weft::comp_t ss = weft::alloc_sync(), rs = weft::alloc_sync();
    weft::status_t r =
        post_until([&] { return weft::post_recv(to, theirs, sizeof(theirs), 60, rs); });
    weft::status_t s =
        post_until([&] { return weft::post_send(from, mine, sizeof(mine), 60, ss); });
    complete(s, ss);
    complete(r, rs);
    weft::free_comp(&ss);
    weft::free_comp(&rs);
  }
  weft::comp_t cq = weft::alloc_cq(), sync = weft::alloc_sync();
  weft::rcomp_t rc = weft::register_rcomp(cq);
  weft::barrier();  // every rank registered before anyone sends to it
  for (bool notify : {false, true}) {
    for (size_t count : {1, 3, 64}) {
      const size_t seed = count + (notify ? 1000 : 0) + size_t(me);
      std::vector<unsigned char> la;
      auto local = make_list(la, count, count);
      const size_t total = total_of(local);
      // Put the list into one place of region 1, then get it back into another list.
      std::fill(r1.begin(), r1.end(), 0);
      std::fill(r2.begin(), r2.end(), 0);
      weft::barrier();  // nobody writes into a region before its owner cleared it
      fill_list(local, seed);
      auto put =
          weft::post_put_x(to, nullptr, 0, sync, 1000, theirs[0]).buffers(local.data(), count);
      if (notify) put.remote_comp(rc).tag(7);
      weft::status_t s = complete(post_until([&] { return put(); }), sync);
      CHECK(s.error.is_done());
      CHECK_EQ(s.size, total);
      if (notify) {
        weft::status_t t = wait_cq(cq);  // my own region, written by `from`
        CHECK_EQ(t.rank, from);
        CHECK_EQ(t.tag, weft::tag_t(7));
        CHECK(t.buf == r1.data() + 64 + 1000);
      }
      weft::barrier();
      // Whatever `from` put is in my region 1 at 1000 (its list had the same sizes).
      CHECK_EQ(verify(r1.data() + 64 + 1000, total, seed - size_t(me) + size_t(from)), SIZE_MAX);
      CHECK_EQ(r1[64 + 999], 0);
      CHECK_EQ(r1[64 + 1000 + total], 0);
      std::vector<unsigned char> ga;
      auto exact = partition(ga, total);
      {
        auto get = weft::post_get_x(to, nullptr, 0, sync, 1000, theirs[0])
                       .buffers(exact.data(), exact.size());
        if (notify) get.remote_comp(rc).tag(8);
        s = complete(post_until([&] { return get(); }), sync);
        CHECK(s.error.is_done());
        CHECK(list_holds(exact, seed));
        if (notify) {
          weft::status_t t = wait_cq(cq);
          CHECK_EQ(t.tag, weft::tag_t(8));
          CHECK_EQ(t.size, total);
        }
      }
      weft::barrier();
      // One local buffer scattered over both remote regions in three pieces.
      std::vector<unsigned char> one(3000);
      fill(one.data(), one.size(), seed);
      weft::rbuffer_t rlist[3] = {
          {theirs[1], 10, 1000}, {theirs[0], 500000, 1}, {theirs[1], 40000, 1999}};
      auto scatter = weft::post_put_x(to, one.data(), one.size(), sync, 0, weft::rmr_t{})
                         .remote_buffers(rlist, 3);
      if (notify) scatter.remote_comp(rc).tag(9);
      s = complete(post_until([&] { return scatter(); }), sync);
      CHECK(s.error.is_done());
      if (notify) {
        weft::status_t t = wait_cq(cq);
        CHECK_EQ(t.tag, weft::tag_t(9));
        CHECK_EQ(t.size, size_t(3000));
        CHECK(t.buf == r2.data() + 64 + 10);
      }
      weft::barrier();
      std::vector<unsigned char> expect(3000);
      fill(expect.data(), 3000, seed - size_t(me) + size_t(from));
      CHECK(memcmp(r2.data() + 64 + 10, expect.data(), 1000) == 0);
      CHECK_EQ(r1[64 + 500000], expect[1000]);
      CHECK(memcmp(r2.data() + 64 + 40000, expect.data() + 1001, 1999) == 0);
      // Gather them back with a get from the same remote list.
      std::vector<unsigned char> got(3000);
      s = complete(post_until([&] {
                     return weft::post_get_x(to, got.data(), got.size(), sync, 0, weft::rmr_t{})
                         .remote_buffers(rlist, 3)();
                   }),
                   sync);
      CHECK(s.error.is_done());
      CHECK(got == one);
      weft::barrier();
    }
  }
  // Bad lists: named, nothing posted.
  char x[8];
  weft::buffer_t ok{x, 8};
  std::vector<weft::buffer_t> many(65, ok);
  std::string e =
      error_of([&] { weft::post_send_x(to, nullptr, 0, 1, sync).buffers(many.data(), 65)(); });
  CHECK(contains(e, "post_send") && contains(e, "buffers") && contains(e, "65 entries"));
  e = error_of([&] { weft::post_send_x(to, nullptr, 0, 1, sync).buffers(&ok, 0)(); });
  CHECK(contains(e, "0 entries"));
  weft::buffer_t null_entry[2] = {ok, {nullptr, 5}};
  e = error_of([&] { weft::post_send_x(to, nullptr, 0, 1, sync).buffers(null_entry, 2)(); });
  CHECK(contains(e, "buffers[1].base") && contains(e, "nullptr"));
  e = error_of([&] { weft::post_send_x(to, x, 8, 1, sync).buffers(&ok, 1)(); });
  CHECK(contains(e, "local_buffer") && contains(e, "replaces"));
  weft::rbuffer_t rbad[2] = {{theirs[0], 0, 4}, {theirs[0], kRegion - 2, 4}};
  e = error_of([&] { weft::post_put_x(to, x, 8, sync, 0, {}).remote_buffers(rbad, 2)(); });
  CHECK(contains(e, "post_put") && contains(e, "remote_buffers[1]") && contains(e, "overruns"));
  e = error_of([&] { weft::post_put_x(to, x, 7, sync, 0, {}).remote_buffers(rbad, 1)(); });
  CHECK(contains(e, "remote_buffers") && contains(e, "differs"));
  CHECK_EQ(weft::cq_size(cq), size_t(0));
  weft::barrier();
  weft::free_comp(&cq);
  weft::free_comp(&sync);
  weft::deregister_memory(&m1);
  weft::deregister_memory(&m2);
}

}  // namespace

int scenario_lists() {
  const int me = weft::get_rank_me(), n = weft::get_rank_n();
  two_sided(me, (me + 1) % n, (me - 1 + n) % n);
  one_sided(me, (me + 1) % n, (me - 1 + n) % n);
  return finish("lists");
}
