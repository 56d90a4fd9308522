// weftrun -n N [options] program [args]: starts N ranks of a Weft program on this host.
// See docs/launching.md. Exit status: the status of the first rank to fail (its exit code,
// or 128+signal for a rank killed by a signal; of ranks that ended together, one killed by
// a signal), 124 on --timeout, 2 on a usage error.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/kvs_wire.hpp"
#include "weft/version.hpp"
#include "weftrun/kvs_server.hpp"

namespace {

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

[[noreturn]] void usage(const char* msg) {
  if (msg) fprintf(stderr, "weftrun: %s\n", msg);
  fprintf(stderr,
          "usage: weftrun -n N [options] [--] program [args...]\n"
          "  -n, --np N          number of ranks to start (1..4096)\n"
          "  --tag-output        prefix every output line with [rank]\n"
          "  --timeout SECONDS   kill the job and fail (exit 124) after this long\n"
          "  --keep-going        when a rank dies, keep the others running\n"
          "  --bind-to core|none bind rank i to the i-th allowed core (default: core, when\n"
          "                      there are at least N cores)\n"
          "  --ranks-per-host K  pretend that each K consecutive ranks are a host of their own\n"
          "                      (WEFT_HOST_ID): shared memory within, the network across\n"
          "  -v, --verbose       say what weftrun does\n"
          "  --version           print the version and exit\n");
  exit(2);
}

options parse(int argc, char** argv) {
  options o;
  int i = 1;
  auto value = [&](const char* name) -> const char* {
    if (i + 1 >= argc) usage((std::string(name) + " needs a value").c_str());
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "-n" || a == "--np" || a == "-np") {
      char* end;
      const char* v = value("-n");
      long n = strtol(v, &end, 10);
      if (*end || n < 1 || n > 4096) usage((std::string("-n: '") + v + "' is not 1..4096").c_str());
      o.n = int(n);
    } else if (a == "--tag-output") {
      o.tag_output = true;
    } else if (a == "--keep-going") {
      o.keep_going = true;
    } else if (a == "--timeout") {
      char* end;
      const char* v = value("--timeout");
      o.timeout_s = strtod(v, &end);
      if (*end || o.timeout_s <= 0)
        usage((std::string("--timeout: '") + v + "' is not a positive number").c_str());
    } else if (a == "--bind-to") {
      std::string v = value("--bind-to");
      if (v == "none")
        o.bind = false;
      else if (v == "core")
        o.bind = true;
      else
        usage(("--bind-to: '" + v + "' is not core or none").c_str());
    } else if (a == "--ranks-per-host") {
      char* end;
      const char* v = value("--ranks-per-host");
      long k = strtol(v, &end, 10);
      if (*end || k < 1 || k > 4096)
        usage((std::string("--ranks-per-host: '") + v + "' is not 1..4096").c_str());
      o.ranks_per_host = int(k);
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else if (a == "-h" || a == "--help") {
      usage(nullptr);
    } else if (a == "--version") {
      printf("weftrun (Weft) %s\n", WEFT_VERSION_STRING);
      exit(0);
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (i >= argc) usage("no program given");
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  o.argv.push_back(nullptr);
  return o;
}

struct rank_state {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
};

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

// Removes every shared-memory segment of the job (ranks unlink their own once mapped;
// this catches a rank that died before that): Weft's, named by the job (a mixed job's
// per-host segments carry the job id too), and those libfabric's shm provider names by the
// process id ("<pid>:..."), for the ranks weftrun started and has reaped.
int remove_job_segments(const std::string& job, const std::vector<pid_t>& pids) {
  int removed = 0;
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  std::vector<std::string> prefixes{"weft-" + job};
  for (pid_t pid : pids) prefixes.push_back(std::to_string(pid) + ":");
  while (dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    if (std::any_of(prefixes.begin(), prefixes.end(),
                    [&](const std::string& p) { return name.starts_with(p); }) &&
        shm_unlink((std::string("/") + e->d_name).c_str()) == 0)
      ++removed;
  }
  closedir(d);
  return removed;
}

// The record a job keeps in its private directory, so that a later weftrun can clean up
// after one that was killed (SIGKILL leaves the directory, its socket, and the segments of
// ranks that died before unlinking them): "weftrun <pid>", "job <id>", then "rank <pid>"
// for each rank started.
void write_record(const std::string& dir, const std::string& line) {
  FILE* f = fopen((dir + "/record").c_str(), "a");
  if (!f) return;
  fprintf(f, "%s\n", line.c_str());
  fclose(f);
}

// Removes what earlier jobs of this user left in /tmp when their weftrun died: a
// directory whose recorded weftrun no longer runs. Returns how many it removed.
int remove_stale_jobs() {
  int removed = 0;
  DIR* d = opendir("/tmp");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (!name.starts_with("weftrun-")) continue;
    const std::string dir = "/tmp/" + name;
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    FILE* f = fopen((dir + "/record").c_str(), "r");
    if (!f) continue;  // not ours, or not yet written
    char key[16], value[64];
    pid_t launcher = 0;
    std::string job;
    std::vector<pid_t> pids;
    while (fscanf(f, "%15s %63s", key, value) == 2) {
      if (!strcmp(key, "weftrun")) launcher = pid_t(atoi(value));
      if (!strcmp(key, "job")) job = value;
      if (!strcmp(key, "rank")) pids.push_back(pid_t(atoi(value)));
    }
    fclose(f);
    if (launcher <= 0 || kill(launcher, 0) == 0 || errno != ESRCH) continue;
    if (job.size() >= 16) remove_job_segments(job, pids);
    unlink((dir + "/kvs").c_str());
    unlink((dir + "/record").c_str());
    if (rmdir(dir.c_str()) == 0) {
      fprintf(stderr, "weftrun: removed %s, left by job %s whose weftrun (pid %d) was killed\n",
              dir.c_str(), job.c_str(), int(launcher));
      ++removed;
    }
  }
  closedir(d);
  return removed;
}

uint64_t random_u64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
    perror("weftrun: getrandom");
    exit(1);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  options o = parse(argc, argv);
  // The job's identifier names its segments (visible in /dev/shm); its cookie, a second
  // secret, travels only in the ranks' environment and proves membership of the job.
  const std::string job = weft::bootstrap::cookie_hex(random_u64());
  const uint64_t cookie = random_u64();
  remove_stale_jobs();

  char dir_tmpl[] = "/tmp/weftrun-XXXXXX";
  if (!mkdtemp(dir_tmpl)) {
    perror("weftrun: mkdtemp");
    return 1;
  }
  const std::string dir = dir_tmpl, sock_path = dir + "/kvs";
  write_record(dir, "weftrun " + std::to_string(getpid()));
  write_record(dir, "job " + job);
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path.c_str());
  if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      chmod(sock_path.c_str(), 0600) != 0 || listen(lfd, 4096) != 0) {
    perror("weftrun: key-value socket");
    return 1;
  }

  sigset_t mask, old_mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);

  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const bool bind_ranks = o.bind && int(cpus.size()) >= o.n;
  if (o.verbose)
    fprintf(stderr, "weftrun: job %s, %d ranks, %s\n", job.c_str(), o.n,
            bind_ranks ? "one core each" : "not bound");

  std::vector<rank_state> ranks(size_t(o.n));
  for (int r = 0; r < o.n; ++r) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (o.tag_output && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
      perror("weftrun: pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      perror("weftrun: fork");
      return 1;
    }
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      signal(SIGPIPE, SIG_DFL);
      setpgid(0, 0);  // weftrun alone receives the terminal's Ctrl-C and forwards it
      setenv("WEFT_RANK", std::to_string(r).c_str(), 1);
      setenv("WEFT_SIZE", std::to_string(o.n).c_str(), 1);
      // Only what the bootstrap reads (a program asks get_rank_local() for its place).
      const int k = o.ranks_per_host ? o.ranks_per_host : o.n;
      if (o.ranks_per_host)
        setenv("WEFT_HOST_ID", ("weftrun-host" + std::to_string(r / k)).c_str(), 1);
      setenv("WEFT_JOBID", job.c_str(), 1);
      setenv("WEFT_JOB_COOKIE", weft::bootstrap::cookie_hex(cookie).c_str(), 1);
      setenv("WEFT_KVS_ADDR", sock_path.c_str(), 1);
      if (bind_ranks) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[size_t(r)], &one);
        sched_setaffinity(0, sizeof(one), &one);
      }
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      if (o.tag_output) {
        dup2(out[1], 1);
        dup2(err[1], 2);
      }
      execvp(o.argv[0], o.argv.data());
      fprintf(stderr, "weftrun: cannot execute %s: %s\n", o.argv[0], strerror(errno));
      _exit(127);
    }
    ranks[size_t(r)].pid = pid;
    ranks[size_t(r)].running = true;
    write_record(dir, "rank " + std::to_string(pid));
    if (o.tag_output) {
      close(out[1]);
      close(err[1]);
      ranks[size_t(r)].out_fd = out[0];
      ranks[size_t(r)].err_fd = err[0];
    }
  }

  weftrun::kvs_server kvs(o.n, cookie);
  std::map<int, std::string> clients;  // fd -> pending input
  int running = o.n, exit_code = 0;
  bool tearing_down = false, timed_out = false;
  int interrupts = 0;
  auto start = clock_type::now();
  clock_type::time_point kill_at{};

  auto signal_all = [&](int sig) {
    for (auto& rs : ranks)
      if (rs.running) kill(rs.pid, sig);
  };
  auto teardown = [&](const char* why) {
    if (tearing_down) return;
    tearing_down = true;
    if (o.verbose || why)
      fprintf(stderr, "weftrun: %s; terminating the other ranks\n", why ? why : "tearing down");
    signal_all(SIGTERM);
    kill_at = clock_type::now() + std::chrono::seconds(3);
  };

  while (running > 0 || [&] {
    for (auto& rs : ranks)
      if (rs.out_fd >= 0 || rs.err_fd >= 0) return true;
    return false;
  }()) {
    std::vector<pollfd> fds;
    fds.push_back({sfd, POLLIN, 0});
    fds.push_back({lfd, POLLIN, 0});
    for (auto& [fd, _] : clients) fds.push_back({fd, POLLIN, 0});
    for (auto& rs : ranks) {
      if (rs.out_fd >= 0) fds.push_back({rs.out_fd, POLLIN, 0});
      if (rs.err_fd >= 0) fds.push_back({rs.err_fd, POLLIN, 0});
    }
    int wait_ms = 500;
    if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      perror("weftrun: poll");
      break;
    }
    auto now = clock_type::now();
    if (o.timeout_s > 0 && !timed_out && running > 0 &&
        now - start > std::chrono::duration<double>(o.timeout_s)) {
      timed_out = true;
      std::string still;
      for (int r = 0; r < o.n; ++r)
        if (ranks[size_t(r)].running) still += " " + std::to_string(r);
      fprintf(stderr, "weftrun: timed out after %g s; ranks still running:%s\n", o.timeout_s,
              still.c_str());
      tearing_down = false;
      teardown(nullptr);
    }
    if (tearing_down && running > 0 && now > kill_at) signal_all(SIGKILL);

    // Reaped first thing after each wake-up, so that the order of failures is their order
    // in time, to the resolution of weftrun's wake-ups. Ranks reaped in one pass ended
    // between two looks, so their order is unknown: a rank killed by a signal goes first,
    // since a rank that exits with an error of its own after a peer's death reacts to it.
    int status;
    pid_t pid;
    int pass_code = 0;
    bool pass_signal = false;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (int r = 0; r < o.n; ++r) {
        auto& rs = ranks[size_t(r)];
        if (rs.pid != pid || !rs.running) continue;
        rs.running = false;
        rs.status = status;
        --running;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        kvs.rank_exited(r, failed, failed ? describe_status(status) : "finished");
        if (o.verbose)
          fprintf(stderr, "weftrun: rank %d (pid %d) %s\n", r, pid,
                  describe_status(status).c_str());
        if (failed && !exit_code && (!pass_code || (!pass_signal && WIFSIGNALED(status)))) {
          pass_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          pass_signal = WIFSIGNALED(status);
        }
        if (failed && !tearing_down && !timed_out) {
          std::string why = "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " +
                            describe_status(status);
          if (o.keep_going)
            fprintf(stderr, "weftrun: %s; the other ranks keep running\n", why.c_str());
          else
            teardown(why.c_str());
        }
      }
    }
    if (!exit_code) exit_code = pass_code;
    for (auto& p : fds) {
      if (!p.revents) continue;
      if (p.fd == sfd) {
        signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
          if (si.ssi_signo == SIGCHLD) continue;  // reaped below
          ++interrupts;
          fprintf(stderr, "weftrun: got signal %u (%s), forwarding to the ranks\n", si.ssi_signo,
                  strsignal(int(si.ssi_signo)));
          if (!exit_code) exit_code = 128 + int(si.ssi_signo);
          signal_all(interrupts > 1 ? SIGKILL : int(si.ssi_signo));
          tearing_down = true;
          kill_at = now + std::chrono::seconds(3);
        }
        break;  // the fd list may change; poll again
      }
    }
    for (auto& p : fds) {
      if (!p.revents || p.fd == sfd) continue;
      if (p.fd == lfd) {
        int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) clients[c] = "";
        continue;
      }
      auto cl = clients.find(p.fd);
      if (cl != clients.end()) {
        char buf[65536];
        ssize_t got = read(p.fd, buf, sizeof(buf));
        bool keep = got > 0;
        if (keep) {
          cl->second.append(buf, size_t(got));
          size_t nl;
          while (keep && (nl = cl->second.find('\n')) != std::string::npos) {
            std::string line = cl->second.substr(0, nl);
            cl->second.erase(0, nl + 1);
            keep = kvs.on_line(p.fd, line);
          }
        }
        if (!keep) {
          kvs.on_disconnect(p.fd);
          close(p.fd);
          clients.erase(cl);
        }
        continue;
      }
      for (int r = 0; r < o.n; ++r) {
        auto& rs = ranks[size_t(r)];
        for (int* fdp : {&rs.out_fd, &rs.err_fd}) {
          if (*fdp != p.fd) continue;
          std::string& acc = fdp == &rs.out_fd ? rs.out_buf : rs.err_buf;
          FILE* to = fdp == &rs.out_fd ? stdout : stderr;
          char buf[65536];
          ssize_t got = read(p.fd, buf, sizeof(buf));
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
  }

  for (auto& [fd, _] : clients) close(fd);
  close(lfd);
  unlink(sock_path.c_str());
  unlink((dir + "/record").c_str());
  rmdir(dir.c_str());
  std::vector<pid_t> pids;
  for (auto& r : ranks) pids.push_back(r.pid);
  int removed = remove_job_segments(job, pids);
  if (o.verbose || removed)
    fprintf(stderr, "weftrun: removed %d shared-memory segment%s left by the job\n", removed,
            removed == 1 ? "" : "s");
  if (timed_out) return 124;
  return exit_code;
}
