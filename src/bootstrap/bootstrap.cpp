// SPDX-License-Identifier: BSD-3-Clause
// Launcher detection and the two embedded bootstraps.
#include "bootstrap/bootstrap.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "bootstrap/allgather.hpp"
#include "bootstrap/kvs_wire.hpp"
#include "bootstrap/pmi.hpp"
#include "bootstrap/pmix.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

namespace weft::bootstrap {

std::string random_hex(size_t nbytes) {
  std::string raw(nbytes, '\0');
  if (!random_bytes(raw.data(), nbytes))
    util::fail("bootstrap", "getrandom", std::to_string(nbytes) + " bytes", strerror(errno));
  return hex_encode(raw);
}

uint64_t random_u64() {
  uint64_t v = 0;
  if (!random_bytes(&v, sizeof(v)))
    util::fail("bootstrap", "getrandom", "8 bytes", strerror(errno));
  return v;
}

int env_count(const char* call, const char* name, const char* missing) {
  return text_count(call, name, util::env_or(name, ""), missing);
}

int text_count(const char* call, const char* name, const std::string& text, const char* missing) {
  const char* s = text.c_str();
  if (!*s) util::fail(call, name, "<unset>", missing);
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (*end || v < 0 || v > 1 << 24)
    util::fail(call, name, s, "is not a valid non-negative integer");
  return int(v);
}

void bootstrap::ranks_from(const char* call, const char* rank_var, const std::string& rank_text,
                           const char* size_var, const std::string& size_text,
                           const char* missing) {
  rank_ = text_count(call, rank_var, rank_text, missing);
  size_ = text_count(call, size_var, size_text, missing);
  if (rank_ >= size_)
    util::fail(call, rank_var, std::to_string(rank_),
               std::string("is not below ") + size_var + " = " + std::to_string(size_));
}

std::string kernel_boot_id() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return boot;
}

std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return std::string(name) + "/" + kernel_boot_id();
}

// A host record: the host's name, '|', the machine's boot id (possibly empty).
constexpr char machine_separator = '|';

void bootstrap::publish_host(const std::string& launcher_node) {
  const std::string id = util::get_text(util::setting::host_id);
  put("weft-host", (!id.empty()              ? "id:" + id
                    : !launcher_node.empty() ? "node:" + launcher_node
                                             : "host:" + host_identity()) +
                       machine_separator + kernel_boot_id());
}

// Every rank's host record, once: an index per host, and how many share this machine.
void bootstrap::read_hosts() {
  std::call_once(hosts_once_, [this] {
    std::map<std::string, int> index;
    host_of_.resize(size_t(size_));
    std::vector<std::string> machine(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const std::string h = size_ == 1 ? std::string() : get(r, "weft-host");
      const size_t cut = h.rfind(machine_separator);
      host_of_[size_t(r)] = index.emplace(h.substr(0, cut), int(index.size())).first->second;
      if (cut != std::string::npos) machine[size_t(r)] = h.substr(cut + 1);
    }
    // A rank of this host is of this machine, whatever boot id it could read.
    const std::string& mine = machine[size_t(rank_)];
    machine_size_ = 0;
    for (int r = 0; r < size_; ++r)
      if (host_of_[size_t(r)] == host_of_[size_t(rank_)] ||
          (!mine.empty() && machine[size_t(r)] == mine))
        ++machine_size_;
  });
}

bool bootstrap::same_host(int rank) {
  read_hosts();
  return host_of_[size_t(rank)] == host_of_[size_t(rank_)];
}

int bootstrap::machine_size() {
  read_hosts();
  return machine_size_;
}

void bootstrap::apply_host_override() {
  if (!util::get_text(util::setting::host_id).empty()) local_ranks_from_hosts();
}

void bootstrap::local_ranks_from_hosts() {
  local_rank_ = local_size_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (!same_host(r)) continue;
    if (r < rank_) ++local_rank_;
    ++local_size_;
  }
}

void bootstrap::agree_job_id() {
  if (rank_ == 0) {
    put("weft-job", random_hex(8));
    put("weft-cookie", random_hex(8));
  }
  fence();
  job_id_ = get(0, "weft-job");
  const std::string c = get(0, "weft-cookie");
  if (!parse_cookie(c, cookie_))
    util::fail("bootstrap", "weft-cookie", c, "rank 0's job cookie is not 16 hex digits");
}

