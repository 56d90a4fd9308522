#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What weftrun and Weft create is the job's user's alone: the job's directory (0700), its
# key-value socket (0600) and its shared-memory segments (0600), checked by mode and by an
# attempt from another user (created here with useradd) that must fail. And a process of
# the same user without the job's cookie is refused by the key-value server. Root only
# (useradd, setpriv). Rank 1 allocates a device 4 s after rank 0 (mp_test late_device), so
# rank 0's segment for it is still in /dev/shm (it is unlinked once every peer mapped it).
set -u
weftrun=$1 mp=$2
. "$(dirname "$0")/common.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: creating another user needs root"; exit 77; }
command -v useradd >/dev/null && command -v setpriv >/dev/null ||
  fail "useradd or setpriv missing (Debian packages passwd, util-linux)"
other=weft-isolation
id -u "$other" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$other" ||
  fail "useradd $other"
as_other() { setpriv --reuid "$(id -u $other)" --regid "$(id -g $other)" --clear-groups "$@"; }
out=$(mktemp); trap 'rm -f $out' EXIT

"$weftrun" -n 2 --timeout 60 --tag-output "$mp" late_device >"$out" 2>&1 &
job=$!
dir=""
for _ in $(seq 1 200); do  # the job's directory: the one whose record names this weftrun
  dir=$(grep -l "^weftrun $job\$" /tmp/weftrun-*/record 2>/dev/null | head -1 | xargs -r dirname)
  id=$([ -n "$dir" ] && sed -n 's/^job //p' "$dir/record")
  # weft-<job>-<context>-<device>-<rank>: rank 0's late device stays until rank 1 maps it
  [ -n "$id" ] && [ -S "$dir/kvs" ] && [ -e /dev/shm/weft-"$id"-0-1-0 ] && break
  sleep 0.02
done
[ -n "$dir" ] && [ -n "$id" ] || { wait $job; cat "$out"; fail "the job's directory never appeared"; }
segs=$(ls /dev/shm/weft-"$id"-* 2>/dev/null)
[ -n "$segs" ] || { wait $job; cat "$out"; fail "rank 0's segments never appeared"; }

mode() { stat -c %a "$1"; }
[ "$(mode "$dir")" = 700 ] || fail "$dir has mode $(mode "$dir"), not 700"
[ "$(mode "$dir/kvs")" = 600 ] || fail "$dir/kvs has mode $(mode "$dir/kvs"), not 600"
# A segment is unlinked once every peer mapped it, so one listed above may be gone by
# now: each one still there is checked, and at least one must be (the late device's).
checked=0
for s in $segs; do
  m=$(stat -c %a "$s" 2>/dev/null) || continue
  [ "$m" = 600 ] || fail "$s has mode $m, not 600"
  checked=$((checked + 1))
done
[ $checked -gt 0 ] || { wait $job; cat "$out"; fail "every segment was gone before its mode was read"; }
pass "modes: job directory 700, key-value socket 600, $checked segments 600"

connect='import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())'
for s in $segs; do
  as_other cat "$s" >/dev/null 2>&1 && fail "user $other could read $s"
  as_other dd of="$s" if=/dev/zero bs=1 count=1 conv=notrunc,nocreat 2>/dev/null &&
    fail "user $other could write $s"
done
as_other python3 -c "$connect" "$dir/kvs" "HELLO 0 0000000000000000" >/dev/null 2>&1 &&
  fail "user $other could connect to the key-value socket"
pass "user $other can neither read nor write the segments nor connect to the socket"

for hello in "HELLO 0" "HELLO 0 0000000000000000" "HELLO 1 $(printf '%016x' 1)"; do
  reply=$(python3 -c "$connect" "$dir/kvs" "$hello" 2>&1)
  case $reply in
    "ERR HELLO without this job's cookie"*) ;;
    *) fail "'$hello' without the job's cookie got '$reply'" ;;
  esac
done
pass "a process of the same user without the job's cookie is refused by the key-value server"

wait $job; rc=$?
[ $rc -eq 0 ] && each_rank_passed 2 || { cat "$out"; fail "the job itself failed (rc $rc)"; }
pass "the job went on: both ranks passed"
