// SPDX-License-Identifier: BSD-3-Clause
// weft-probe: what two cores of this machine do with no library in between, the floor under
// every figure the benchmarks report. Each mode runs two processes (or, for fadd, two
// threads) pinned to two cores, times `trials` runs and prints the median as a RESULT line in
// the benchmarks' format (system=probe):
//   flag   one-way latency of a cache-line ping-pong through shared memory (us)
//   ring   8-byte messages through a single-producer, single-consumer ring (M/s)
//   pipe   two-process copy: source -> shared staging slots -> destination (GB/s)
//   cma    single copy by process_vm_readv from the other process's buffer (GB/s)
//   fadd   two threads doing fetch-and-add on one shared counter (M ops/s, both together)
// The machine's speed drifts over minutes: run it in the same minutes as what it bounds.
//   weft-probe [flag|ring|pipe|cma|fadd|all] [--trials N] [--sizes 65536,4194304] [--cpus 0,1]
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int cpu_a = 0, cpu_b = 1;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);  // best effort: a smaller machine runs unpinned
}

// Shared anonymous memory, inherited by a forked child.
void* shared_map(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("weft-probe: mmap");
    exit(1);
  }
  memset(p, 0, n);
  return p;
}

// Runs `child` in a forked process on cpu_b and `parent` here on cpu_a; returns what parent
// returns (the timed figure) once the child has exited cleanly.
template <typename Parent, typename Child>
double two_processes(Parent&& parent, Child&& child) {
  pid_t pid = fork();
  if (pid < 0) {
    perror("weft-probe: fork");
    exit(1);
  }
  if (pid == 0) {
    pin(cpu_b);
    child();
    _exit(0);
  }
  pin(cpu_a);
  const double v = parent(pid);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "weft-probe: the child process failed\n");
    exit(1);
  }
  return v;
}

struct alignas(64) line {
  std::atomic<uint64_t> v;
};

double flag_oneway_us(uint64_t iters) {
  auto* l = static_cast<line*>(shared_map(2 * sizeof(line)));
  return two_processes(
      [&](pid_t) {
        const double t0 = now_s();
        for (uint64_t i = 1; i <= iters; ++i) {
          l[0].v.store(i, std::memory_order_release);
          while (l[1].v.load(std::memory_order_acquire) != i) {
          }
        }
        return (now_s() - t0) / double(2 * iters) * 1e6;
      },
      [&] {
        for (uint64_t i = 1; i <= iters; ++i) {
          while (l[0].v.load(std::memory_order_acquire) != i) {
          }
          l[1].v.store(i, std::memory_order_release);
        }
      });
}

// A ring of 8-byte messages, each slot with its own sequence word (what a real queue
// carries), the consumer's position read back by the producer once per lap only.
double ring_mps(uint64_t iters) {
  constexpr uint64_t nslots = 1024;
  struct slot {
    std::atomic<uint64_t> seq;
    uint64_t payload;
  };
  auto* head = static_cast<line*>(shared_map(sizeof(line) + nslots * sizeof(slot)));
  auto* slots = reinterpret_cast<slot*>(head + 1);
  return two_processes(
      [&](pid_t) {  // the consumer, timed
        uint64_t sum = 0;
        const double t0 = now_s();
        for (uint64_t i = 1; i <= iters; ++i) {
          slot& s = slots[i & (nslots - 1)];
          while (s.seq.load(std::memory_order_acquire) != i) {
          }
          sum += s.payload;
          if ((i & (nslots / 4 - 1)) == 0) head->v.store(i, std::memory_order_release);
        }
        const double dt = now_s() - t0;
        if (sum != iters * (iters + 1) / 2) {
          fprintf(stderr, "weft-probe: ring lost messages\n");
          exit(1);
        }
        return double(iters) / dt / 1e6;
      },
      [&] {
        uint64_t room = nslots - nslots / 4;  // slots known free
        for (uint64_t i = 1; i <= iters; ++i) {
          while (i > room) room = head->v.load(std::memory_order_acquire) + nslots - nslots / 4;
          slot& s = slots[i & (nslots - 1)];
          s.payload = i;
          s.seq.store(i, std::memory_order_release);
        }
      });
}

size_t reps_for(size_t size) {
  return std::max<size_t>(8, (size_t(2) << 30) / size);  // about 2 GiB moved
}

