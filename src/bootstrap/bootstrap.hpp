// SPDX-License-Identifier: BSD-3-Clause
// Bootstrap: who am I, how many are we, and a key-value exchange with a fence. Detected
// from the environment (WEFT_BOOTSTRAP overrides): weftrun, PMI-1/PMI-2 (MPICH's hydra,
// Slurm's pmi2), or a singleton (rank 0 of 1).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace weft::bootstrap {

class bootstrap {
 public:
  virtual ~bootstrap() = default;
  virtual const char* name() const = 0;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Unguessable per job; names shared-memory segments.
  const std::string& job_id() const { return job_id_; }
  // The job's second secret, never part of a name: every segment header and every network
  // message of the job carries it, and what carries another is refused as a foreign job's.
  // A guard against mistakes (a stale address, a leftover segment, a mixed-up environment),
  // not against a hostile process of the same user, which can read it from /proc.
  uint64_t cookie() const { return cookie_; }

  // Collective use: every rank puts, everyone fences, then gets. A get of a key put before
  // the last fence is all that PMI promises; weftrun's get also waits for a later put.
  // Keys belong to the rank that put them (as in PMIx): put stores this rank's value, get
  // reads the value `rank` put under the same key.
  virtual void put(const std::string& key, const std::string& value) = 0;
  virtual std::string get(int rank, const std::string& key) = 0;
  virtual void fence() = 0;
  // The job's number for this bootstrap's rank `r`, for messages (a host subset renumbers).
  virtual int job_rank(int r) const { return r; }
  // False once the launcher is known to be gone (weftrun: its socket closed). Cheap enough
  // for a periodic check (one poll system call), not for every progress.
  virtual bool launcher_alive() { return true; }

  // Whether `rank` runs on this rank's host (shares its memory): the launcher's placement,
  // overridden by WEFT_HOST_ID (network namespaces share the host name and /dev/shm).
  bool same_host(int rank);
  // The ranks whose kernel is this rank's (the same boot id), this rank among them: those
  // that share this machine's CPUs, whichever host of it they run on (network namespaces
  // and containers of one machine are hosts of their own, with their own addresses and
  // shared memory, on the same CPUs), and every rank of this host (whether or not it could
  // read its boot id). Reads every rank's host record at first use, as same_host does.
  int machine_size();

  // Test builds only (WEFT_TEST_HOOKS; a no-op otherwise): WEFT_TEST_FOREIGN_COOKIE=R gives
  // rank R another cookie once its bootstrap is up, so that its segments and messages are
  // another job's to the others.
  void test_hook_foreign_cookie();

  // Settings that must agree on every rank: each rank publishes `mine` ("name=value ..." in
  // a fixed order) under `key`, one fence, then every rank compares every rank's with rank
  // 0's and finds the same first difference, so all fail with one message naming the
  // setting, both values and both ranks (`call`, `argument`; `hint` says what to change).
  // Collective.
  void check_agreement(const std::string& key, const std::string& mine, const char* call,
                       const char* argument, const std::string& hint);

 protected:
  // Rank and size from the launcher's variables `rank_var` and `size_var` (their texts),
  // checked; `missing` says what an unset one means.
  void ranks_from(const char* call, const char* rank_var, const std::string& rank_text,
                  const char* size_var, const std::string& size_text, const char* missing);
  // Rank 0 draws the job identifier and cookie, then one fence (puts made before it ride
  // along) and everyone reads them.
  void agree_job_id();
  // Before the init fence: names this rank's host for the others, as WEFT_HOST_ID, else
  // the launcher's name for its node, else the host name and boot id; then, after a '|',
  // the boot id alone, which names the machine (machine_size).
  void publish_host(const std::string& launcher_node);
  // After the init fence: with WEFT_HOST_ID set, the local ranks are those of that host.
  void apply_host_override();
  // Local rank and size from the hosts every rank published.
  void local_ranks_from_hosts();

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string job_id_;
  uint64_t cookie_ = 0;

 private:
  void read_hosts();
  std::once_flag hosts_once_;
  std::vector<int> host_of_;  // by rank: an index standing for its host
  int machine_size_ = 1;      // ranks of this host or with this rank's boot id
};

// The host name and the kernel's boot id: what tells hosts apart when nothing else does.
std::string host_identity();
// The kernel's boot id: the same for every process of one machine (or virtual machine),
// whatever network namespace or container it runs in. Empty when it cannot be read.
std::string kernel_boot_id();

// The process-wide bootstrap, created on first use and shared by every runtime.
std::shared_ptr<bootstrap> acquire();

std::string random_hex(size_t nbytes);
uint64_t random_u64();

// A non-negative integer from the environment variable `name`; `missing` says what an
// unset one means.
int env_count(const char* call, const char* name, const char* missing);
// The same of a variable's text.
int text_count(const char* call, const char* name, const std::string& text, const char* missing);

// One flat name for (rank, key), for the key-value stores that have no owners.
inline std::string owned_key(int rank, const std::string& key) {
  return key + "@" + std::to_string(rank);
}

}  // namespace weft::bootstrap
