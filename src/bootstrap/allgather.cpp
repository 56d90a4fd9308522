// SPDX-License-Identifier: BSD-3-Clause
// The bootstrap over a program's own allgather (set_bootstrap, <weft/mpi.hpp>): puts wait
// in this rank's list until the next fence, which gathers every rank's list at once (their
// lengths first, then the lists padded to the longest).
#include "bootstrap/allgather.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "util/fail.hpp"
#include "util/settings.hpp"

namespace weft::bootstrap {
namespace {

constexpr const char* call = "bootstrap (program's allgather)";

void append(std::string& blob, const std::string& s) {
  uint32_t n = uint32_t(s.size());
  blob.append(reinterpret_cast<const char*>(&n), sizeof(n));
  blob += s;
}

bool take(const char*& p, const char* end, std::string& out) {
  uint32_t n;
  if (size_t(end - p) < sizeof(n)) return false;
  memcpy(&n, p, sizeof(n));
  p += sizeof(n);
  if (size_t(end - p) < n) return false;
  out.assign(p, n);
  p += n;
  return true;
}

class allgather_bootstrap final : public bootstrap {
 public:
  // The ops were checked by set_bootstrap.
  explicit allgather_bootstrap(const bootstrap_ops_t& ops) : gather_(ops.allgather) {
    rank_ = ops.rank;
    size_ = ops.size;
    store_.resize(size_t(size_));
    const bool local_given = ops.local_size > 0;
    publish_host("");
    agree_job_id();
    if (local_given) {
      local_rank_ = ops.local_rank;
      local_size_ = ops.local_size;
      apply_host_override();
    } else {
      local_ranks_from_hosts();
    }
  }

  const char* name() const override { return "allgather"; }

  void put(const std::string& k, const std::string& v) override {
    std::lock_guard<std::mutex> g(lock_);
    pending_[k] = v;
  }

  std::string get(int rank, const std::string& k) override {
    std::lock_guard<std::mutex> g(lock_);
    if (rank < 0 || rank >= size_) util::fail(call, "rank", std::to_string(rank), "out of range");
    auto it = store_[size_t(rank)].find(k);
    if (it == store_[size_t(rank)].end())
      util::fail(call, "key", owned_key(rank, k), "not found (was it put before the last fence?)");
    return it->second;
  }

  void fence() override {
    std::lock_guard<std::mutex> g(lock_);
    std::string blob;
    for (auto& [k, v] : pending_) {
      append(blob, k);
      append(blob, v);
    }
    pending_.clear();
    uint64_t len = blob.size();
    std::vector<uint64_t> lens(static_cast<size_t>(size_));
    gather_(&len, lens.data(), sizeof(len));
    uint64_t longest = 0;
    for (uint64_t l : lens) longest = std::max(longest, l);
    blob.resize(longest);
    std::vector<char> all(longest * size_t(size_));
    if (longest) gather_(blob.data(), all.data(), longest);
    for (int r = 0; r < size_; ++r) {
      const char* p = all.data() + size_t(r) * longest;
      const char* end = p + lens[size_t(r)];
      std::string k, v;
      while (p < end) {
        if (!take(p, end, k) || !take(p, end, v))
          util::fail(call, "allgather", "rank " + std::to_string(r),
                     "returned a malformed list (does it gather in rank order?)");
        store_[size_t(r)][k] = v;
      }
    }
  }

 private:
  std::function<void(const void*, void*, size_t)> gather_;
  std::mutex lock_;
  std::map<std::string, std::string> pending_;
  std::vector<std::map<std::string, std::string>> store_;
};

std::mutex ops_lock;
std::shared_ptr<bootstrap_ops_t> user_ops;

}  // namespace

void set_user_bootstrap(const bootstrap_ops_t& ops) {
  std::lock_guard<std::mutex> g(ops_lock);
  user_ops = std::make_shared<bootstrap_ops_t>(ops);
}

std::shared_ptr<bootstrap> make_user_bootstrap() {
  std::shared_ptr<bootstrap_ops_t> ops;
  {
    std::lock_guard<std::mutex> g(ops_lock);
    ops = user_ops;
  }
  if (!ops) return nullptr;
  return std::make_shared<allgather_bootstrap>(*ops);
}

}  // namespace weft::bootstrap
