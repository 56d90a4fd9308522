// SPDX-License-Identifier: BSD-3-Clause
// A lane is one thread's endpoint towards the same-numbered thread of the peer process.
// The workloads (workloads.hpp) are written once against this interface; lane_weft.hpp and
// lane_mpi.hpp implement it, so a difference in the figures can only come from the library.
//
//   void am_send(const void* buf, size_t size)   one active message to the peer lane
//   void am_wait()                               consume one active message sent to us
//   void send(void* buf, size_t size, int tag)   post a send (non-blocking)
//   void recv(void* buf, size_t size, int tag)   post a receive (non-blocking)
//   void wait_all()                              until every posted send/receive completed
#pragma once

#include <cstddef>
#include <string>
#include <thread>

namespace bench {

enum class resources { dedicated, shared, shared_cq };

inline const char* resources_name(resources r) {
  switch (r) {
    case resources::dedicated: return "dedicated";
    case resources::shared: return "shared";
    case resources::shared_cq: return "shared_cq";
  }
  return "?";
}

// Weft only: where arriving active messages land. malloc: a buffer the program frees with
// std::free (the default API); packet: a packet of the pool, handed back with put_upacket
// (what MPI's ring of pre-posted receives does with its own buffers); in_place: lent to a
// handler where it arrived (what UCX's active-message callback gets).
enum class delivery { malloc_buf, packet, in_place };

inline const char* delivery_api(delivery d) {
  switch (d) {
    case delivery::malloc_buf: return "am";
    case delivery::packet: return "am_packet";
    case delivery::in_place: return "am_in_place";
  }
  return "?";
}

inline constexpr int ack_tag = 1 << 20;

// Set when the run has more busy threads on this host than cores.
inline bool g_oversubscribed = false;

// Every lane's waiting loops call this after each fruitless poll. When the host is
// oversubscribed, a run of 16 failures makes the thread stop spinning for a moment, each
// library in its own best way, so such runs measure the library rather than the
// scheduler's patience with spinning threads; otherwise it does nothing (a yield costs
// microseconds in this VM and would dominate a ping-pong).
class backoff {
 public:
  // True when the thread should stop spinning for a moment (the lane decides how: MPI
  // lanes yield, Weft lanes sleep in progress until a message arrives).
  bool failed() {
    if (g_oversubscribed && ++misses_ >= 16) {
      misses_ = 0;
      return true;
    }
    return false;
  }

 private:
  int misses_ = 0;
};

}  // namespace bench
