// SPDX-License-Identifier: BSD-3-Clause
#include "weftrun/job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bootstrap/kvs_wire.hpp"
#include "weftrun/job_files.hpp"

namespace weftrun {
namespace {

uint64_t random_u64() {
  uint64_t v = 0;
  if (!weft::bootstrap::random_bytes(&v, sizeof(v))) {
    perror("weftrun: getrandom");
    exit(1);
  }
  return v;
}

// Writes the complete lines of a rank's output in `buf` with its [rank] tag (and the rest,
// when the rank's stream has ended).
void emit(int rank, std::string& buf, FILE* to, bool final) {
  size_t nl;
  while ((nl = buf.find('\n')) != std::string::npos) {
    fprintf(to, "[%d] %.*s\n", rank, int(nl), buf.data());
    buf.erase(0, nl + 1);
  }
  if (final && !buf.empty()) {
    fprintf(to, "[%d] %s\n", rank, buf.c_str());
    buf.clear();
  }
  fflush(to);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "ended with status " + std::to_string(status);
}

}  // namespace

job::job(const options& o)
    : o_(o),
      job_id_(weft::bootstrap::cookie_hex(random_u64())),
      cookie_(random_u64()),
      ranks_(size_t(o.n)),
      kvs_(o.n, cookie_) {}

int job::run() {
  remove_stale_jobs();
  if (!open_socket()) return 1;
  block_signals();
  choose_cores();
  if (!start_ranks()) return 1;
  start_ = clock_type::now();
  while (running_ > 0 || output_open())
    if (!serve_once()) break;
  return finish();
}

// The private 0700 directory, its record, and the key-value socket (mode 0600) in it.
bool job::open_socket() {
  char dir_tmpl[] = "/tmp/weftrun-XXXXXX";
  if (!mkdtemp(dir_tmpl)) {
    perror("weftrun: mkdtemp");
    return false;
  }
  dir_ = dir_tmpl;
  sock_path_ = dir_ + "/kvs";
  write_record(dir_, "weftrun " + std::to_string(getpid()));
  write_record(dir_, "job " + job_id_);
  lfd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path_.c_str());
  if (lfd_ < 0 || bind(lfd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      chmod(sock_path_.c_str(), 0600) != 0 || listen(lfd_, 4096) != 0) {
    perror("weftrun: key-value socket");
    return false;
  }
  return true;
}

// Signals arrive through a descriptor polled with the rest; the ranks get the old mask.
void job::block_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, &old_mask_);
  sfd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);
}

// Rank i on the i-th core weftrun may use, when there is one for every rank.
void job::choose_cores() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus_.push_back(c);
  bind_ranks_ = o_.bind && int(cpus_.size()) >= o_.n;
  if (o_.verbose)
    fprintf(stderr, "weftrun: job %s, %d ranks, %s\n", job_id_.c_str(), o_.n,
            bind_ranks_ ? "one core each" : "not bound");
}

bool job::start_ranks() {
  for (int r = 0; r < o_.n; ++r) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (o_.tag_output && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
      perror("weftrun: pipe");
      return false;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      perror("weftrun: fork");
      return false;
    }
    if (pid == 0) exec_rank(r, out, err);
    rank_state& rs = ranks_[size_t(r)];
    rs.pid = pid;
    rs.running = true;
    ++running_;
    write_record(dir_, "rank " + std::to_string(pid));
    if (o_.tag_output) {
      close(out[1]);
      close(err[1]);
      rs.out_fd = out[0];
      rs.err_fd = err[0];
    }
  }
  return true;
}

