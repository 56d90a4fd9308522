// SPDX-License-Identifier: BSD-3-Clause
// PMI-1 and PMI-2 spoken by Weft itself over the socket the launcher passes in PMI_FD
// (MPICH's hydra speaks both; Slurm's srun --mpi=pmi2 speaks PMI-2), so no libpmi is needed.
//   PMI-1: newline-terminated lines of blank-separated key=value words, e.g.
//          "cmd=put kvsname=K key=k value=v" -> "cmd=put_result rc=0 msg=success".
//   PMI-2: after a PMI-1 init line asking for version 2, a 6-character decimal length,
//          then "cmd=kvs-put;key=k;value=v;" style pairs.
// Which ranks share a host comes from the PMI_process_mapping attribute
// ("(vector,(first node,node count,ranks per node),...)", repeated until every rank has a
// node). Values travel hex-encoded, so any byte is safe.
#include "bootstrap/pmi.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "bootstrap/kvs_wire.hpp"
#include "bootstrap/pmi_wire.hpp"
#include "util/fail.hpp"
#include "util/settings.hpp"

namespace weft::bootstrap {
namespace {

using fields = pmi_fields;

class pmi_bootstrap final : public bootstrap {
 public:
  explicit pmi_bootstrap(int version)
      : version_(version), call_(version == 1 ? "bootstrap (PMI-1)" : "bootstrap (PMI-2)") {
    const char* half =
        "the launcher environment is half set (PMI_FD without PMI_RANK and PMI_SIZE)";
    fd_ = env_count(call_, "PMI_FD", half);
    ranks_from(call_, "PMI_RANK", util::env_or("PMI_RANK", ""), "PMI_SIZE",
               util::env_or("PMI_SIZE", ""), half);
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd_, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
      util::fail(call_, "PMI_FD", std::to_string(fd_), "is not a socket from the launcher");
    std::string mapping;
    if (version_ == 1) {
      expect(v1("cmd=init pmi_version=1 pmi_subversion=1"), "response_to_init");
      fields maxes = expect(v1("cmd=get_maxes"), "maxes");
      max_value_ = size_t(atoi(maxes["vallen_max"].c_str()));
      kvsname_ = expect(v1("cmd=get_my_kvsname"), "my_kvsname")["kvsname"];
      fields r = v1("cmd=get kvsname=" + kvsname_ + " key=PMI_process_mapping");
      if (r["rc"] == "0") mapping = r["value"];
    } else {
      // PMI-2 starts with the PMI-1 init line asking for version 2; then frames follow.
      fields init = expect(v1("cmd=init pmi_version=2 pmi_subversion=0"), "response_to_init");
      if (init["pmi_version"] != "2")
        util::fail(call_, "pmi_version", init["pmi_version"], "the launcher does not speak PMI-2");
      // Slurm wants the job id it set in PMI_JOBID; hydra sets none.
      const std::string jobid = util::env_or("PMI_JOBID", "");
      fields r = expect(v2("cmd=fullinit;" + (jobid.empty() ? "" : "pmijobid=" + jobid + ";") +
                           "pmirank=" + std::to_string(rank_) + ";threaded=TRUE;"),
                        "fullinit-response");
      if (r["rank"] != std::to_string(rank_) || r["size"] != std::to_string(size_))
        util::fail(call_, "fullinit", "rank " + r["rank"] + " size " + r["size"],
                   "the launcher disagrees with PMI_RANK and PMI_SIZE");
      max_value_ = 1024;  // PMI2_MAX_VALLEN
      fields m = v2("cmd=info-getjobattr;key=PMI_process_mapping;");
      if (m["found"] == "TRUE") mapping = m["value"];
    }
    std::vector<int> node = parse_process_mapping(mapping, size_);
    local_rank_ = 0;
    local_size_ = 0;
    for (int r = 0; r < size_; ++r) {
      // Without a mapping every rank is taken to be on its own host: never share memory
      // on a guess.
      bool same = node.empty() ? r == rank_ : node[size_t(r)] == node[size_t(rank_)];
      if (!same) continue;
      if (r < rank_) ++local_rank_;
      ++local_size_;
    }
    // Without a mapping, a host of its own (as above).
    publish_host(node.empty() ? "rank-" + std::to_string(rank_)
                              : "pmi-" + std::to_string(node[size_t(rank_)]));
    // A job identifier no other job can guess: rank 0 draws it.
    agree_job_id();
    apply_host_override();
  }

  ~pmi_bootstrap() override {
    std::lock_guard<std::mutex> g(lock_);
    if (version_ == 1) {
      if (send_all("cmd=finalize\n")) read_reply_v1();
    } else {
      std::string m = "cmd=finalize;";
      if (send_all(frame(m))) read_reply_v2();
    }
  }

