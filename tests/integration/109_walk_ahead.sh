#!/bin/bash
# Walk ahead (walk_ahead=N): a cold `find` of a tree through a fleet gateway (store: a real PostgreSQL 15) has its subdirectories listed ahead of it, and most of its opens answered by those listings (dir_walk_ahead_used_total), with the same READDIRPLUS calls at the origin as a gateway with walk_ahead=0 walking the same tree, no more store round trips (assign; fewer: the listings read at once share commits), every name committed in the store, the same output; an `ls -l` of a directory with subdirectories lists none of them (one READDIRPLUS, nothing read ahead); a subdirectory changed at the origin after it was read ahead is listed again when the walk opens it (dir_walk_ahead_stale_total), with the new name.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
NDIRS=${CACHEGW_TEST_WALK_DIRS:-30}
PER=${CACHEGW_TEST_WALK_FILES:-30}
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
for ((d = 0; d < NDIRS; d++)); do
	mkdir -p "$data/tree/d$d" "$data/top/s$d"
	(cd "$data/tree/d$d" && seq -f "f%g" 1 "$PER" | xargs touch)
	echo "$d" >"$data/tree/d$d/f1"
done
for ((d = 0; d < 8; d++)); do
	mkdir -p "$data/t2/e$d"
	touch "$data/t2/e$d/x"
done
test_origin "$data"
store_start store "$STORE_PORT" || { echo "FAIL: the store did not start" >&2; exit 1; }
fleet="fleet=$STORE_CONNINFO"

mntB=$(harness_tmpdir mntB)
cB=$(harness_tmpdir cacheB)
mount_gateway "$ORIGIN_URL" "$mntB" "cache_dir=$cB,$fleet,fleet_member=b,walk_ahead=0" ||
	{ echo "FAIL: gateway B (walk_ahead=0) did not mount" >&2; exit 1; }
mntA=$(harness_tmpdir mntA)
cA=$(harness_tmpdir cacheA)
mount_gateway "$ORIGIN_URL" "$mntA" "cache_dir=$cA,$fleet,fleet_member=a" ||
	{ echo "FAIL: gateway A (walk_ahead default, 8) did not mount" >&2; exit 1; }
