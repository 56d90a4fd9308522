#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs a command on one CPU beside a process that never yields it (another job's work):
#   busy_core.sh command args...
# Both are pinned to the first CPU this shell may use; the hog dies with the script.
set -u
command -v taskset >/dev/null || { echo "busy_core: taskset not installed (util-linux)"; exit 1; }
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')
taskset -c "$cpu" sh -c 'while :; do :; done' &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
taskset -c "$cpu" "$@"
