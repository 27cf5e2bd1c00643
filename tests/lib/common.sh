# shellcheck shell=bash
# tests/lib/common.sh - what the integration tests (through tests/lib/test.sh)
# and the guest tests (through tests/vm/lib.sh) share: the harness
# (harness/origin.sh), the failure counter and its messages, and skips.
#
#   bad MESSAGE             prints "FAIL: MESSAGE" and makes the test fail:
#                           it ends with `exit $fail`
#   step MESSAGE            a progress line with the seconds since the start
#   test_require_cmd CMD... skip the test (exit 77) unless each CMD is installed
#   log_wait FILE TEXT N    wait (up to 30 s) until N lines of FILE hold
#                           TEXT (a fault injection's "held" line, say)
. "$(dirname "${BASH_SOURCE[0]}")/../../harness/origin.sh"
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
step() { echo "--- $* ($SECONDS s)" >&2; }

log_wait() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(grep -cF -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

test_require_cmd() {
	local c
	for c; do
		command -v "$c" >/dev/null 2>&1 || { echo "SKIP: $c not installed" >&2; exit 77; }
	done
}