// In the child: the launcher's variables (only what the bootstrap reads; a program asks
// get_rank_local() for its place), its core, its output, then the program.
void job::exec_rank(int r, const int out[2], const int err[2]) {
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  signal(SIGPIPE, SIG_DFL);
  setpgid(0, 0);  // weftrun alone receives the terminal's Ctrl-C and forwards it
  setenv("WEFT_RANK", std::to_string(r).c_str(), 1);
  setenv("WEFT_SIZE", std::to_string(o_.n).c_str(), 1);
  if (o_.ranks_per_host)
    setenv("WEFT_HOST_ID", ("weftrun-host" + std::to_string(r / o_.ranks_per_host)).c_str(), 1);
  setenv("WEFT_JOBID", job_id_.c_str(), 1);
  setenv("WEFT_JOB_COOKIE", weft::bootstrap::cookie_hex(cookie_).c_str(), 1);
  setenv("WEFT_KVS_ADDR", sock_path_.c_str(), 1);
  if (bind_ranks_) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus_[size_t(r)], &one);
    sched_setaffinity(0, sizeof(one), &one);
  }
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  if (o_.tag_output) {
    dup2(out[1], 1);
    dup2(err[1], 2);
  }
  execvp(o_.argv[0], o_.argv.data());
  fprintf(stderr, "weftrun: cannot execute %s: %s\n", o_.argv[0], strerror(errno));
  _exit(127);
}

bool job::output_open() const {
  for (const rank_state& rs : ranks_)
    if (rs.out_fd >= 0 || rs.err_fd >= 0) return true;
  return false;
}

// One wake-up: reap first (so failures are reported in their order in time), then
// signals, new connections, key-value requests and output. False: poll failed.
bool job::serve_once() {
  std::vector<pollfd> fds{{sfd_, POLLIN, 0}, {lfd_, POLLIN, 0}};
  for (auto& [fd, _] : clients_) fds.push_back({fd, POLLIN, 0});
  for (const rank_state& rs : ranks_) {
    if (rs.out_fd >= 0) fds.push_back({rs.out_fd, POLLIN, 0});
    if (rs.err_fd >= 0) fds.push_back({rs.err_fd, POLLIN, 0});
  }
  if (poll(fds.data(), fds.size(), 500) < 0 && errno != EINTR) {
    perror("weftrun: poll");
    return false;
  }
  const auto now = clock_type::now();
  check_timeout(now);
  if (tearing_down_ && running_ > 0 && now > kill_at_) signal_all(SIGKILL);
  reap();
  for (const pollfd& p : fds)
    if (p.revents && p.fd == sfd_) on_signals(now);
  for (const pollfd& p : fds) {
    if (!p.revents || p.fd == sfd_) continue;
    if (p.fd == lfd_) {
      const int c = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) clients_[c] = "";
    } else if (clients_.count(p.fd)) {
      on_client(p.fd);
    } else {
      forward_output(p.fd);
    }
  }
  return true;
}

void job::check_timeout(clock_type::time_point now) {
  if (o_.timeout_s <= 0 || timed_out_ || running_ == 0 ||
      now - start_ <= std::chrono::duration<double>(o_.timeout_s))
    return;
  timed_out_ = true;
  std::string still;
  for (int r = 0; r < o_.n; ++r)
    if (ranks_[size_t(r)].running) {
      still += ' ';  // appended in two steps: GCC 12's -Wrestrict misfires on " " + to_string
      still += std::to_string(r);
    }
  fprintf(stderr, "weftrun: timed out after %g s; ranks still running:%s\n", o_.timeout_s,
          still.c_str());
  tearing_down_ = false;
  teardown(nullptr);
}