void bootstrap::check_agreement(const std::string& key, const std::string& mine, const char* call,
                                const char* argument, const std::string& hint) {
  // Always the put and the fence, even alone: a mixed job's host with one rank still takes
  // part in the job's fences.
  put(key, mine);
  fence();
  const std::string first = get(0, key);
  for (int r = 1; r < size_; ++r) {
    const std::string theirs = get(r, key);
    if (theirs == first) continue;
    size_t i = 0;  // the first differing setting: the word around the first difference
    while (i < theirs.size() && i < first.size() && theirs[i] == first[i]) ++i;
    size_t start = first.rfind(' ', i);
    start = start == std::string::npos ? 0 : start + 1;
    auto field = [&](const std::string& s) { return s.substr(start, s.find(' ', start) - start); };
    util::fail(call, argument, mine,
               "settings differ between ranks: rank 0 has " + field(first) + ", rank " +
                   std::to_string(r) + " has " + field(theirs) + (hint.empty() ? "" : "; ") + hint);
  }
}

void bootstrap::test_hook_foreign_cookie() {
#ifdef WEFT_TEST_HOOKS
  const std::string r = util::get_text(util::setting::test_foreign_cookie);
  if (!r.empty() && r == std::to_string(rank_)) cookie_ = ~cookie_;
#endif
}

namespace {

class singleton_bootstrap final : public bootstrap {
 public:
  singleton_bootstrap() {
    job_id_ = random_hex(8);
    cookie_ = random_u64();
  }
  const char* name() const override { return "singleton"; }
  void put(const std::string& k, const std::string& v) override { kv_[k] = v; }
  std::string get(int rank, const std::string& k) override {
    auto it = kv_.find(k);
    if (rank != 0 || it == kv_.end())
      util::fail("bootstrap get", "key", owned_key(rank, k), "was never put");
    return it->second;
  }
  void fence() override {}

 private:
  std::map<std::string, std::string> kv_;
};

class weftrun_bootstrap final : public bootstrap {
 public:
  weftrun_bootstrap() {
    ranks_from("bootstrap (weftrun)", "WEFT_RANK", util::get_text(util::setting::rank), "WEFT_SIZE",
               util::get_text(util::setting::size), "the launcher environment is incomplete");
    local_rank_ = rank_;  // weftrun starts every rank on this host
    local_size_ = size_;
    job_id_ = util::get_text(util::setting::jobid);
    if (job_id_.size() < 16)
      util::fail("bootstrap (weftrun)", "WEFT_JOBID", job_id_.empty() ? "<unset>" : job_id_,
                 "must be a job identifier of at least 16 characters");
    const std::string cookie = util::get_text(util::setting::job_cookie);
    if (!parse_cookie(cookie, cookie_))
      util::fail("bootstrap (weftrun)", "WEFT_JOB_COOKIE", cookie.empty() ? "<unset>" : cookie,
                 "must be the job's cookie, 16 hex digits, as weftrun sets it");
    std::string addr = util::get_text(util::setting::kvs_addr);
    if (addr.empty() || addr.size() >= sizeof(sockaddr_un::sun_path))
      util::fail("bootstrap (weftrun)", "WEFT_KVS_ADDR", addr.empty() ? "<unset>" : addr,
                 "must name weftrun's key-value socket");
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    strcpy(sa.sun_path, addr.c_str());
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
      util::fail("bootstrap (weftrun)", "WEFT_KVS_ADDR", addr,
                 std::string("cannot connect: ") + strerror(errno));
    request("HELLO " + std::to_string(rank_) + " " + cookie_hex(cookie_));
    publish_host("weftrun");
    fence();
    apply_host_override();
  }
  ~weftrun_bootstrap() override {
    if (fd_ >= 0) {
      write_line(fd_, "BYE");
      close(fd_);
    }
  }
  const char* name() const override { return "weftrun"; }
  void put(const std::string& k, const std::string& v) override {
    request("PUT " + owned_key(rank_, k) + " " + hex_encode(v));
  }
  std::string get(int rank, const std::string& k) override {
    std::string reply = request("GET " + owned_key(rank, k)), out;
    if (reply.rfind("VAL ", 0) != 0 || !hex_decode(reply.substr(4), out))
      util::fail("bootstrap get", "reply", reply, "malformed answer from weftrun");
    return out;
  }
  void fence() override { request("FENCE"); }
  // weftrun never writes unasked: anything readable between requests, or a hang-up, is the
  // socket closing, which is weftrun's death.
  bool launcher_alive() override {
    std::unique_lock<std::mutex> g(lock_, std::try_to_lock);
    if (!g.owns_lock() || fd_ < 0) return true;  // a request is under way: it will know
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
  }

