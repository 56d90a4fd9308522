// SPDX-License-Identifier: BSD-3-Clause
// What a job leaves in /tmp and /dev/shm, and how weftrun removes it: its own at the end,
// and what an earlier weftrun that was killed left behind.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace weftrun {

// Removes the job's shared-memory segments (Weft's, named by the job id, and libfabric's
// shm provider's, named by the ranks' pids); returns how many.
int remove_job_segments(const std::string& job, const std::vector<pid_t>& pids);
// Appends `line` to the job's record in its private directory `dir`.
void write_record(const std::string& dir, const std::string& line);
// Removes the directories (and segments) of earlier jobs whose weftrun no longer runs.
int remove_stale_jobs();

}  // namespace weftrun