// Ranks reaped in one pass ended between two looks, so their order is unknown: a rank
// killed by a signal goes first, since a rank that exits with an error of its own after a
// peer's death reacts to it.
void job::reap() {
  int status, pass_code = 0;
  bool pass_signal = false;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int r = 0; r < o_.n; ++r) {
      rank_state& rs = ranks_[size_t(r)];
      if (rs.pid != pid || !rs.running) continue;
      rs.running = false;
      rs.status = status;
      --running_;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      kvs_.rank_exited(r, failed, failed ? describe_status(status) : "finished");
      if (o_.verbose)
        fprintf(stderr, "weftrun: rank %d (pid %d) %s\n", r, pid, describe_status(status).c_str());
      if (failed && !exit_code_ && (!pass_code || (!pass_signal && WIFSIGNALED(status)))) {
        pass_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pass_signal = WIFSIGNALED(status);
      }
      if (!failed || tearing_down_ || timed_out_) continue;
      const std::string why = "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " +
                              describe_status(status);
      if (o_.keep_going)
        fprintf(stderr, "weftrun: %s; the other ranks keep running\n", why.c_str());
      else
        teardown(why.c_str());
    }
  }
  if (!exit_code_) exit_code_ = pass_code;
}

// A signal to weftrun goes to every rank; a second one kills them.
void job::on_signals(clock_type::time_point now) {
  signalfd_siginfo si;
  while (read(sfd_, &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGCHLD) continue;  // reaped by reap()
    ++interrupts_;
    fprintf(stderr, "weftrun: got signal %u (%s), forwarding to the ranks\n", si.ssi_signo,
            strsignal(int(si.ssi_signo)));
    if (!exit_code_) exit_code_ = 128 + int(si.ssi_signo);
    signal_all(interrupts_ > 1 ? SIGKILL : int(si.ssi_signo));
    tearing_down_ = true;
    kill_at_ = now + std::chrono::seconds(3);
  }
}

// Key-value requests, one per line; a connection the server drops is closed.
void job::on_client(int fd) {
  std::string& pending = clients_[fd];
  char buf[65536];
  const ssize_t got = read(fd, buf, sizeof(buf));
  bool keep = got > 0;
  if (keep) {
    pending.append(buf, size_t(got));
    size_t nl;
    while (keep && (nl = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      keep = kvs_.on_line(fd, line);
    }
  }
  if (!keep) {
    kvs_.on_disconnect(fd);
    close(fd);
    clients_.erase(fd);
  }
}

// A rank's stdout or stderr (with --tag-output), forwarded line by line with its tag.
void job::forward_output(int fd) {
  for (int r = 0; r < o_.n; ++r) {
    rank_state& rs = ranks_[size_t(r)];
    for (int* fdp : {&rs.out_fd, &rs.err_fd}) {
      if (*fdp != fd) continue;
      std::string& acc = fdp == &rs.out_fd ? rs.out_buf : rs.err_buf;
      FILE* to = fdp == &rs.out_fd ? stdout : stderr;
      char buf[65536];
      const ssize_t got = read(fd, buf, sizeof(buf));
      if (got > 0) {
        acc.append(buf, size_t(got));
        emit(r, acc, to, false);
      } else {
        emit(r, acc, to, true);
        close(*fdp);
        *fdp = -1;
      }
    }
  }
}

void job::signal_all(int sig) {
  for (const rank_state& rs : ranks_)
    if (rs.running) kill(rs.pid, sig);
}

void job::teardown(const char* why) {
  if (tearing_down_) return;
  tearing_down_ = true;
  if (o_.verbose || why)
    fprintf(stderr, "weftrun: %s; terminating the other ranks\n", why ? why : "tearing down");
  signal_all(SIGTERM);
  kill_at_ = clock_type::now() + std::chrono::seconds(3);
}

// Closes the socket, removes the directory and the job's segments; the exit status.
int job::finish() {
  for (auto& [fd, _] : clients_) close(fd);
  close(lfd_);
  unlink(sock_path_.c_str());
  unlink((dir_ + "/record").c_str());
  rmdir(dir_.c_str());
  std::vector<pid_t> pids;
  for (const rank_state& r : ranks_) pids.push_back(r.pid);
  const int removed = remove_job_segments(job_id_, pids);
  if (o_.verbose || removed)
    fprintf(stderr, "weftrun: removed %d shared-memory segment%s left by the job\n", removed,
            removed == 1 ? "" : "s");
  if (timed_out_) return 124;
  return exit_code_;
}

}  // namespace weftrun
