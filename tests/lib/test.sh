# shellcheck shell=bash
# tests/lib/test.sh - the start every integration test shares:
#
#   set -uo pipefail
#   . "$(dirname "$0")/../lib/test.sh" [inspect]
#
# sources the harness (harness/origin.sh: origins, mounts, ports, temp dirs, the
# registry that cleans up), cleans up at exit (a test with a cleanup of its
# own sets its own EXIT trap and calls harness_cleanup from it), skips
# (exit 77) where the test cannot run (not root, no gateway binary; with
# "inspect", no cachegw-inspect), and gives the failure counter:
#
#   bad MESSAGE    prints "FAIL: MESSAGE" and makes the test fail: it ends
#                  with `exit $fail`.
. "$(dirname "${BASH_SOURCE[0]}")/../../harness/origin.sh"
trap harness_cleanup EXIT
harness_require_root
harness_require_gateway
[ "${1:-}" != inspect ] || harness_require_inspect
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
