// SPDX-License-Identifier: BSD-3-Clause
// A distributed array over one-sided put and get: each rank owns a block and hands the
// block's remote handle to every peer. Writers put with notification, so an owner learns
// which of its elements changed without any message of its own; readers get. The blocks
// come from alloc_memory: peers on the same host then put and get with a plain memcpy
// through their mapping of the block (--registered: a std::vector registered instead).
// A rank keeps taking notifications while it waits for its own put: a full notification
// queue holds back every put into it, this rank's own too.
//   weftrun -n 4 distributed_array [elements_per_rank] [--bench] [--registered]
// --bench also times get and put of whole blocks to the next rank (bandwidth per size).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>
#include <weft/weft.hpp>

namespace {

class distributed_array {
 public:
  distributed_array(size_t per_rank, bool registered)
      : me_(weft::get_rank_me()),
        n_(weft::get_rank_n()),
        per_rank_(per_rank),
        own_(registered ? per_rank : 0) {
    mr_ = registered ? weft::register_memory(own_.data(), per_rank * sizeof(double))
                     : weft::alloc_memory(per_rank * sizeof(double));
    block_ = std::span<double>(static_cast<double*>(mr_.get_attr_base()), per_rank);
    updates_ = weft::alloc_cq_x().depth(1 << 16)();
    rcomp_ = weft::register_rcomp(updates_);  // collective: same index everywhere
    done_ = weft::alloc_sync();
    handles_.resize(size_t(n_));
    exchange_handles();
  }
  ~distributed_array() {
    weft::barrier();
    weft::deregister_rcomp(rcomp_);
    own_.empty() ? weft::free_memory(&mr_) : weft::deregister_memory(&mr_);
    weft::free_comp(&updates_);
    weft::free_comp(&done_);
  }

  size_t size() const { return per_rank_ * size_t(n_); }
  int owner(size_t i) const { return int(i / per_rank_); }
  std::span<double> local_block() { return block_; }

  // Writes v[0..count) at global index i (within one block); the owner is notified.
  void put(size_t i, const double* v, size_t count) {
    const int r = owner(i);
    weft::status_t s;
    while ((s = weft::post_put_x(r, const_cast<double*>(v), count * sizeof(double), done_,
                                 (i % per_rank_) * sizeof(double), handles_[size_t(r)])
                    .remote_comp(rcomp_)
                    .tag(weft::tag_t(me_))())
               .error.is_retry())
      keep_updates();
    wait_for(s);
  }
  // Reads count elements at global index i (within one block).
  void get(size_t i, double* v, size_t count) {
    const int r = owner(i);
    weft::status_t s;
    while ((s = weft::post_get(r, v, count * sizeof(double), done_,
                               (i % per_rank_) * sizeof(double), handles_[size_t(r)]))
               .error.is_retry())
      keep_updates();
    wait_for(s);
  }
  // Takes the notifications of puts into this rank's block: (writer, first index, count).
  bool next_update(int* writer, size_t* index, size_t* count) {
    weft::status_t s;
    if (next_taken_ < taken_.size()) {
      s = taken_[next_taken_++];
      if (next_taken_ == taken_.size()) taken_.clear(), next_taken_ = 0;
    } else if (!(s = weft::cq_pop(updates_)).error.is_done()) {
      weft::progress();
      return false;
    }
    *writer = int(s.tag);
    *index = size_t(me_) * per_rank_ + size_t(static_cast<double*>(s.buf) - block_.data());
    *count = s.size / sizeof(double);
    return true;
  }

 private:
  // While this rank waits for its own put or get, it keeps taking the notifications of
  // puts into its block: a notified put completes once its notification is in the
  // target's queue, so a full queue holds back every writer, this rank's own puts too.
  void keep_updates() {
    weft::status_t u = weft::cq_pop(updates_);
    if (u.error.is_done())
      taken_.push_back(u);
    else
      weft::progress();
  }
  void wait_for(weft::status_t s) {
    if (s.error.is_posted())
      while (!weft::sync_test(done_, &s)) keep_updates();
    if (!s.error.is_done()) {
      fprintf(stderr, "rank %d: one-sided operation failed: %s\n", me_, s.error.get_str());
      std::exit(1);
    }
  }

