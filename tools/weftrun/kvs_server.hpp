// SPDX-License-Identifier: BSD-3-Clause
// weftrun's key-value exchange for the ranks it started (protocol in bootstrap/kvs_wire.hpp).
// GET of a key not yet put and FENCE are answered when they can be, not polled. A
// connection is served once its HELLO names a rank of the job not yet connected and carries
// the job's cookie, and it may put only keys that rank owns (bootstrap::owned_key).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace weftrun {

class kvs_server {
 public:
  kvs_server(int nranks, uint64_t cookie)
      : cookie_(cookie), fence_count_(size_t(nranks), 0), exited_(size_t(nranks), false) {}

  // Handles one request line from connection fd; false closes the connection.
  bool on_line(int fd, const std::string& line);
  void on_disconnect(int fd);
  // A rank ended: fences can no longer complete; with `failed`, waiting gets fail too.
  void rank_exited(int rank, bool failed, const std::string& why);

 private:
  void reply(int fd, const std::string& line);
  void complete_fences();
  bool on_hello(int fd, const std::string& line);

  const uint64_t cookie_;
  std::map<std::string, std::string> kv_;
  std::multimap<std::string, int> waiting_gets_;
  std::vector<unsigned> fence_count_;
  std::vector<std::pair<int, unsigned>> waiting_fences_;  // fd, fence number
  std::map<int, int> rank_of_fd_;
  std::vector<bool> exited_;
};

}  // namespace weftrun
