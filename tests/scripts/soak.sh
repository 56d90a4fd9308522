#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft-soak under weftrun, judged from its output: the job's exit status, every surviving
# rank's own line, rank 0's verdict line and, as root, that the job left nothing in a
# /dev/shm of its own (a private tmpfs, so no other test's segments can hide or fake one).
#   soak.sh WEFTRUN SOAK NRANKS EXPECT [weftrun options --] soak options...
# EXPECT: clean (every rank ok, exit 0), death (one rank killed: 137 from weftrun, the
# others ok and their operations with it ended in errors naming it), or drop|dup|corrupt
# (the injected fault: exactly one message lost, duplicated or corrupted, and a failure).
set -u
weftrun=$1 soak=$2 n=$3 expect=$4
shift 4
. "$(dirname "$0")/common.sh"
launcher=()
if [[ " $* " == *" -- "* ]]; then
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
fi
out=$(mktemp) left=$(mktemp)
trap 'rm -f "$out" "$left"' EXIT
export LEFT=$left
run=("$weftrun" --keep-going --timeout 600 -n "$n" "${launcher[@]}" "$soak" "$@")
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
  unshare -m sh -c 'mount -t tmpfs -o size=8g tmpfs /dev/shm || exit 90
    "$@"; rc=$?; ls -A /dev/shm >"$LEFT"; exit $rc' sh "${run[@]}" >"$out" 2>&1 </dev/null
  rc=$?
  [ $rc -ne 90 ] || fail "could not mount a private /dev/shm"
  shm_checked=yes
else
  "${run[@]}" >"$out" 2>&1 </dev/null
  rc=$?
  shm_checked="no (not root)"
fi

verdict=$(grep -E '^soak: operations [0-9]+ verified [0-9]+ lost [0-9]+ duplicated [0-9]+ corrupted [0-9]+$' "$out")
[ "$(echo "$verdict" | grep -c .)" -eq 1 ] || { cat "$out"; fail "no single verdict line from rank 0 (rc $rc)"; }
read -r ops verified lost dup corrupt <<<"$(echo "$verdict" | awk '{print $3, $5, $7, $9, $11}')"
[ "$ops" -gt 0 ] && [ "$verified" -gt 0 ] || { cat "$out"; fail "nothing was sent or checked: $verdict"; }
grep -Eq '^soak: [0-9]+ ranks reported .* 0 other errors, 0 hung$' "$out" ||
  { cat "$out"; fail "errors other than a dead peer's, or operations hung"; }

victim=$(sed -n 's/^soak: rank \([0-9]*\) will be killed.*/\1/p' "$out")
ranks_ok() {  # every rank but the victim printed its own ok line
  local r
  for r in $(seq 0 $((n - 1))); do
    [ "$r" = "$victim" ] && continue
    grep -Eq "^soak rank $r: ok: operations [0-9]+ verified [0-9]+ lost 0 duplicated 0 corrupted 0 errors 0 hung 0 " "$out" || return 1
  done
}
case $expect in
  clean)
    [ $rc -eq 0 ] && [ "$lost$dup$corrupt" = 000 ] && ranks_ok ||
      { cat "$out"; fail "soak failed (rc $rc): $verdict"; }
    ;;
  death)
    [ -n "$victim" ] || { cat "$out"; fail "no rank was planned to die"; }
    grep -q "weftrun: rank $victim (pid [0-9]*) was killed by signal 9" "$out" ||
      { cat "$out"; fail "rank $victim was not killed"; }
    [ $rc -eq 137 ] && [ "$lost$dup$corrupt" = 000 ] && ranks_ok ||
      { cat "$out"; fail "soak with rank $victim killed failed (rc $rc): $verdict"; }
    grep -q "^soak: $((n - 1)) ranks reported (1 never did)" "$out" ||
      { cat "$out"; fail "not every survivor reported"; }
    ;;
  drop | dup | corrupt)
    field=$(case $expect in drop) echo lost ;; dup) echo duplicated ;; *) echo corrupted ;; esac)
    want="lost 0 duplicated 0 corrupted 0"
    want=${want/"$field 0"/"$field 1"}
    [ $rc -ne 0 ] && [[ "$verdict" == *" $want" ]] ||
      { cat "$out"; fail "the injected $expect was not caught as exactly one (rc $rc): $verdict"; }
    ;;
  *) fail "unknown expectation $expect" ;;
esac
if [ "$shm_checked" = yes ]; then
  [ ! -s "$left" ] || { cat "$left"; fail "the job left files in /dev/shm"; }
fi
grep -E '^soak: |^weftrun: rank [0-9]+ .*killed' "$out"  # the plan, the totals, the verdict
pass "weft-soak, $n ranks, $expect: $verdict (rc $rc; /dev/shm checked: $shm_checked)"
