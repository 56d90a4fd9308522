// SPDX-License-Identifier: BSD-3-Clause
// Lanes over MPI (MPICH or Open MPI, whichever mpicxx built this): MPI_Isend / MPI_Irecv,
// and for the active-message variant a ring of pre-posted receives. Dedicated resources
// give each lane its own communicator (MPI_Comm_dup); shared ones use MPI_COMM_WORLD with
// the lane in the tag. MPI_THREAD_MULTIPLE whenever there is more than one lane.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lanes.hpp"

namespace bench {

struct mpi_world {
  int me = 0, n = 1, nlanes = 1;
  resources res = resources::dedicated;
  std::vector<MPI_Comm> comms;

  std::pair<uint64_t, uint64_t> mechanism_bytes() const { return {0, 0}; }  // Weft only
  uint64_t streamed_bytes() const { return 0; }
  uint64_t split_bytes() const { return 0; }
  std::pair<uint64_t, uint64_t> ahead_sends() const { return {0, 0}; }
  uint32_t block_us = 0;  // Weft only

  void init(int lanes, resources r, delivery /*Weft only*/) {
    int provided = 0;
    int argc = 0;
    char** argv = nullptr;
    MPI_Init_thread(&argc, &argv, lanes > 1 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    if (lanes > 1 && provided < MPI_THREAD_MULTIPLE) {
      fprintf(stderr, "MPI_THREAD_MULTIPLE not provided\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    nlanes = lanes;
    res = r;
    for (int t = 0; t < lanes; ++t) {
      MPI_Comm c = MPI_COMM_WORLD;
      if (r == resources::dedicated) MPI_Comm_dup(MPI_COMM_WORLD, &c);
      comms.push_back(c);
    }
  }
  void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  void fina() {
    MPI_Barrier(MPI_COMM_WORLD);
    for (auto& c : comms)
      if (c != MPI_COMM_WORLD) MPI_Comm_free(&c);
    MPI_Finalize();
  }
};

class mpi_lane {
 public:
  static constexpr int am_tag = 3 << 20;
  static constexpr int am_depth = 128;  // pre-posted receives (above the 64-message window)
  static constexpr size_t am_max = 64;

  mpi_lane(mpi_world& w, int lane, int peer)
      : lane_(lane),
        peer_(peer),
        comm_(w.comms[size_t(lane)]),
        tag_base_(w.res == resources::dedicated ? 0 : lane * 4 * ack_tag),
        am_bufs_(am_depth * am_max),
        am_reqs_(am_depth, MPI_REQUEST_NULL) {
    for (int i = 0; i < am_depth; ++i) repost(i);
  }
  ~mpi_lane() {
    wait_all();
    for (auto& r : am_reqs_) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    wait(sends_);
  }

  void am_send(const void* buf, size_t size) {
    MPI_Request r;
    MPI_Isend(buf, int(size), MPI_BYTE, peer_, tag_base_ + am_tag, comm_, &r);
    sends_.push_back(r);
    if (sends_.size() >= 64) {
      wait(sends_);
    }
  }
  void am_wait() {
    int flag = 0;
    for (;;) {
      MPI_Test(&am_reqs_[size_t(head_)], &flag, MPI_STATUS_IGNORE);
      if (flag) break;
      if (idle_.failed()) std::this_thread::yield();
    }
    repost(head_);
    head_ = (head_ + 1) % am_depth;
  }
  void send(void* buf, size_t size, int tag) {
    reqs_.emplace_back();
    MPI_Isend(buf, int(size), MPI_BYTE, peer_, tag_base_ + tag, comm_, &reqs_.back());
  }
  void recv(void* buf, size_t size, int tag) {
    reqs_.emplace_back();
    MPI_Irecv(buf, int(size), MPI_BYTE, peer_, tag_base_ + tag, comm_, &reqs_.back());
  }
  void wait_all() { wait(reqs_); }

 private:
  // MPI_Testall with the same back-off as every lane (MPI_Waitall would spin without it).
  void wait(std::vector<MPI_Request>& reqs) {
    int flag = 0;
    while (!reqs.empty()) {
      MPI_Testall(int(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE);
      if (flag) break;
      if (idle_.failed()) std::this_thread::yield();
    }
    reqs.clear();
  }
  void repost(int i) {
    MPI_Irecv(&am_bufs_[size_t(i) * am_max], int(am_max), MPI_BYTE, peer_, tag_base_ + am_tag,
              comm_, &am_reqs_[size_t(i)]);
  }
  int lane_, peer_;
  MPI_Comm comm_;
  int tag_base_;
  std::vector<char> am_bufs_;
  std::vector<MPI_Request> am_reqs_;
  int head_ = 0;
  std::vector<MPI_Request> reqs_, sends_;
  backoff idle_;
};

}  // namespace bench
