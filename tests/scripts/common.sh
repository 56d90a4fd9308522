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
