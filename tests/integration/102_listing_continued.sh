#!/bin/bash
# A big directory listed as knfsd lists it (a new open for each READDIR a client sends, seeking to its cookie: tests/lib/dir_cookies.py) costs the origin about one listing, not one per READDIR: at most 1.2x the READDIRPLUS calls of one `ls -f` of a same-sized directory, with every name once; a second `ls` of an unchanged directory costs no READDIRPLUS; a name made at the origin shows in the next `ls` (the directory's new version read again); the listings kept for the next open are counted (dir_listings_kept), at most 16, and gone after their time (CACHEGW_INJECT_LINGER_S=4 here, 30 s by default).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
N=${CACHEGW_TEST_LISTING_N:-4000}
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
mkdir -p "$data/big" "$data/same" "$data/small"
(cd "$data/big" && seq -f "entry-%05g" 1 "$N" | xargs touch)
(cd "$data/same" && seq -f "entry-%05g" 1 "$N" | xargs touch)
for i in $(seq 1 20); do mkdir "$data/small/d$i"; touch "$data/small/d$i/f"; done
test_origin "$data"
CACHEGW_INJECT_LINGER_S=4 test_mount
st() { cache_inspect stats --cache-dir "$cdir" | awk -v n="$1" '$1 == n { print $2; exit }'; }
rdp() { st origin_readdirplus_calls_total; }

# One `ls -f` of a directory of N names: what one listing costs.
r0=$(rdp)
ls -f "$mnt/same" >/dev/null || bad "ls -f same"
one=$(( $(rdp) - r0 ))
echo "  one listing of $N names: $one READDIRPLUS" >&2
[ "$one" -gt 3 ] || bad "a listing of $N names cost $one READDIRPLUS calls (the test needs several)"

# knfsd's way: 200 names per open, each open seeking to the last cookie.
r0=$(rdp)
"$PY" "$(dirname "$0")/../lib/dir_cookies.py" "$mnt/big" 200 >"$work/cookies" 2>"$work/cookies.err" ||
	bad "listing by cookies: $(cat "$work/cookies.err")"
k=$(( $(rdp) - r0 ))
echo "  listed by cookies ($(cat "$work/cookies.err")): $k READDIRPLUS" >&2
[ "$k" -le $(( (one * 12 + 9) / 10 )) ] || bad "listing by cookies cost $k READDIRPLUS calls, one listing costs $one (want at most 1.2x)"
(cd "$data/big" && ls -f | grep -vx '\.\|\.\.' | sort) >"$work/want"
sort "$work/cookies" >"$work/got"
cmp -s "$work/want" "$work/got" || bad "the names listed by cookies are not the origin's: $(diff "$work/want" "$work/got" | head -3 | tr '\n' ';')"

# The same directory again, unchanged: no listing from the origin.
r0=$(rdp)
ls -f "$mnt/big" | grep -vx '\.\|\.\.' | sort >"$work/again" || bad "ls -f big again"
[ "$(( $(rdp) - r0 ))" = 0 ] || bad "a second ls of an unchanged directory cost $(( $(rdp) - r0 )) READDIRPLUS calls"
cmp -s "$work/want" "$work/again" || bad "the second listing differs from the origin's"

# Changed at the origin: the next listing has the new name.
touch "$data/big/made-at-origin"
g0=$(st origin_getattr_calls_total) r0=$(rdp)
ls -f "$mnt/big" >"$work/third"
grep -qx made-at-origin "$work/third" || bad "a name made at the origin is missing from the next ls ($(wc -l <"$work/third") names; GETATTR $g0 -> $(st origin_getattr_calls_total), READDIRPLUS $r0 -> $(rdp))"

# Kept listings: counted, bounded, gone after their time.
for i in $(seq 1 20); do ls "$mnt/small/d$i" >/dev/null || bad "ls small/d$i"; done
kept=$(st dir_listings_kept)
echo "  listings kept after 20 more: $kept ($(st dir_listing_entries_kept) entries)" >&2
[ -n "$kept" ] && [ "$kept" -ge 1 ] && [ "$kept" -le 16 ] || bad "dir_listings_kept '$kept' after listing 22 directories (want 1..16)"
sleep 5
kept=$(st dir_listings_kept)
[ "$kept" = 0 ] || bad "dir_listings_kept '$kept' after the listings' time (want 0)"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
