// SPDX-License-Identifier: BSD-3-Clause
// One weftrun job: its private directory and key-value socket, its ranks (started with
// the launcher's variables, bound to cores), and the loop that serves the ranks' key-value
// requests, forwards their output, reaps them, forwards signals, enforces the timeout, and
// tears the job down when a rank fails.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "weftrun/kvs_server.hpp"

namespace weftrun {

using clock_type = std::chrono::steady_clock;

struct options {
  int n = 1;
  bool tag_output = false;
  bool keep_going = false;
  bool bind = true;
  bool verbose = false;
  double timeout_s = 0;
  int ranks_per_host = 0;  // 0: one host
  std::vector<char*> argv;
};

class job {
 public:
  explicit job(const options& o);
  // Runs the job to its end: the exit status of the first rank to fail (128 + signal for
  // one killed), 124 on timeout, 1 when the job could not start.
  int run();

 private:
  struct rank_state {
    pid_t pid = -1;
    bool running = false;
    int status = 0;
    int out_fd = -1, err_fd = -1;
    std::string out_buf, err_buf;
  };
  bool open_socket();
  void block_signals();
  void choose_cores();
  bool start_ranks();
  [[noreturn]] void exec_rank(int r, const int out[2], const int err[2]);
  bool output_open() const;
  bool serve_once();
  void check_timeout(clock_type::time_point now);
  void reap();
  void on_signals(clock_type::time_point now);
  void on_client(int fd);
  void forward_output(int fd);
  void signal_all(int sig);
  void teardown(const char* why);
  int finish();

  const options& o_;
  const std::string job_id_;  // names the segments (visible in /dev/shm)
  const uint64_t cookie_;     // a second secret: only in the ranks' environment
  std::string dir_, sock_path_;
  int lfd_ = -1, sfd_ = -1;
  sigset_t old_mask_{};
  std::vector<int> cpus_;
  bool bind_ranks_ = false;
  std::vector<rank_state> ranks_;
  kvs_server kvs_;
  std::map<int, std::string> clients_;  // fd -> pending input
  int running_ = 0, exit_code_ = 0, interrupts_ = 0;
  bool tearing_down_ = false, timed_out_ = false;
  clock_type::time_point start_, kill_at_{};
};

}  // namespace weftrun
