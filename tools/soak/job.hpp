// SPDX-License-Identifier: BSD-3-Clause
// What weft-soak's threads of one rank share: the options, the resources, the peers'
// regions, which peers are known dead, the counts the peers say they sent, and the tally.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <weft/weft.hpp>

#include "options.hpp"
#include "payload.hpp"

namespace soak {

// Tags: data tags keep bit 31 clear (thread numbers are below 32), control tags set it.
inline constexpr weft::tag_t tag_setup = 0x80000001u, tag_fin = 0x80000002u, tag_sum = 0x80000003u;
inline constexpr unsigned seq_bits = 20;  // of a send's tag: [i:6][j:6][seq:20]
inline constexpr unsigned lo_bits = 26;   // of an AM's or notification's tag: [i:6][seq:26]

inline weft::tag_t send_tag(int i, int j, uint64_t seq) {
  return weft::tag_t(i) << 26 | weft::tag_t(j) << seq_bits |
         weft::tag_t(seq & ((1u << seq_bits) - 1));
}
inline weft::tag_t short_tag(int i, uint64_t seq) {
  return weft::tag_t(i) << lo_bits | weft::tag_t(seq & ((1u << lo_bits) - 1));
}

struct tally {
  uint64_t operations = 0, verified = 0, lost = 0, duplicated = 0, corrupted = 0;
  uint64_t errors = 0;        // failures other than a dead peer's
  uint64_t dead_errors = 0;   // operations with the dead rank that ended in an error naming it
  uint64_t dead_refused = 0;  // posts to the dead rank refused naming it
  uint64_t hung = 0;          // operations that did not end within the drain time
  uint64_t bytes = 0;
  void add(const tally& o) {
    operations += o.operations, verified += o.verified, lost += o.lost;
    duplicated += o.duplicated, corrupted += o.corrupted, errors += o.errors;
    dead_errors += o.dead_errors, dead_refused += o.dead_refused, hung += o.hung;
    bytes += o.bytes;
  }
};

struct tally_msg {
  tally t;
  int64_t rc = 0;
};

// The state of one control operation with one rank.
enum class ctl : char { idle, pending, done, dead };

struct peer_regions {
  weft::rmr_t inbox;    // slots that each source thread puts into
  weft::rmr_t pattern;  // read-only bytes for gets
  uint64_t seed;        // rank 0's is the job's
};

using clock = std::chrono::steady_clock;

struct job {
  options opt;
  int me = 0, n = 1;
  uint64_t seed = 0;
  int victim = -1;  // the rank that is killed or stopped, or -1
  clock::time_point start, deadline;

  std::vector<weft::device_t> devices;   // per thread, or one shared
  std::vector<weft::comp_t> remote_cqs;  // per thread: where its AMs and notifications land
  std::vector<weft::rcomp_t> rcomps;     // the same, as remote completions
  std::vector<peer_regions> peers;
  char* inbox = nullptr;  // n * threads slots of opt.max_size
  char* pattern = nullptr;
  weft::mr_t inbox_mr, pattern_mr;

  // fin[s]: counts rank s says it sent here, [kind][source thread][my thread]
  std::vector<std::vector<uint64_t>> fin;
  std::vector<char> fin_known_dead;  // per rank: its fin never came (it died)
  std::atomic<bool> fins_known{false};
  std::atomic<int> posting_done{0};
  std::atomic<bool> expelled{false};  // this rank was the stopped victim and resumed

  std::unique_ptr<std::atomic<bool>[]> dead;  // per rank: known dead here

  // Control traffic (main thread only): one queue, and per rank the state of each exchange.
  weft::comp_t ctrl_cq;
  std::vector<peer_regions> setup_in;
  std::vector<tally_msg> sums;  // rank 0: each rank's tally
  std::vector<ctl> setup_recv, setup_send, fin_recv, fin_send, sum_recv, sum_send;

  std::atomic<uint64_t> control_errors{0};  // control messages failed with a live rank
  std::mutex lock;                          // the tally and the failure log
  tally total;
  int failures_logged = 0;

  size_t slot_of(int rank, int thread) const {
    return (size_t(rank) * size_t(opt.threads) + size_t(thread)) * opt.max_size;
  }
  size_t fin_index(kind k, int i, int j) const {
    return (size_t(k) * size_t(opt.threads) + size_t(i)) * size_t(opt.threads) + size_t(j);
  }
  size_t fin_words() const { return size_t(nkinds) * size_t(opt.threads) * size_t(opt.threads); }
  double elapsed() const { return std::chrono::duration<double>(clock::now() - start).count(); }

  // Whether an error naming `rank` is what the fault plan expects.
  bool expected_death(int rank) const {
    return rank == victim || (me == victim && opt.victim == fault::stop);
  }
  void mark_dead(int rank) { dead[size_t(rank)].store(true, std::memory_order_relaxed); }
  bool is_dead(int rank) const { return dead[size_t(rank)].load(std::memory_order_relaxed); }

  // Logs one failure (the first 20 in full) to stderr.
  void failure(const std::string& what);
};

}  // namespace soak
