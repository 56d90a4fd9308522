// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/bell_socket.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace weft::net::shm {

bell_address bell_address_of(const std::string& segment_name) {
  bell_address a;
  a.addr.sun_family = AF_UNIX;
  // Abstract: a leading NUL, no file; the segment's name is unique to the job and device.
  const std::string name = segment_name + "-bell";
  const size_t n = std::min(name.size(), sizeof(a.addr.sun_path) - 1);
  memcpy(a.addr.sun_path + 1, name.data(), n);
  a.len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

bell_socket::~bell_socket() {
  if (recv_fd_ >= 0) close(recv_fd_);
  if (send_fd_ >= 0) close(send_fd_);
}

bool bell_socket::open(const bell_address& at) {
  recv_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  send_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (recv_fd_ >= 0 && send_fd_ >= 0 &&
      bind(recv_fd_, reinterpret_cast<const sockaddr*>(&at.addr), at.len) == 0)
    return true;
  if (recv_fd_ >= 0) close(recv_fd_);
  if (send_fd_ >= 0) close(send_fd_);
  recv_fd_ = send_fd_ = -1;
  return false;
}

bool bell_socket::open_private() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
  recv_fd_ = sv[0];
  send_fd_ = sv[1];
  return true;
}

void bell_socket::drain() const {
  char buf[64];
  while (recv(recv_fd_, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

void bell_socket::ring(const bell_address& to) const {
  const char byte = 1;
  if (to.len == 0)
    (void)send(send_fd_, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  else
    (void)sendto(send_fd_, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&to.addr), to.len);
}

}  // namespace weft::net::shm
