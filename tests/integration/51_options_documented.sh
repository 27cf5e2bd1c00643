#!/bin/bash
# cachegw(8) is the one reference for options: the man page names every option the gateway accepts (its options table, daemon/opts_table.c) and no option it does not; `cachegw --help` names every option that takes effect, and where the man page states a default, --help prints the same one. The check is shown to fail on an option added to the code only, an option named in the man page only, one dropped from --help, and a default the man page states otherwise (a number, one of several in one item, a word marked "(the default)").
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed" >&2; exit 77; }
top=$(cd "$(dirname "$0")/../.." && pwd)
check=$top/tests/lib/optcheck.py
opts=$top/daemon/opts_table.c
man=$top/doc/cachegw.8.in
t=$(harness_tmpdir optcheck)
"$CACHEGW" --help >"$t/help" 2>&1 || bad "cachegw --help: exit $?"

out=$(python3 "$check" "$opts" "$man" "$t/help") || bad "the options and their documentation differ:
$out"

# The check can fail: an option in the code only ...
sed 's/^\tSECTION("Cache"),$/&\n\tNUM("bogus_knob", nconnect, 0, 0, 1, "N", "knob"),/' "$opts" >"$t/opts.c"
grep -q bogus_knob "$t/opts.c" || bad "could not make the doctored opts_table.c"
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

# A default the man page states otherwise than --help: a number ...
grep -q '^TCP connections to the origin, 1 to 64 (default 4)\.$' "$man" || bad "cachegw(8): nconnect's default not where the test looks"
sed 's/^\(TCP connections to the origin, 1 to 64\) (default 4)\.$/\1 (default 5)./' "$man" >"$t/man2.in"
out=$(python3 "$check" "$opts" "$t/man2.in" "$t/help") && bad "a mismatched default passed the check"
case $out in *"nconnect: default 5 in cachegw(8), [4] in cachegw --help"*) ;; *) bad "a mismatched default: '$out'" ;; esac
# ... one of an item's several ...
sed 's/^Defaults 10, 7 and 3; /Defaults 10, 6 and 3; /' "$man" >"$t/man3.in"
out=$(python3 "$check" "$opts" "$t/man3.in" "$t/help") && bad "a mismatched default of bcull passed the check"
case $out in *"bcull: default 6 in cachegw(8), [7] in cachegw --help"*) ;; *) bad "a mismatched default of bcull: '$out'" ;; esac
# ... and a word marked "(the default)".
sed '/^\.BR writeback " | " nowriteback$/,/^\.TP$/s/^\.B nowriteback$/.B writeback/' "$man" >"$t/man4.in"
out=$(python3 "$check" "$opts" "$t/man4.in" "$t/help") && bad "a mismatched default word passed the check"
case $out in *"writeback: default writeback in cachegw(8), [nowriteback] in cachegw --help"*) ;; *) bad "a mismatched default word: '$out'" ;; esac
exit $fail
