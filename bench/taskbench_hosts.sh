#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The task benchmarks across two hosts over tcp: makes the test suite's network-namespace
# hosts (tests/scripts/netns_common.sh; root needed), then runs bench/taskbench.py --hosts
# with one rank on each. The hosts share this machine's cores and reach each other through
# a bridge: the figures show the engines over a tcp stack, not a real network's speed.
#   bench/taskbench_hosts.sh [--build build] [taskbench.py options...]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
if [ "${1:-}" = "--build" ]; then build=$(cd "$2" && pwd); shift 2; fi
. "$src/tests/scripts/common.sh"
. "$src/tests/scripts/netns_common.sh"
command -v mpiexec.hydra >/dev/null || fail "mpiexec.hydra not installed (Debian package mpich)"
work=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$work"' EXIT
trap 'exit 143' INT TERM
netns_make
# What the launchers call instead of ssh: [options] host command...
cat >"$work/enter" <<EOT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec $(netns_name X | sed 's/X$//')\${host##*.} sh -c "\$*"
EOT
chmod +x "$work/enter"
/usr/bin/python3 "$src/bench/taskbench.py" --build "$build" --out "$build/taskbench_hosts" \
  --hosts "$net.1,$net.2" --enter "$work/enter" --iface "$br" --subnet "$net.0/24" "$@"
