// SPDX-License-Identifier: BSD-3-Clause
// One thread of weft-soak: it posts a random mix of operations to random (rank, thread)
// pairs, keeps a receive posted for every channel that can send it a message, checks
// everything that arrives against its ledgers, and at the end drains what is in flight and
// waits until every channel delivered what its sender says it sent.
#pragma once

#include <memory>
#include <vector>

#include "job.hpp"
#include "ledger.hpp"

namespace soak {

class worker {
 public:
  worker(job& j, int thread);
  ~worker();
  // Runs the traffic, the drain and the final checks; adds this thread's tally to the job's.
  void run();
  // What this thread sent to `rank`, by [kind][this thread][their thread], into `fin`.
  void sent_to(int rank, std::vector<uint64_t>& fin) const;

 private:
  struct op;
  struct channel;

  job& J;
  const int t;
  weft::device_t dev;
  weft::comp_t local_cq, remote_cq;
  rng R;
  tally mine;
  std::vector<std::unique_ptr<op>> ops;           // the window
  std::vector<std::unique_ptr<channel>> inbound;  // a posted receive per (rank, thread)
  std::vector<ledger> ledgers;                    // [kind][rank][thread]
  std::vector<uint64_t> sent;                     // [kind][rank][thread]
  std::vector<char> slot_busy;                    // per rank: my slot there has a put
  bool injected = false;

  size_t idx(kind k, int rank, int thread) const;
  void service(bool repost);
  bool start_op(op& o);
  void choose(op& o);
  void post(op& o);
  void complete(op& o, const weft::status_t& s);
  void post_recv(channel& c);
  void received(channel& c, const weft::status_t& s);
  void arrived(const weft::status_t& s);
  bool failed(const weft::status_t& s, int rank, const char* what);
  bool refused(const weft::fatal_error& e, int rank);
  bool idle() const;
  bool channels_done();
  void finish_channels();
  uint64_t full_seq(const ledger& l, uint64_t lo) const;
  void inject_into(op& o);
};

}  // namespace soak
