// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory doorbell as a file descriptor, for a thread that sleeps on shared memory
// and the network at once (mixed). A device binds a datagram socket to an abstract address
// named after its segment; a local peer that publishes a message and finds the device's bell
// armed for a descriptor sleeper sends it one byte, which makes the socket readable. A stray
// byte (from anyone: abstract addresses have no permissions) only wakes a sleeper early.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>

namespace weft::net::shm {

struct bell_address {
  sockaddr_un addr{};
  socklen_t len = 0;
};

// The abstract address of the device whose segment is `segment_name`.
bell_address bell_address_of(const std::string& segment_name);

class bell_socket {
 public:
  bell_socket() = default;
  ~bell_socket();
  bell_socket(const bell_socket&) = delete;
  bell_socket& operator=(const bell_socket&) = delete;

  // Binds the receiving socket at `at` and opens the sending one; false (and no descriptor)
  // when the system refuses, and then sleepers fall back to the futex. A rank alone on its
  // host has no address: a connected pair then serves its own threads.
  bool open(const bell_address& at);
  bool open_private();
  int fd() const { return recv_fd_; }
  // Empties the socket after a wake-up.
  void drain() const;
  // One byte to a peer's device (non-blocking: a full socket is already readable); an
  // empty address: to our own (open_private).
  void ring(const bell_address& to) const;

 private:
  int recv_fd_ = -1, send_fd_ = -1;
};

}  // namespace weft::net::shm