// Copy-in, copy-out through nslots staging slots of `chunk` bytes (the shape of Weft's own
// pipelined rendezvous), each process with its private source or destination buffer.
double pipe_gbps(size_t size) {
  const size_t chunk = std::min<size_t>(size, 64 << 10), nslots = 8, reps = reps_for(size);
  const size_t nchunks = (size + chunk - 1) / chunk, total = nchunks * reps;
  auto* ctl = static_cast<line*>(shared_map(2 * sizeof(line) + nslots * chunk));
  char* staging = reinterpret_cast<char*>(ctl + 2);
  std::vector<char> buf(size, 1);
  return two_processes(
      [&](pid_t) {  // the receiver, timed
        const double t0 = now_s();
        for (uint64_t c = 0; c < total; ++c) {
          while (ctl[0].v.load(std::memory_order_acquire) <= c) {
          }
          const size_t off = (c % nchunks) * chunk;
          memcpy(buf.data() + off, staging + (c % nslots) * chunk, std::min(chunk, size - off));
          ctl[1].v.store(c + 1, std::memory_order_release);
        }
        return double(size) * double(reps) / (now_s() - t0) / 1e9;
      },
      [&] {
        for (uint64_t c = 0; c < total; ++c) {
          while (c - ctl[1].v.load(std::memory_order_acquire) >= nslots) {
          }
          const size_t off = (c % nchunks) * chunk;
          memcpy(staging + (c % nslots) * chunk, buf.data() + off, std::min(chunk, size - off));
          ctl[0].v.store(c + 1, std::memory_order_release);
        }
      });
}

// One copy, done by the kernel in the reader's context from the other process's pages.
double cma_gbps(size_t size) {
  const size_t reps = reps_for(size);
  auto* ctl = static_cast<line*>(shared_map(sizeof(line)));
  std::vector<char> src(size, 2), dst(size, 0);  // the child's copy of src is read
  char* remote = src.data();
  return two_processes(
      [&](pid_t pid) {
        while (ctl[0].v.load(std::memory_order_acquire) != 1) {
        }
        double t0 = 0;
        for (size_t r = 0; r <= reps; ++r) {
          if (r == 1) t0 = now_s();  // the first copy faults the pages in
          iovec l{dst.data(), size}, rv{remote, size};
          if (process_vm_readv(pid, &l, 1, &rv, 1, 0) != ssize_t(size)) {
            perror("weft-probe: process_vm_readv");
            ctl[0].v.store(2, std::memory_order_release);
            return 0.0;
          }
        }
        const double v = double(size) * double(reps) / (now_s() - t0) / 1e9;
        ctl[0].v.store(2, std::memory_order_release);
        return v;
      },
      [&] {
        memset(src.data(), 3, size);  // the child's own pages
        ctl[0].v.store(1, std::memory_order_release);
        while (ctl[0].v.load(std::memory_order_acquire) != 2) usleep(100);
      });
}

double fadd_mops(uint64_t iters) {
  line counter{};
  auto work = [&](int cpu) {
    pin(cpu);
    for (uint64_t i = 0; i < iters; ++i) counter.v.fetch_add(1, std::memory_order_relaxed);
  };
  const double t0 = now_s();
  std::thread t(work, cpu_b);
  work(cpu_a);
  t.join();
  const double dt = now_s() - t0;
  return double(2 * iters) / dt / 1e6;
}

template <typename Fn>
double median_of(int trials, Fn&& fn) {
  std::vector<double> v;
  for (int i = 0; i < trials; ++i) v.push_back(fn());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void result(const char* api, const char* workload, size_t size, double v, const char* unit) {
  printf(
      "RESULT system=probe api=%s mode=process threads=1 resources=- workload=%s size=%zu "
      "value=%.4g unit=%s\n",
      api, workload, size, v, unit);
  fflush(stdout);
}

std::vector<size_t> parse_sizes(const char* s) {
  std::vector<size_t> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    out.push_back(strtoull(p, &end, 10));
    if (end == p) break;
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "all";
  int trials = 3;
  std::vector<size_t> sizes{65536, 4194304};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trials" && i + 1 < argc) {
      trials = std::max(1, atoi(argv[++i]));
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes = parse_sizes(argv[++i]);
    } else if (a == "--cpus" && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b) != 2) {
        fprintf(stderr, "weft-probe: --cpus wants two core numbers, as in 0,1\n");
        return 2;
      }
    } else if (a[0] != '-') {
      mode = a;
    } else {
      fprintf(stderr,
              "usage: weft-probe [flag|ring|pipe|cma|fadd|all] [--trials N] "
              "[--sizes a,b] [--cpus a,b]\n");
      return 2;
    }
  }
  const bool all = mode == "all";
  bool any = false;
  if (all || mode == "flag") {
    any = true;
    result("flag", "latency", 8, median_of(trials, [] { return flag_oneway_us(200000); }), "us");
  }
  if (all || mode == "ring") {
    any = true;
    result("ring", "rate", 8, median_of(trials, [] { return ring_mps(20000000); }), "M/s");
  }
  for (const char* m : {"pipe", "cma"}) {
    if (!all && mode != m) continue;
    any = true;
    for (size_t s : sizes)
      result(m, "bandwidth", s,
             median_of(trials, [&] { return m[0] == 'p' ? pipe_gbps(s) : cma_gbps(s); }), "GB/s");
  }
  if (all || mode == "fadd") {
    any = true;
    result("fadd", "rate", 8, median_of(trials, [] { return fadd_mops(5000000); }), "M/s");
  }
  if (!any) {
    fprintf(stderr, "weft-probe: unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}