m() { cache_inspect stats --cache-dir "$1" | awk -v n="$2" '$1 == n { print $2; exit }'; }
# lsdirs DIR...: list each directory, in the order given (ls sorts them).
lsdirs() { "$PY" -c 'import os, sys
for d in sys.argv[1:]: print("\n".join(sorted(os.listdir(d))))' "$@"; }

# 1. The same cold walk through B (walk_ahead=0) and A (the default, 8).
walk() { # CDIR MNT NAME: find, and the counters it moved
	local r0 a0 g0 
	r0=$(m "$1" origin_readdirplus_calls_total) a0=$(m "$1" fleet_assign_calls_total)
	g0=$(m "$1" origin_getattr_calls_total)
	(cd "$2" && find tree -printf '%p %s %m\n' | sort) >"$work/$3.find" || bad "find on $3"
	eval "rdp_$3=$(( $(m "$1" origin_readdirplus_calls_total) - r0 ))"
	eval "assign_$3=$(( $(m "$1" fleet_assign_calls_total) - a0 ))"
	eval "getattr_$3=$(( $(m "$1" origin_getattr_calls_total) - g0 ))"
}
drop_caches
walk "$cB" "$mntB" b
drop_caches
walk "$cA" "$mntA" a
used=$(m "$cA" dir_walk_ahead_used_total) ahead=$(m "$cA" dir_walk_ahead_listings_total)
echo "  walk of $NDIRS dirs: B (walk_ahead=0) READDIRPLUS $rdp_b, GETATTR $getattr_b, assign $assign_b; A READDIRPLUS $rdp_a, GETATTR $getattr_a, assign $assign_a, read ahead $ahead, opens answered by them $used" >&2
(cd "$data" && find tree -printf '%p %s %m\n' | sort) >"$work/origin.find"
cmp -s "$work/origin.find" "$work/a.find" || bad "A's walk differs from the origin's tree: $(diff "$work/origin.find" "$work/a.find" | head -3 | tr '\n' ';')"
cmp -s "$work/origin.find" "$work/b.find" || bad "B's walk differs from the origin's tree"
[ "$rdp_a" = "$rdp_b" ] || bad "A's walk cost $rdp_a READDIRPLUS, B's (walk_ahead=0) $rdp_b (want the same)"
# (GETATTR: an attribute timing out during a slow run may add one.)
[ "$getattr_a" -le $((getattr_b + 2)) ] || bad "A's walk cost $getattr_a GETATTR, B's $getattr_b (want no more)"
[ "$assign_a" -le "$assign_b" ] || bad "A's walk cost $assign_a store round trips, B's $assign_b (want no more)"
[ -n "$used" ] && [ "$used" -ge $((NDIRS / 2)) ] || bad "of A's $NDIRS subdirectory opens, '$used' answered from listings read ahead (want at least $((NDIRS / 2)))"
[ -n "$ahead" ] && [ "$ahead" -ge "$used" ] && [ "$ahead" -le "$NDIRS" ] || bad "A read '$ahead' listings ahead, '$used' used (want used..$NDIRS)"
[ "$(m "$cB" dir_walk_ahead_listings_total)" = 0 ] || bad "B (walk_ahead=0) read listings ahead"
stale=$(m "$cA" dir_walk_ahead_stale_total)
[ "$stale" = 0 ] || bad "$stale listings read ahead were stale in an unchanged tree"
# No handle before the store has it: every name A gave the kernel is there.
rows=$(store_sql store "SELECT count(*) FROM cachegw_node" | tr -dc 0-9)
[ "${rows:-0}" -ge $((NDIRS * PER + NDIRS)) ] || bad "the store holds '$rows' names after the walk (want at least $((NDIRS * PER + NDIRS)))"

# 2. ls -l of a directory of subdirectories: one listing, none ahead.
r0=$(m "$cA" origin_readdirplus_calls_total) k0=$(m "$cA" dir_walk_ahead_listings_total)
ls -l "$mntA/top" >/dev/null || bad "ls -l top"
ls -ld "$mntA/top/s1" "$mntA/top/s2" >/dev/null || bad "ls -ld"
r=$(( $(m "$cA" origin_readdirplus_calls_total) - r0 )) k=$(( $(m "$cA" dir_walk_ahead_listings_total) - k0 ))
[ "$r" = 1 ] && [ "$k" = 0 ] || bad "ls -l of a directory of $NDIRS subdirectories cost $r READDIRPLUS and read $k listings ahead (want 1 and 0)"

# 3. A subdirectory changed at the origin after it was read ahead: its
# open lists it again, with the new name. (The default walk_ahead=8 reads
# all 6 of t2's subdirectories after the first two ahead.)
mapfile -t order < <("$PY" -c 'import os, sys; print("\n".join(os.listdir(sys.argv[1])))' "$mntA/t2")
[ "${#order[@]}" = 8 ] || bad "t2 lists ${#order[@]} names (want 8)"
k0=$(m "$cA" dir_walk_ahead_listings_total) s0=$(m "$cA" dir_walk_ahead_stale_total)
u0=$(m "$cA" dir_walk_ahead_used_total)
lsdirs "$mntA/t2/${order[0]}" "$mntA/t2/${order[1]}" >/dev/null || bad "ls of t2's first two"
gw_wait_metric "$cA" dir_walk_ahead_listings_total $((k0 + 6)) 20 ||
	bad "the other 6 of t2's subdirectories were not read ahead ($(m "$cA" dir_walk_ahead_listings_total), was $k0)"
touch "$data/t2/${order[3]}/made-at-origin"
lsdirs "$mntA/t2/${order[2]}" >"$work/t2.2" || bad "ls t2/${order[2]}"
lsdirs "$mntA/t2/${order[3]}" >"$work/t2.3" || bad "ls t2/${order[3]}"
[ "$(cat "$work/t2.2")" = x ] || bad "t2/${order[2]} lists '$(cat "$work/t2.2")'"
grep -qx made-at-origin "$work/t2.3" || bad "a name made at the origin in a subdirectory read ahead is missing from its listing: '$(tr '\n' ' ' <"$work/t2.3")'"
s=$(( $(m "$cA" dir_walk_ahead_stale_total) - s0 )) u=$(( $(m "$cA" dir_walk_ahead_used_total) - u0 ))
[ "$s" = 1 ] && [ "$u" -ge 1 ] || bad "after a change at the origin: $s stale, $u used (want 1 and at least 1)"

unmount_gateway "$mntA" || bad "unmount A (log: $GW_LOG)"
unmount_gateway "$mntB" || bad "unmount B"
exit $fail
