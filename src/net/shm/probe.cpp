// SPDX-License-Identifier: BSD-3-Clause
// What shared memory can do here, for weft-info: room in /dev/shm, the kernel's ptrace
// policy, and whether one process may read a sibling's memory by cross-memory attach
// (process_vm_readv), tried for real between two child processes, as two ranks would.
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "net/backend.hpp"
#include "net/shm/cma.hpp"
#include "util/settings.hpp"

namespace weft::net {
namespace {

volatile uint64_t probe_word = 0x5745465450524f42ull;

// Two children of this process: the first waits, the second reads the first's word.
std::string sibling_cma() {
  int ready[2];
  if (pipe(ready) != 0) return "not tried (pipe failed)";
  const pid_t target = fork();
  if (target == 0) {
    close(ready[0]);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  (void)!read(ready[0], &c, 1);
  close(ready[0]);
  const pid_t reader = fork();
  if (reader == 0) {
    uint64_t got = 0;
    const int rc = shm::cma_read(target, &got, reinterpret_cast<uintptr_t>(&probe_word), 8);
    _exit(rc == 0 && got == probe_word ? 0 : 1);
  }
  int status = 0;
  waitpid(reader, &status, 0);
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "allowed between sibling processes"
                                                       : "refused between sibling processes";
}

std::string first_line(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return "absent";
  char buf[64] = {0};
  if (!fgets(buf, sizeof(buf), f)) buf[0] = 0;
  fclose(f);
  std::string s = buf;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

void probe_shm(std::vector<finding>& out) {
  struct statvfs st;
  if (statvfs("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0)
    out.push_back({"/dev/shm", std::to_string(st.f_bavail * st.f_frsize >> 20) + " MiB free"});
  else
    out.push_back({"/dev/shm", "not writable"});
  out.push_back({"yama ptrace_scope", first_line("/proc/sys/kernel/yama/ptrace_scope")});
  out.push_back({"cross-memory attach", sibling_cma()});
  if (!util::get_flag(util::setting::shm_cma))
    out.push_back({"cross-memory attach", "forbidden by WEFT_SHM_CMA=0"});
}

}  // namespace weft::net
