// SPDX-License-Identifier: BSD-3-Clause
// Lanes over Weft: active messages into a completion queue, and send/receive. Dedicated
// resources give each lane its own device and completion queue; shared ones put every lane
// on the default device (each lane keeping its own queue), and shared_cq shares the queue
// too (a lane may pop another lane's message and hands it over through a counter).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

#include "lanes.hpp"

namespace bench {

struct weft_world {
  int me = 0, n = 1, nlanes = 1;
  resources res = resources::dedicated;
  std::vector<weft::device_t> devices;
  std::vector<weft::comp_t> cqs;
  std::vector<weft::rcomp_t> rcomps;
  // shared_cq: arrivals per lane, each on its own cache line (adjacent counters made every
  // hand-over a false-sharing miss for the other lanes: 8-9 M/s flat from 2 to 8 threads).
  struct alignas(64) slot {
    std::atomic<long> count{0};
  };
  std::unique_ptr<slot[]> mailbox;

  delivery how = delivery::malloc_buf;
  uint32_t block_us = 0;  // idle lanes sleep in blocking progress (bench --block-us)
  weft::comp_t handler;   // in_place: counts each lane's arrivals in its mailbox

  void init(int lanes, resources r, delivery d) {
    how = d;
    weft::g_runtime_init();
    me = weft::get_rank_me();
    n = weft::get_rank_n();
    nlanes = lanes;
    res = r;
    mailbox.reset(new slot[size_t(lanes)]);
    for (int t = 0; t < lanes; ++t) {
      // Collective and ordered: lane t's device and queue pair with the peer's lane t.
      devices.push_back(r == resources::dedicated ? weft::alloc_device()
                                                  : weft::get_default_device());
      if (d == delivery::in_place) {
        if (t == 0) handler = weft::alloc_handler([this](weft::status_t s) { arrived(s); });
        cqs.push_back(weft::alloc_cq());  // send/receive lanes still use one
        rcomps.push_back(weft::register_rcomp_x(handler).in_place(true)());
      } else if (r != resources::shared_cq || t == 0) {
        cqs.push_back(weft::alloc_cq());
        rcomps.push_back(
            weft::register_rcomp_x(cqs.back()).packet_delivery(d == delivery::packet)());
      } else {
        cqs.push_back(cqs[0]);
        rcomps.push_back(rcomps[0]);
      }
    }
  }
  // The in_place handler: reads the message where it arrived and counts it for its lane
  // (the tag). A dedicated lane's device is progressed by its own thread only, so its
  // count has one writer; shared devices may run it on any lane's thread.
  void arrived(const weft::status_t& s) {
    static thread_local uint64_t sum;  // what it read, so that it reads it
    slot& m = mailbox[s.tag];
    uint64_t v = 0;
    memcpy(&v, s.buf, s.size < sizeof(v) ? s.size : sizeof(v));
    sum += v;
    if (res == resources::dedicated)
      m.count.store(m.count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    else
      m.count.fetch_add(1, std::memory_order_release);
  }
  void barrier() { weft::barrier(); }
  // Bytes the devices moved by each shared-memory large-transfer mechanism so far
  // (pipelined copy, cross-memory attach): which one a bandwidth run used.
  std::pair<uint64_t, uint64_t> mechanism_bytes() const {
    return {sum(weft::counter_t::bytes_pipelined), sum(weft::counter_t::bytes_cross_memory)};
  }
  // Bytes this rank's devices took in with streaming stores (the target's choice).
  uint64_t streamed_bytes() const { return sum(weft::counter_t::bytes_streamed); }
  // Bytes of peers' split transfers this rank's devices read themselves (their halves).
  uint64_t split_bytes() const { return sum(weft::counter_t::bytes_split_read); }
  // Rendezvous sends whose data went ahead of the clear-to-send, and all rendezvous sends.
  std::pair<uint64_t, uint64_t> ahead_sends() const {
    return {sum(weft::counter_t::sent_ahead), sum(weft::counter_t::sent_rendezvous)};
  }
  // Counter c over this rank's devices (one shared device: counted once).
  uint64_t sum(weft::counter_t c) const {
    uint64_t n = 0;
    for (size_t t = 0; t < devices.size(); ++t) {
      if (t && res != resources::dedicated) break;
      n += devices[t].get_counter(c);
    }
    return n;
  }
  void fina() {
    weft::barrier();
    for (int t = 0; t < nlanes; ++t) {
      if (res == resources::dedicated) weft::free_device(&devices[size_t(t)]);
      if (res != resources::shared_cq || t == 0 || how == delivery::in_place)
        weft::free_comp(&cqs[size_t(t)]);
    }
    if (how == delivery::in_place) weft::free_comp(&handler);
    weft::g_runtime_fina();
  }
};

class weft_lane {
 public:
  weft_lane(weft_world& w, int lane, int peer)
      : w_(w),
        lane_(lane),
        peer_(peer),
        dev_(w.devices[size_t(lane)]),
        cq_(w.cqs[size_t(lane)]),
        rcomp_(w.rcomps[size_t(lane)]),
        scq_(weft::alloc_cq()) {}
  ~weft_lane() { weft::free_comp(&scq_); }

