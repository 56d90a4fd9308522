// SPDX-License-Identifier: BSD-3-Clause
// weft-soak's command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace soak {

enum class inject { none, drop, dup, corrupt };
enum class fault { none, kill, stop };

struct options {
  double seconds = 60;         // of traffic, before the drain
  int threads = 1;             // per rank
  bool shared = false;         // one device for all threads (else one each)
  fault victim = fault::none;  // what happens to one random rank other than 0
  double stop_for = 0;         // --stop: seconds the victim stays stopped (default 35)
  inject bug = inject::none;   // a deliberate fault in one message of rank 0
  size_t max_size = 8 << 20;   // largest payload
  uint64_t seed = 0;           // 0: from the clock, rank 0's for all
  int window = 16;             // operations in flight per thread
  double drain = 60;           // seconds to wait for what is still in flight at the end
  double report_every = 10;    // seconds between progress lines (0: none)
};

// Parses argv; on a bad argument prints what is wrong and the usage, and exits with 2.
options parse(int argc, char** argv);

const char* name(inject i);

}  // namespace soak
