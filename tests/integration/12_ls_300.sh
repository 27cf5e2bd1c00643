#!/bin/bash
# `ls -l` of a 300-file directory through the gateway lists all 300 entries with the origin's modes and sizes.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
fill_tree "$data" || exit 1
test_origin "$data"
test_mount

# mode string, size, name (names have no spaces); skip the "total" line.
listing() { LC_ALL=C ls -l "$1" | awk 'NR > 1 { print $1, $5, $NF }'; }

want=$(listing "$data/$FILL_MANY")
for pass in 1 2; do
	got=$(LC_ALL=C timeout 60 ls -l "$mnt/$FILL_MANY" | awk 'NR > 1 { print $1, $5, $NF }')
	n=$(printf '%s\n' "$got" | grep -c .)
	[ "$n" = "$FILL_MANY_COUNT" ] || bad "pass $pass: ls -l lists $n entries, want $FILL_MANY_COUNT"
	if [ "$want" != "$got" ]; then
		bad "pass $pass: ls -l differs from the origin's (< origin, > mount)"
		diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -n 20 >&2
	fi
done

# Plain readdir (no stat) agrees too.
n=$(timeout 60 ls -f "$mnt/$FILL_MANY" | grep -vc '^\.\.\?$')
[ "$n" = "$FILL_MANY_COUNT" ] || bad "ls -f lists $n entries, want $FILL_MANY_COUNT"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
