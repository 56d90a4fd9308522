// SPDX-License-Identifier: BSD-3-Clause
// The records behind a weft-soak thread's completions, shared by its source files.
#pragma once

#include "worker.hpp"

namespace soak {

// user_context of every completion: an op of the window or an inbound channel.
struct context {
  bool is_channel;
};

struct worker::op : context {
  enum class state { free, unposted, posted } st = state::free;
  kind k = kind::send;
  bool get = false;             // a get from the peer's pattern region
  bool back = false;            // a put done, now reading it back
  inject fault = inject::none;  // the one deliberate fault, on this message
  int rank = 0, thread = 0, copies = 1;
  uint64_t seq = 0, disp = 0;
  size_t size = 0;
  std::vector<char> buf, back_buf;
  op() : context{false} {}
};

struct worker::channel : context {
  enum class state { unposted, posted, closed } st = state::unposted;
  int rank, thread;
  uint64_t next = 0;
  size_t size = 0;
  std::vector<char> buf;
  channel(int r, int i) : context{true}, rank(r), thread(i) {}
};

// The size of message `seq` of the send channel (rank s, thread i) -> (rank r, thread j):
// both ends compute it, so every receive is posted with the exact size.
inline size_t send_size(uint64_t seed, int s, int i, int r, int j, uint64_t seq, size_t max) {
  rng g(mix(mix(seed, uint64_t(s) << 32 | uint64_t(i)), mix(uint64_t(r) << 32 | uint64_t(j), seq)));
  return draw_size(g, max);
}

}  // namespace soak