  // Every rank sends its handle to every other (an all-to-all of 32-byte messages).
  void exchange_handles() {
    weft::rmr_t mine = weft::get_rmr(mr_);
    handles_[size_t(me_)] = mine;
    weft::comp_t got = weft::alloc_sync_x().threshold(size_t(2 * (n_ - 1)) + 1)();
    for (int r = 0; r < n_; ++r) {
      if (r == me_) continue;
      while (weft::post_recv(r, &handles_[size_t(r)], sizeof(mine), 77, got).error.is_retry())
        weft::progress();
    }
    for (int r = 0; r < n_; ++r) {
      if (r == me_) continue;
      weft::status_t s;
      while ((s = weft::post_send(r, &mine, sizeof(mine), 77, got)).error.is_retry())
        weft::progress();
      if (s.error.is_done()) (void)weft::comp_signal(got, s);  // a synchronizer takes any
    }
    (void)weft::comp_signal(got, weft::status_t{weft::errorcode_t::done});
    weft::sync_wait(got, nullptr);
    weft::free_comp(&got);
  }

  int me_, n_;
  size_t per_rank_;
  std::vector<double> own_;  // --registered: the block; otherwise empty
  std::span<double> block_;
  weft::mr_t mr_;
  weft::comp_t updates_, done_;
  weft::rcomp_t rcomp_;
  std::vector<weft::rmr_t> handles_;
  std::vector<weft::status_t> taken_;  // notifications taken while waiting (keep_updates)
  size_t next_taken_ = 0;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void bench(distributed_array& a, int me, int n) {
  const int to = (me + 1) % n;
  std::vector<double> buf(a.local_block().size());
  for (size_t bytes : {size_t(8), size_t(4096), size_t(65536), size_t(1) << 20, size_t(4) << 20}) {
    const size_t count = std::min(bytes / sizeof(double), buf.size());
    if (count == 0) continue;
    const int iters = bytes >= (size_t(1) << 20) ? 200 : 2000;
    for (int op = 0; op < 2; ++op) {
      weft::barrier();
      double t0 = now_s();
      for (int k = 0; k < iters; ++k) {
        if (op == 0)
          a.get(size_t(to) * (a.size() / size_t(n)), buf.data(), count);
        else
          a.put(size_t(to) * (a.size() / size_t(n)), buf.data(), count);
      }
      double dt = now_s() - t0;
      if (me == 0)
        printf("bench %s %8zu B: %8.3f us per op, %7.3f GB/s\n", op == 0 ? "get" : "put",
               count * sizeof(double), dt / iters * 1e6,
               double(count * sizeof(double)) * iters / dt / 1e9);
      // Drain the notifications our neighbour's puts left here.
      int w;
      size_t i, c;
      if (op == 1)
        for (int k = 0; k < iters;)
          if (a.next_update(&w, &i, &c)) ++k;
      weft::barrier();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t per_rank = 1 << 19;  // 4 MiB of doubles per rank
  bool do_bench = false, registered = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--bench")
      do_bench = true;
    else if (std::string(argv[i]) == "--registered")
      registered = true;
    else
      per_rank = std::strtoull(argv[i], nullptr, 10);
  }
  weft::g_runtime_init();
  int rc = 0;
  {
    const int me = weft::get_rank_me(), n = weft::get_rank_n();
    distributed_array a(per_rank, registered);
    for (double& x : a.local_block()) x = -1;
    weft::barrier();
    // Every rank writes the elements i with i mod n == its rank, value i + 0.5, one put of
    // one element each (small puts), so every owner hears from every rank.
    size_t sent = 0, updates = 0;
    std::vector<int> from(size_t(n), 0);
    // Takes one notification if there is one: the owner's side of the puts into its block.
    auto take_update = [&] {
      int w;
      size_t idx, c;
      if (!a.next_update(&w, &idx, &c)) return false;
      updates += c;
      if (w >= 0 && w < n) from[size_t(w)] += int(c);
      if (int(idx % size_t(n)) != w) {
        fprintf(stderr, "rank %d: element %zu written by rank %d\n", me, idx, w);
        rc = 1;
      }
      return true;
    };
    for (size_t i = size_t(me); i < a.size(); i += size_t(n)) {
      const double v = double(i) + 0.5;
      a.put(i, &v, 1);
      ++sent;
      take_update();  // keep the notification queue short while writing
    }
    // Every element of this rank's block is written exactly once, by rank index % n.
    while (updates < per_rank) take_update();
    weft::barrier();
    // Every rank reads the whole array back and checks it.
    std::vector<double> all(a.size());
    for (int r = 0; r < n; ++r)
      a.get(size_t(r) * per_rank, all.data() + size_t(r) * per_rank, per_rank);
    size_t wrong = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] != double(i) + 0.5) ++wrong;
    if (wrong) rc = 1;
    printf(
        "rank %d: %zu puts sent, %zu updates received (from each rank: %d..%d), read back %zu "
        "elements, %s\n",
        me, sent, updates, *std::min_element(from.begin(), from.end()),
        *std::max_element(from.begin(), from.end()), all.size(),
        wrong ? "WRONG VALUES" : "all correct");
    if (do_bench) bench(a, me, n);
  }
  weft::g_runtime_fina();
  return rc;
}
