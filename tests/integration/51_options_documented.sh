#!/bin/bash
# cachegw(8) is the one reference for options: the man page names every option the gateway accepts (its fuse_opt table in daemon/opts.c) and no option it does not; `cachegw --help` names every option that takes effect. The check is shown to fail on an option added to the code only, an option named in the man page only, and one dropped from --help.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed" >&2; exit 77; }
top=$(cd "$(dirname "$0")/../.." && pwd)
check=$top/tests/lib/optcheck.py
opts=$top/daemon/opts.c
man=$top/doc/cachegw.8.in
t=$(harness_tmpdir optcheck)
"$CACHEGW" --help >"$t/help" 2>&1 || bad "cachegw --help: exit $?"

out=$(python3 "$check" "$opts" "$man" "$t/help") || bad "the options and their documentation differ:
$out"

# The check can fail: an option in the code only ...
sed 's/\tOPT("cache_dir=%s", cache_dir),/&\n\tOPT("bogus_knob=%u", nconnect),/' "$opts" >"$t/opts.c"
grep -q bogus_knob "$t/opts.c" || bad "could not make the doctored opts.c"
out=$(python3 "$check" "$t/opts.c" "$man" "$t/help") && bad "an option only in the code passed the check"
case $out in *"bogus_knob: accepted by the gateway, not in cachegw(8)"*) ;; *) bad "an option only in the code: '$out'" ;; esac
# ... one in the man page only ...
sed 's/^\.SS Cache$/.TP\n.BI phantom_knob= N\nDoes nothing.\n&/' "$man" >"$t/man.in"
out=$(python3 "$check" "$opts" "$t/man.in" "$t/help") && bad "an option only in the man page passed the check"
case $out in *"phantom_knob=: in cachegw(8) OPTIONS, not accepted"*) ;; *) bad "an option only in the man page: '$out'" ;; esac
# ... and one missing from --help.
grep -v '^  nocto ' "$t/help" >"$t/help2"
out=$(python3 "$check" "$opts" "$man" "$t/help2") && bad "an option missing from --help passed the check"
case $out in *"nocto: accepted by the gateway, not in cachegw --help"*) ;; *) bad "an option missing from --help: '$out'" ;; esac
exit $fail
