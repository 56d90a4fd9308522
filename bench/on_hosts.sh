#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs a benchmark script across network-namespace hosts: makes the test suite's three
# hosts (tests/scripts/netns_common.sh; root needed) and a command that enters one (what
# the launchers call instead of ssh), then runs SCRIPT with --hosts (the first N hosts'
# addresses), --enter, --iface (the bridge) and --subnet. The hosts share this machine's
# cores and reach each other through a bridge: the figures show a tcp stack, not a real
# network's speed.
#   bench/on_hosts.sh [--build build] N SCRIPT [script options...]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
if [ "${1:-}" = "--build" ]; then build=$(cd "$2" && pwd); shift 2; fi
n=$1 script=$2
shift 2
. "$src/tests/scripts/common.sh"
. "$src/tests/scripts/netns_common.sh"
command -v mpiexec.hydra >/dev/null || fail "mpiexec.hydra not installed (Debian package mpich)"
work=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$work"' EXIT
trap 'exit 143' INT TERM
netns_make
cat >"$work/enter" <<EOT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec $(netns_name X | sed 's/X$//')\${host##*.} sh -c "\$*"
EOT
chmod +x "$work/enter"
hosts=$(seq -s, -f "$net.%g" 1 "$n")
/usr/bin/python3 "$script" --build "$build" --hosts "$hosts" --enter "$work/enter" --iface "$br" \
  --subnet "$net.0/24" "$@"
