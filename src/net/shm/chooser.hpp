// SPDX-License-Identifier: BSD-3-Clause
// Which way a large transfer to one peer moves, chosen from what the machine does now. The
// pipelined copy (two processes, staging slots in between) is the faster of the two when the
// cores share a fast cache, and collapses when a cache line takes long to cross (another
// socket, a busy host); cross-memory attach (one copy by the kernel) does not care. So each
// peer keeps, per size class, the throughput each mechanism delivered lately: bytes over the
// time spent moving them. For cross-memory attach that is the system call; for the pipeline,
// the longer of the two sides' copy loops (source into the slots, target out of them; they
// run side by side), each timed by its own side. Not the transfer's time in flight: that
// also counts the moments the target was busy elsewhere before it copied, which cross-memory
// attach never waits for, and in a task engine on shared cores it made the pipeline look
// ten times slower than it was (0.7-1.5 GB/s measured, 17-19 GB/s delivered). A slow phase
// still shows: it slows the copies themselves. A mechanism's first window is not a figure:
// it pays for the first touches of the slots and the buffers (the pipeline's read 0.6 GB/s
// against 40 for its next one, and kept it out for thousands of transfers). A mechanism
// without a figure is tried first; then the faster one is used, and every few hundred
// transfers (more, the slower it was) the slower one gets a few to refresh its figure, so
// that a change of phase shows within a few hundred transfers. Every call is on a transfer
// of at least eager_size bytes, so one spinlock per peer costs nothing measurable.
#pragma once

#include <algorithm>
#include <cstdint>

#include "util/spinlock.hpp"

namespace weft::net::shm {

enum class put_mode { pipeline, cma, automatic };

// How the target of a pipelined transfer writes the data into its destination: through
// the cache, or around it (non-temporal stores). Around it wins when the transfers cycle
// through more memory than the last-level cache holds, since every ordinary store first
// reads its line from memory and evicts lines still wanted (1 MiB messages, 16 in flight:
// 19 GB/s cached, 37 around); through it wins when they fit (one 4 MiB message in flight:
// 50 against 25-39). Which holds depends on the program's buffers, so it is measured, by
// the same rule as the mechanisms; the source measures (it sees both copy loops) and tells
// the target.
enum class store_mode { cached, streaming };

// Chooses between two ways, `First` and `Second`, of moving a transfer.
template <typename Mode, Mode First, Mode Second>
class basic_chooser {
 public:
  static constexpr int nclasses = 3;  // < 256 KiB, < 2 MiB, larger
  // Transfers per measurement and between two explorations, by class: 1 MiB .. 16 MiB and
  // 32 MiB .. 512 MiB at the classes' low ends.
  static constexpr uint32_t windows[nclasses] = {16, 8, 4};
  static constexpr uint32_t explore_periods[nclasses] = {512, 256, 128};
  // Once both have a figure, the slower one is retried this many times after only
  // early_windows windows, and its new figure replaces the old one instead of averaging
  // with it, before the periods above apply.
  static constexpr uint32_t early_explorations = 1, early_windows = 2;

  static int class_of(size_t size) { return size < (256u << 10) ? 0 : size < (2u << 20) ? 1 : 2; }

  // The mechanism for the next transfer of `size` bytes (a post that then finds no room
  // asks again: only start() counts a transfer).
  Mode choose(size_t size) {
    util::lock_guard<util::spinlock> g(lock_);
    const int k = class_of(size);
    size_class& c = classes_[k];
    if (c.exploring) return c.explored;
    const uint64_t p = c.m[0].rate, d = c.m[1].rate;
    // The slower one is retried after a period scaled by how much slower it was, so that
    // retrying costs a bounded share of the time (windows / periods, about 3%).
    // The loser's first figure is retaken soon: it comes from the program's start, when its
    // own buffers may still be cold (a task engine's first 8 MiB puts into untouched pages
    // made the pipeline read 2.4 GB/s against the 15 it delivered next).
    const uint64_t period =
        c.explorations < early_explorations
            ? uint64_t(windows[k]) * early_windows
            : explore_periods[k] * (p && d ? std::max(p, d) / std::min(p, d) : 1);
    if (!p || !d || c.count - c.explored_at >= period) {  // a figure missing or stale
      c.explored = !p ? First : !d ? Second : p < d ? First : Second;
      c.exploring = windows[k];
      c.explored_at = c.count;
      if (p && d) ++c.explorations;
      return c.explored;
    }
    return p >= d ? First : Second;
  }
  // How long a transfer of `size` bytes by `m` takes by its latest figure (util::ticks
  // units); 0 while it has none.
  uint64_t ticks_for(Mode m, size_t size) const {
    util::lock_guard<util::spinlock> g(lock_);
    const uint64_t rate = classes_[class_of(size)].m[m == Second].rate;
    return rate ? uint64_t(size) * 1000 / rate : 0;
  }
  // A transfer of `size` bytes by `m` starts: it counts towards the periods.
  void start(Mode m, size_t size) {
    util::lock_guard<util::spinlock> g(lock_);
    size_class& c = classes_[class_of(size)];
    ++c.count;
    if (c.exploring && m == c.explored) --c.exploring;
  }
  // It moved its bytes in `ticks` (util::ticks units) of copying; a transfer that failed
  // is not recorded.
  void record(Mode m, size_t size, uint64_t ticks) {
    util::lock_guard<util::spinlock> g(lock_);
    const int k = class_of(size);
    size_class& c = classes_[k];
    mech& s = c.m[m == Second];
    s.bytes += size;
    s.ticks += ticks;
    if (++s.transfers < windows[k]) return;
    if (s.warm) {  // the first window paid for first touches: not a figure (see above)
      const uint64_t rate = s.ticks ? s.bytes * 1000 / s.ticks : 0;  // bytes per 1000 ticks
      if (rate) s.rate = s.rate && c.explorations > early_explorations ? (s.rate + rate) / 2 : rate;
    }
    s.warm = true;
    s.bytes = s.ticks = s.transfers = 0;
  }

 private:
  struct mech {
    bool warm = false;  // its first window is over
    uint32_t transfers = 0;
    uint64_t bytes = 0, ticks = 0, rate = 0;
  };
  struct size_class {
    mech m[2];                            // First, Second
    uint64_t count = 0, explored_at = 0;  // transfers started; when exploring last began
    uint32_t exploring = 0;               // transfers left to give the explored one
    uint32_t explorations = 0;            // begun since both had a figure
    Mode explored = First;
  };
  mutable util::spinlock lock_;
  size_class classes_[nclasses];
};

// The source's choice of mechanism for the data to one peer (WEFT_SHM_PUT=auto).
using chooser = basic_chooser<put_mode, put_mode::pipeline, put_mode::cma>;
// The source's choice, per peer, of how the target stores pipelined transfers of at least
// shm_device::stream_min bytes (WEFT_SHM_STORES=auto).
using store_chooser = basic_chooser<store_mode, store_mode::cached, store_mode::streaming>;

}  // namespace weft::net::shm
