# Shared by the scripted tests: fail with a message, and check /dev/shm for leftovers.
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
shm_snapshot() { ls /dev/shm 2>/dev/null | grep '^weft-' | sort; }
