// SPDX-License-Identifier: BSD-3-Clause
// Which way a large transfer to one peer moves, chosen from what the machine does now. The
// pipelined copy (two processes, staging slots in between) is the faster of the two when the
// cores share a fast cache, and collapses when a cache line takes long to cross (another
// socket, a busy host); cross-memory attach (one copy by the kernel) does not care. So each
// peer keeps, per size class, the throughput each mechanism delivered lately: bytes moved
// over the time at least one transfer of that mechanism was in flight (overlapping transfers
// count once). A mechanism's first window is not a figure: it pays for the first touches of
// the slots and the buffers (the pipeline's read 0.6 GB/s against 40 for its next one, and
// kept it out for thousands of transfers). A mechanism without a figure is tried first; then
// the faster one is used, and every few hundred transfers (more, the slower it was) the
// slower one gets a few to refresh its figure, so that a change of phase shows within a few
// hundred transfers. Every call is on a transfer of at least eager_size bytes, so one
// spinlock per peer costs nothing measurable.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "util/spinlock.hpp"

namespace weft::net::shm {

enum class put_mode { pipeline, cma, automatic };

class chooser {
 public:
  static constexpr int nclasses = 3;  // < 256 KiB, < 2 MiB, larger
  // Transfers per measurement and between two explorations, by class: 1 MiB .. 16 MiB and
  // 32 MiB .. 512 MiB at the classes' low ends.
  static constexpr uint32_t windows[nclasses] = {16, 8, 4};
  static constexpr uint32_t explore_periods[nclasses] = {512, 256, 128};

  static int class_of(size_t size) { return size < (256u << 10) ? 0 : size < (2u << 20) ? 1 : 2; }

  // The mechanism for the next transfer of `size` bytes (a post that then finds no room
  // asks again: only start() counts a transfer).
  put_mode choose(size_t size) {
    util::lock_guard<util::spinlock> g(lock_);
    const int k = class_of(size);
    size_class& c = classes_[k];
    if (c.exploring) return c.explored;
    const uint64_t p = c.m[0].rate, d = c.m[1].rate;
    // The slower one is retried after a period scaled by how much slower it was, so that
    // retrying costs a bounded share of the time (windows / periods, about 3%).
    const uint64_t period = explore_periods[k] * (p && d ? std::max(p, d) / std::min(p, d) : 1);
    if (!p || !d || c.count - c.explored_at >= period) {  // a figure missing or stale
      c.explored = !p      ? put_mode::pipeline
                   : !d    ? put_mode::cma
                   : p < d ? put_mode::pipeline
                           : put_mode::cma;
      c.exploring = windows[k];
      c.explored_at = c.count;
      return c.explored;
    }
    return p >= d ? put_mode::pipeline : put_mode::cma;
  }
  // A transfer of `size` bytes by `m` starts (at `now`, nanoseconds: a test gives its own
  // clock).
  void start(put_mode m, size_t size, int64_t now = now_ns()) {
    util::lock_guard<util::spinlock> g(lock_);
    size_class& c = classes_[class_of(size)];
    ++c.count;
    if (c.exploring && m == c.explored) --c.exploring;
    mech& s = c.m[m == put_mode::cma];
    if (s.active++ == 0) s.busy_since = now;
  }
  // It has finished (ok or not: the time was spent either way).
  void finish(put_mode m, size_t size, int64_t now = now_ns()) {
    util::lock_guard<util::spinlock> g(lock_);
    const int k = class_of(size);
    mech& s = classes_[k].m[m == put_mode::cma];
    s.bytes += size;
    const bool close = ++s.transfers >= windows[k];
    if (--s.active == 0 || close) {  // the busy time so far (a stream may never pause)
      s.busy_ns += uint64_t(now - s.busy_since);
      s.busy_since = now;
    }
    if (!close) return;
    if (!s.warm) {  // the first window paid for first touches: not a figure (see below)
      s.warm = true;
      s.bytes = s.busy_ns = s.transfers = 0;
      return;
    }
    const uint64_t mbps = s.busy_ns ? s.bytes * 1000 / s.busy_ns : 0;  // bytes/ns * 1000
    if (mbps) s.rate = s.rate ? (s.rate + mbps) / 2 : mbps;
    s.bytes = s.busy_ns = s.transfers = 0;
  }

 private:
  struct mech {
    bool warm = false;  // its first window is over
    uint32_t active = 0, transfers = 0;
    int64_t busy_since = 0;
    uint64_t bytes = 0, busy_ns = 0, rate = 0;
  };
  struct size_class {
    mech m[2];                            // pipeline, cma
    uint64_t count = 0, explored_at = 0;  // transfers started; when exploring last began
    uint32_t exploring = 0;               // transfers left to give the explored one
    put_mode explored = put_mode::pipeline;
  };
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  mutable util::spinlock lock_;
  size_class classes_[nclasses];
};

}  // namespace weft::net::shm
