// SPDX-License-Identifier: BSD-3-Clause
// Rendezvous data split between its two ends. Moved by cross-memory attach, a transfer is
// one copy of each byte, made by the source's core while the target's core waits in its
// progress; split, the source writes the first half into the target's buffer while the
// target reads the second half from the source's, so that the copy runs on both cores at
// once (a two-process probe of the same system calls on this 2-core host: 64 KiB 13-14
// GB/s against 9-14 from one end, 4 MiB 12.7-13.3 against 5.5-8.0). The price is the
// target's CPU, as the pipelined copy's: the send completes once the target has read its
// half (WEFT_SHM_SPLIT sets the smallest transfer split; 0 never).
//
// Three cells, all in the answer lanes: split_read (source to target) before the source's
// own copy starts; split_done (target to source) once the target's half is in; then the
// data note (source to target), sent once both halves are in, which completes the receive
// as for unsplit data. A target that cannot read its half answers split_unread and the
// source copies that half too; one that offered no such buffer refuses, and the send fails
// as an unsplit one it refused would.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "net/shm/cma.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/ticks.hpp"
#include "util/tsan.hpp"

namespace weft::net::shm {

std::vector<shm_device::pending_split>::iterator shm_device::find_split(int rank, uint64_t ctx) {
  return std::find_if(splits_.begin(), splits_.end(), [&](const pending_split& p) {
    return p.rank == rank && reinterpret_cast<uint64_t>(p.ctx) == ctx;
  });
}

void shm_device::drop_split(int rank, uint64_t ctx) {
  util::lock_guard<util::spinlock> g(splits_lock_);
  auto it = find_split(rank, ctx);
  if (it != splits_.end()) splits_.erase(it);
}

// Records one half of the pending split (rank, ctx) as in, by `mark` (false: the entry was
// not waiting for that), and takes the entry out into `done` once both halves are.
template <typename Mark>
shm_device::settled shm_device::settle_split(int rank, uint64_t ctx, Mark&& mark,
                                             pending_split& done) {
  util::lock_guard<util::spinlock> g(splits_lock_);
  auto it = find_split(rank, ctx);
  if (it == splits_.end() || !mark(*it)) return settled::unknown;  // or forgotten: peer died
  if (!it->written || it->verdict == pending_split::answer_due) return settled::waiting;
  done = *it;
  splits_.erase(it);
  return settled::complete;
}

bool shm_device::split_write(int rank, const void* src, size_t size, uint64_t remote_addr,
                             const void* note, void* ctx, bool timed) {
  pending_split p;
  p.rank = rank;
  p.ctx = ctx;
  p.src = static_cast<const char*>(src);
  p.dst = remote_addr;
  p.size = size;
  p.timed = timed;
  memcpy(p.note, note, sizeof(p.note));
  {  // before the cell: its answer may come first, to another polling thread
    util::lock_guard<util::spinlock> g(splits_lock_);
    splits_.push_back(p);
  }
  split_read_msg m{
      reinterpret_cast<uint64_t>(src), remote_addr, size, reinterpret_cast<uint64_t>(ctx), {}};
  memcpy(m.note, note, sizeof(m.note));
  if (!enqueue(rank, kind_split_read, &m, sizeof(m), nullptr, 0)) {
    drop_split(rank, m.ctx);
    return false;
  }
  const uint64_t t0 = util::ticks();
  const int err = cma_write(peers_[size_t(rank)]->pid, src, remote_addr, split_point(size));
  const uint64_t took = util::ticks() - t0;
  if (err) {  // its target is gone (else copy_failed stops): no answer will come
    drop_split(rank, m.ctx);
    copy_failed("rendezvous data (shm, split)", rank, err, local_event::put_done, ctx);
    return true;
  }
  pending_split done;
  const auto mark = [took](pending_split& q) {
    q.written = true;
    q.ticks = took;
    return true;
  };
  if (settle_split(rank, m.ctx, mark, done) == settled::complete) finish_split(done);
  return true;
}

void shm_device::on_split_read(sink& s, int src, const split_read_msg& m) {
  split_done_msg a{m.ctx, split_read, 0, 0};
  if (!s.expects_data(src, m.dst, m.size, m.note, sizeof(m.note))) {
    WEFT_LOG(error,
             "shm: rank %d splits %llu bytes of rendezvous data into %#llx, which no receive "
             "of its offered: refused",
             ctx_.boot().job_rank(src), static_cast<unsigned long long>(m.size),
             static_cast<unsigned long long>(m.dst));
    a.verdict = split_refused;
  } else {
    const uint64_t h = split_point(m.size), t0 = util::ticks();
    int err = 0;
#ifdef WEFT_TEST_HOOKS
    if (ctx_.config().test_split_unread) err = EPERM;
#endif
    WEFT_TSAN_ACQUIRE(reinterpret_cast<void*>(m.dst));  // offered in our clear-to-send
    if (!err)
      err = cma_read(peers_[size_t(src)]->pid, reinterpret_cast<char*>(m.dst) + h, m.src + h,
                     m.size - h);
    // The receive completes on the source's data note, maybe in another thread of ours,
    // which acquires the buffer (device_impl::rendezvous_arrived).
    WEFT_TSAN_RELEASE(reinterpret_cast<void*>(m.dst));
    a.ticks = util::ticks() - t0;
    if (err == ESRCH) {  // the source died: the core fails the receive
      peers_[size_t(src)]->gone.store(true, std::memory_order_relaxed);
      return;
    }
    if (err) {
      static std::atomic<bool> told{false};  // once: a refusal by the kernel holds for all
      if (!told.exchange(true))
        WEFT_LOG(warn,
                 "shm: reading the second half of rank %d's rendezvous data failed (%s): the "
                 "source copies such halves itself",
                 ctx_.boot().job_rank(src), strerror(err));
      a.verdict = split_unread;
    } else {
      split_read_.fetch_add(m.size - h, std::memory_order_relaxed);
    }
  }
  if (enqueue(src, kind_split_done, &a, sizeof(a), nullptr, 0)) return;
  local_event e{local_event::split_done, src, nullptr, true, uint32_t(sizeof(a)), {}};
  memcpy(e.note, &a, sizeof(a));
  events_.add(e);  // sent from advance_work once the source's answer lane has room
}

void shm_device::on_split_done(int src, const split_done_msg& m) {
  pending_split done;
  const auto mark = [&m](pending_split& q) {
    if (q.verdict != pending_split::answer_due || m.verdict > split_unread) return false;
    q.verdict = m.verdict;
    q.target_ticks = m.ticks;
    return true;
  };
  const settled r = settle_split(src, m.ctx, mark, done);
  if (r == settled::complete) finish_split(done);
  if (r == settled::unknown)
    WEFT_LOG(error, "shm: rank %d answers a split transfer of ours that is not waiting",
             ctx_.boot().job_rank(src));
}

// Both halves are in (or the target refused): the note that completes the receive, then
// the send's completion, as for unsplit data (direct_access).
void shm_device::finish_split(pending_split p) {
  if (p.verdict == split_refused) {
    events_.add(local_event{local_event::put_done, p.rank, p.ctx, false, 0, {}});
    return;
  }
  // The two copies ran side by side: the longer one is the time, as for the pipeline.
  uint64_t ticks = std::max(p.ticks, p.target_ticks);
  if (p.verdict == split_unread) {  // the target could not read its half: ours too
    const uint64_t h = split_point(p.size), t0 = util::ticks();
    const int err = cma_write(peers_[size_t(p.rank)]->pid, p.src + h, p.dst + h, p.size - h);
    if (err) {
      copy_failed("rendezvous data (shm, split)", p.rank, err, local_event::put_done, p.ctx);
      return;
    }
    ticks = p.ticks + (util::ticks() - t0);
  }
  bytes_cross_memory_.fetch_add(p.size, std::memory_order_relaxed);
  if (p.timed) peers_[size_t(p.rank)]->choose.record(put_mode::cma, p.size, ticks);
  send_note_then(p.rank, p.note, sizeof(p.note), local_event::put_done, p.ctx, kind_data_note);
}

}  // namespace weft::net::shm