 private:
  std::string request(const std::string& line) {
    std::lock_guard<std::mutex> g(lock_);
    std::string reply;
    if (!write_line(fd_, line) || !read_line(fd_, reply, pending_))
      util::fail("bootstrap (weftrun)", "request", line.substr(0, line.find(' ')),
                 "connection to weftrun lost");
    if (reply.rfind("ERR ", 0) == 0)
      util::fail("bootstrap (weftrun)", "request", line.substr(0, line.find(' ')), reply.substr(4));
    return reply;
  }
  int fd_ = -1;
  std::mutex lock_;
  std::string pending_;
};

std::shared_ptr<bootstrap> create() {
  std::string which = util::get_text(util::setting::bootstrap);
  const bool has_kvs = util::is_set(util::setting::kvs_addr);
  const bool has_rank = util::is_set(util::setting::rank);
  const bool has_pmi_fd = util::env_raw("PMI_FD") != nullptr;
  const bool has_pmi_rank = util::env_raw("PMI_RANK") != nullptr;
  const bool has_pmix_rank = util::env_raw("PMIX_RANK") != nullptr;
  const bool has_pmix_ns = util::env_raw("PMIX_NAMESPACE") != nullptr;
  if (which == "auto") {
    if (has_kvs || has_rank)
      which = "weftrun";
    else if (has_pmix_rank && has_pmix_ns)
      which = "pmix";
    else if (has_pmix_rank)
      util::fail("bootstrap", "PMIX_NAMESPACE", "<unset>",
                 "PMIX_RANK is set but PMIX_NAMESPACE is not: a launcher environment half set");
    else if (has_pmi_fd)
      which = "pmi";
    else if (has_pmi_rank)
      util::fail("bootstrap", "PMI_FD", "<unset>",
                 "PMI_RANK is set but PMI_FD is not: a launcher environment half set (Weft "
                 "speaks PMI over the PMI_FD socket; set WEFT_BOOTSTRAP to choose)");
    else
      which = "singleton";
  }
  if (which == "pmi") {
    // Hydra speaks both versions, Slurm's pmi2 plugin only PMI-2.
    which = "pmi" + util::get_text(util::setting::pmi_version);
  }
  if (which == "weftrun") return std::make_shared<weftrun_bootstrap>();
  if (which == "singleton") return std::make_shared<singleton_bootstrap>();
  if (which == "pmi1") return make_pmi_bootstrap(1);
  if (which == "pmi2") return make_pmi_bootstrap(2);
  if (which == "pmix") return make_pmix_bootstrap();
  util::fail("bootstrap", "WEFT_BOOTSTRAP", which, "unknown bootstrap");
}

}  // namespace

namespace {
std::mutex current_lock;
std::weak_ptr<bootstrap> current;
}  // namespace

std::shared_ptr<bootstrap> acquire() {
  std::lock_guard<std::mutex> g(current_lock);
  auto b = current.lock();
  if (!b) {
    b = make_user_bootstrap();  // the program's own collectives win over any launcher
    if (!b) b = create();
    b->test_hook_foreign_cookie();
    current = b;
    WEFT_LOG(info, "bootstrap %s: rank %d of %d", b->name(), b->rank(), b->size());
  }
  return b;
}

bool bootstrap_active() {
  std::lock_guard<std::mutex> g(current_lock);
  return !current.expired();
}

}  // namespace weft::bootstrap
