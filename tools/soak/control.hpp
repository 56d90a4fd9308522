// SPDX-License-Identifier: BSD-3-Clause
// weft-soak's control traffic on the default device, done by each rank's main thread:
// the exchange of regions at the start, the counts each rank sent (fin) at the end, and
// the tallies gathered on rank 0. Every wait ends, with an error for a peer that died.
#pragma once

#include "job.hpp"

namespace soak {

// Allocates the devices, remote queues and regions, and swaps region handles and the seed
// with every rank.
void setup(job& J);

// Posts the receives of every rank's fin (and on rank 0 of every tally), before traffic.
void post_control_receives(job& J);

// Sends each live rank the counts in fins[rank], then waits for every rank's fin (or its
// death) and marks the job's fins known.
void exchange_fins(job& J, const std::vector<std::vector<uint64_t>>& fins);

struct report {
  tally sum;
  int ranks = 0;    // ranks whose tally arrived (rank 0 included)
  int rc = 0;       // worst exit status among them
  int missing = 0;  // ranks whose tally never came (dead)
};

// Every rank but 0 sends its tally and status to rank 0; rank 0 returns the sum.
report gather(job& J, const tally& mine, int rc);

}  // namespace soak
