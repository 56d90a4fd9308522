// SPDX-License-Identifier: BSD-3-Clause
#include "weftrun/job_files.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace weftrun {

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

}  // namespace weftrun
