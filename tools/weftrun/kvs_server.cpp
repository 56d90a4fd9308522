// SPDX-License-Identifier: BSD-3-Clause
#include "weftrun/kvs_server.hpp"

#include <algorithm>

#include "bootstrap/kvs_wire.hpp"

namespace weftrun {

void kvs_server::reply(int fd, const std::string& line) {
  weft::bootstrap::write_line(fd, line);
}

bool kvs_server::on_line(int fd, const std::string& line) {
  using kind = weft::bootstrap::kvs_request::kind;
  const weft::bootstrap::kvs_request q = weft::bootstrap::parse_kvs_request(line);
  if (q.k == kind::hello) return on_hello(fd, line);
  auto it = rank_of_fd_.find(fd);
  if (it == rank_of_fd_.end()) {
    reply(fd, "ERR say HELLO <rank> first");
    return false;
  }
  if (q.k == kind::put) {
    if (!q.has_value) {
      reply(fd, "ERR PUT needs a key and a value");
      return true;
    }
    // Built by append: GCC 12 at -O3 warns (-Wrestrict, a false positive) on "@" + string.
    std::string owner(1, '@');
    owner += std::to_string(it->second);
    if (!q.key.ends_with(owner)) {
      reply(fd, "ERR PUT of key " + q.key + ": rank " + std::to_string(it->second) +
                    " may put only its own keys (ending in " + owner + ")");
      return true;
    }
    kv_[q.key] = q.value;
    reply(fd, "OK");
    auto range = waiting_gets_.equal_range(q.key);
    for (auto w = range.first; w != range.second; ++w) reply(w->second, "VAL " + q.value);
    waiting_gets_.erase(range.first, range.second);
    return true;
  }
  if (q.k == kind::get) {
    auto v = kv_.find(q.key);
    if (v != kv_.end())
      reply(fd, "VAL " + v->second);
    else
      waiting_gets_.emplace(q.key, fd);
    return true;
  }
  if (q.k == kind::fence) {
    int r = it->second;
    unsigned n = ++fence_count_[size_t(r)];
    for (size_t i = 0; i < exited_.size(); ++i)
      if (exited_[i] && fence_count_[i] < n) {
        reply(fd, "ERR rank " + std::to_string(i) + " exited before this fence");
        return true;
      }
    waiting_fences_.emplace_back(fd, n);
    complete_fences();
    return true;
  }
  if (q.k == kind::bye) return false;
  reply(fd, "ERR unknown request " + q.cmd);
  return true;
}

// The cookie is compared before the rank is looked at, so that a process without it learns
// nothing about the job.
bool kvs_server::on_hello(int fd, const std::string& line) {
  const weft::bootstrap::kvs_request q = weft::bootstrap::parse_kvs_request(line);
  if (!q.has_cookie || q.cookie != cookie_) {
    reply(fd, "ERR HELLO without this job's cookie (WEFT_JOB_COOKIE): not a rank of this job");
    return false;
  }
  if (rank_of_fd_.count(fd)) {
    reply(fd, "ERR this connection said HELLO already");
    return false;
  }
  if (q.rank < 0 || size_t(q.rank) >= fence_count_.size()) {
    reply(fd,
          "ERR rank " + line.substr(std::min(line.size(), size_t(6))) + " is not part of this job");
    return false;
  }
  for (auto& [other, r] : rank_of_fd_)
    if (r == q.rank) {
      reply(fd, "ERR rank " + std::to_string(q.rank) + " is connected already");
      return false;
    }
  rank_of_fd_[fd] = q.rank;
  reply(fd, "OK");
  return true;
}

void kvs_server::complete_fences() {
  unsigned low = *std::min_element(fence_count_.begin(), fence_count_.end());
  std::vector<std::pair<int, unsigned>> still;
  for (auto& [fd, n] : waiting_fences_) {
    if (n <= low)
      reply(fd, "OK");
    else
      still.emplace_back(fd, n);
  }
  waiting_fences_.swap(still);
}

void kvs_server::on_disconnect(int fd) {
  rank_of_fd_.erase(fd);
  for (auto w = waiting_gets_.begin(); w != waiting_gets_.end();)
    w = w->second == fd ? waiting_gets_.erase(w) : std::next(w);
  std::erase_if(waiting_fences_, [fd](auto& p) { return p.first == fd; });
}

void kvs_server::rank_exited(int rank, bool failed, const std::string& why) {
  exited_[size_t(rank)] = true;
  for (auto& [fd, n] : waiting_fences_)
    if (fence_count_[size_t(rank)] < n)
      reply(fd, "ERR rank " + std::to_string(rank) + " " + why + " before this fence");
  std::erase_if(waiting_fences_, [&](auto& p) { return fence_count_[size_t(rank)] < p.second; });
  if (failed) {
    for (auto& [key, fd] : waiting_gets_)
      reply(fd,
            "ERR rank " + std::to_string(rank) + " " + why + " while key " + key + " was awaited");
    waiting_gets_.clear();
  }
}

}  // namespace weftrun