  void am_send(const void* buf, size_t size) {
    while (weft::post_am_x(peer_, const_cast<void*>(buf), size, weft::comp_t{}, rcomp_)
               .device(dev_)
               .tag(weft::tag_t(lane_))()
               .error.is_retry()) {
      idle();
    }
  }

  void am_wait() {
    if (w_.how == delivery::in_place) {  // the handler counted it during progress
      const std::atomic<long>& mine = w_.mailbox[size_t(lane_)].count;
      while (mine.load(std::memory_order_acquire) <= consumed_) idle();
      ++consumed_;
      return;
    }
    if (w_.res == resources::shared_cq) {
      std::atomic<long>& mine = w_.mailbox[size_t(lane_)].count;
      while (mine.load(std::memory_order_acquire) <= consumed_) {
        weft::status_t s = weft::cq_pop(cq_);
        if (s.error.is_done()) {
          w_.mailbox[s.tag].count.fetch_add(1, std::memory_order_release);
          release(s.buf);
        } else {
          idle();
        }
      }
      ++consumed_;
      return;
    }
    for (;;) {
      weft::status_t s = weft::cq_pop(cq_);
      if (s.error.is_done()) {
        release(s.buf);
        return;
      }
      idle();
    }
  }

  void send(void* buf, size_t size, int tag) {
    post([&] {
      return weft::post_send_x(peer_, buf, size, weft::tag_t(tag + lane_ * 2 * ack_tag), scq_)
          .device(dev_)();
    });
  }
  void recv(void* buf, size_t size, int tag) {
    post([&] {
      return weft::post_recv_x(peer_, buf, size, weft::tag_t(tag + lane_ * 2 * ack_tag), scq_)
          .device(dev_)();
    });
  }
  void wait_all() {
    while (outstanding_ > 0) {
      weft::status_t s = weft::cq_pop(scq_);
      if (s.error.is_done()) {
        --outstanding_;
      } else {
        idle();
      }
    }
  }

 private:
  void release(void* buf) {
    if (w_.how == delivery::packet)
      weft::put_upacket(buf);
    else
      std::free(buf);
  }

  // One fruitless poll: progress, and on an oversubscribed host yield now and then, as the
  // MPI lanes do. (Sleeping in progress_x().block_us() instead was measured at 2.3 M/s in
  // thread mode 2x2 against 13.4 M/s with yield: a futex wake-up costs more in this VM than
  // the window it waits for.)
  void idle() {
    weft::progress_x().device(dev_).block_us(w_.block_us)();
    if (idle_.failed()) std::this_thread::yield();
  }

  template <typename Post>
  void post(Post&& p) {
    for (;;) {
      weft::status_t s = p();
      if (s.error.is_posted()) ++outstanding_;
      if (!s.error.is_retry()) return;
      idle();
    }
  }

  weft_world& w_;
  int lane_, peer_;
  weft::device_t dev_;
  weft::comp_t cq_;
  weft::rcomp_t rcomp_;
  weft::comp_t scq_;
  long outstanding_ = 0;
  long consumed_ = 0;
  backoff idle_;
};

}  // namespace bench