  const char* name() const override { return version_ == 1 ? "pmi1" : "pmi2"; }

  void put(const std::string& key, const std::string& v) override {
    const std::string k = owned_key(rank_, key);
    std::string hex = hex_encode(v);
    if (max_value_ && hex.size() + 1 > max_value_)
      util::fail(
          call_, "value of " + k, std::to_string(v.size()) + " bytes",
          "exceeds the launcher's value limit of " + std::to_string(max_value_ / 2) + " bytes");
    if (version_ == 1)
      expect(v1("cmd=put kvsname=" + kvsname_ + " key=" + k + " value=" + hex), "put_result");
    else
      expect(v2("cmd=kvs-put;key=" + k + ";value=" + hex + ";"), "kvs-put-response");
  }

  std::string get(int rank, const std::string& key) override {
    const std::string k = owned_key(rank, key);
    std::string value;
    if (version_ == 1) {
      fields r = v1("cmd=get kvsname=" + kvsname_ + " key=" + k);
      if (r["cmd"] != "get_result" || r["rc"] != "0")
        util::fail(call_, "key", k, "not found (was it put before the last fence?)");
      value = r["value"];
    } else {
      fields r = v2("cmd=kvs-get;jobid=;srcid=-1;key=" + k + ";");
      if (r["cmd"] != "kvs-get-response" || r["found"] != "TRUE")
        util::fail(call_, "key", k, "not found (was it put before the last fence?)");
      value = r["value"];
    }
    std::string out;
    if (!hex_decode(value, out)) util::fail(call_, "value of " + k, value, "not hex-encoded");
    return out;
  }

  void fence() override {
    if (version_ == 1)
      expect(v1("cmd=barrier_in"), "barrier_out");
    else
      expect(v2("cmd=kvs-fence;"), "kvs-fence-response");
  }

 private:
  fields expect(fields f, const char* cmd) {
    if (f["cmd"] != cmd || (f.count("rc") && f["rc"] != "0"))
      util::fail(call_, "reply", f["cmd"].empty() ? "<none>" : f["cmd"],
                 std::string("expected ") + cmd + " with rc=0" +
                     (f.count("msg") ? " (" + f["msg"] + ")" : ""));
    return f;
  }

  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  bool recv_exact(char* p, size_t n) {
    while (n) {
      ssize_t got = ::recv(fd_, p, n, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      n -= size_t(got);
    }
    return true;
  }
  void lost(const std::string& what) {
    util::fail(call_, "request", what.substr(0, what.find_first_of(" ;")),
               "the connection to the launcher (PMI_FD) was lost");
  }

  // PMI-1: one line out, one line back.
  fields v1(const std::string& line) {
    std::lock_guard<std::mutex> g(lock_);
    if (!send_all(line + "\n")) lost(line);
    fields f;
    if (!read_reply_v1(&f)) lost(line);
    return f;
  }
  bool read_reply_v1(fields* out = nullptr) {
    std::string line;
    if (!read_line(fd_, line, pending_)) return false;
    if (out) *out = parse_pmi1_line(line);
    return true;
  }

  // PMI-2: a length-prefixed command out, one back.
  static std::string frame(const std::string& cmd) {
    char len[8];
    snprintf(len, sizeof(len), "%-6zu", cmd.size());
    return std::string(len, 6) + cmd;
  }
  fields v2(const std::string& cmd) {
    std::lock_guard<std::mutex> g(lock_);
    if (!send_all(frame(cmd))) lost(cmd);
    fields f;
    if (!read_reply_v2(&f)) lost(cmd);
    return f;
  }
  bool read_reply_v2(fields* out = nullptr) {
    char len[6];
    if (!recv_exact(len, 6)) return false;
    size_t n = 0;
    if (!parse_pmi2_length(len, &n))
      util::fail(call_, "reply length", std::string(len, 6),
                 "not a PMI-2 frame length (decimal digits padded to 6 characters, at most " +
                     std::to_string(max_pmi2_frame) + ")");
    std::string body(n, '\0');
    if (n && !recv_exact(body.data(), n)) return false;
    if (out) *out = parse_pmi2_body(body);
    return true;
  }

  const int version_;
  const char* const call_;
  int fd_ = -1;
  std::string kvsname_;
  size_t max_value_ = 0;
  std::mutex lock_;
  std::string pending_;
};

}  // namespace

std::shared_ptr<bootstrap> make_pmi_bootstrap(int version) {
  return std::make_shared<pmi_bootstrap>(version);
}

}  // namespace weft::bootstrap
