# SPDX-License-Identifier: BSD-3-Clause
# Shared by the scripted tests: fail with a message, and check /dev/shm for leftovers.
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
shm_snapshot() { ls /dev/shm 2>/dev/null | grep '^weft-' | sort; }
# Runs a command that must fail with `text` in its output (kept in the file $out).
expect_error() {  # text, command...
  local text=$1; shift
  timeout 60 "$@" >"$out" 2>&1 </dev/null && { cat "$out"; fail "no error for: $*"; }
  grep -q -- "$text" "$out" || { cat "$out"; fail "expected '$text' for: $*"; }
}
# Each rank 0..n-1 printed its own success line in $out ("rank R: NAME: all N checks
# passed", tagged or not): a count of such lines would let one rank's line stand for another's.
each_rank_passed() {  # n
  local r
  for r in $(seq 0 $(($1 - 1))); do
    grep -Eq "^(\[$r\] )?rank $r: [a-z_]+: all [0-9]+ checks passed$" "$out" || return 1
  done
}
