#!/bin/bash
# Names known absent (doc/how-it-works.md "Names not there"): in a directory the gateway made, whose every change since came through it (each CREATE's and MKDIR's wcc of the directory chained to the last), the kernel's LOOKUP before each create is answered ENOENT without the origin (with lookupcache=all; counted: lookups_known_absent_total; origin LOOKUPs stay flat, while with the default, positive, each file made costs one); a name made there is found after the kernel forgot it; a name another client makes there after the gateway's last change makes an exclusive create fail with EEXIST (and is found right after), and, made after the gateway's last change, is missing only until the directory's attribute lifetime (acdirmin=acdirmax=3 here) has passed since that change, as the Linux NFS client keeps negative dentries; then open(2) reads it.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

N=20
data=$(harness_tmpdir origin-data)
test_origin "$data"
# The other client: a second gateway with the default, lookupcache=positive,
# which keeps no names absent.
test_mount
mnt2=$mnt cdir2=$cdir pid2=$GW_PID log2=$GW_LOG
test_mount lookupcache=all,acdirmin=3,acdirmax=3
st() { cache_inspect stats --cache-dir "$1" | awk -v n="$2" '$1 == n { print $2; exit }'; }

# make MNT CDIR DIR: mkdir DIR and N files in it through MNT; prints the
# origin LOOKUPs and the LOOKUPs answered absent it took.
make_tree() {
	local l0 k0 i
	l0=$(st "$2" origin_lookup_calls_total) k0=$(st "$2" lookups_known_absent_total)
	mkdir "$1/$3" || bad "mkdir $3 through $1"
	for i in $(seq 1 $N); do
		echo "$3/f$i" >"$1/$3/f$i" || bad "writing $3/f$i through $1"
	done
	echo "$(($(st "$2" origin_lookup_calls_total) - l0)) $(($(st "$2" lookups_known_absent_total) - ${k0:-0}))"
}

# 1. The calls: N files made in a new directory.
read -r lk ka <<<"$(make_tree "$mnt" "$cdir" d)"
read -r lk2 ka2 <<<"$(make_tree "$mnt2" "$cdir2" d2)"
echo "  $N files in a new directory: origin LOOKUPs $lk (answered absent $ka); with the default (positive) $lk2 ($ka2)" >&2
[ "$lk" -le 2 ] || bad "$lk origin LOOKUPs for $N files made in a directory the gateway made, want <= 2"
[ "$ka" -ge "$N" ] || bad "lookups_known_absent_total moved by $ka, want >= $N"
[ "$lk2" -ge "$N" ] || bad "the default (positive): $lk2 origin LOOKUPs for $N files, want >= $N"
[ "${ka2:-0}" = 0 ] || bad "the default (positive): $ka2 LOOKUPs answered absent, want 0"
for i in 1 $N; do
	[ "$(cat "$data/d/f$i")" = "d/f$i" ] || bad "the origin's d/f$i: '$(cat "$data/d/f$i")'"
done

# 2. A name made is never answered absent: the kernel forgets its
# dentries, the next lookup comes to the gateway.
drop_caches
[ "$(cat "$mnt/d/f7" 2>&1)" = "d/f7" ] || bad "d/f7 after the kernel forgot it: '$(cat "$mnt/d/f7" 2>&1)'"
stat "$mnt/d/f$N" >/dev/null || bad "d/f$N after the kernel forgot it: not found"

# 3. Another client makes x1 in d after the gateway's last change: an
# exclusive create of x1 fails with EEXIST (the CREATE's answer ends what
# the gateway knew of d) and x1 is found right after.
echo other >"$mnt2/d/x1" || bad "the other client's d/x1"
"$PY" - "$mnt/d/x1" <<'PY' || bad "an exclusive create of d/x1, made by another client: not EEXIST"
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
except OSError as e:
    sys.exit(0 if e.errno == errno.EEXIST else 1)
sys.exit(1)
PY
[ "$(cat "$mnt/d/x1" 2>&1)" = "other" ] || bad "d/x1 after EEXIST: '$(cat "$mnt/d/x1" 2>&1)', want 'other'"
[ "$(cat "$data/d/x1")" = "other" ] || bad "the origin's d/x1: '$(cat "$data/d/x1")'"

# 4. The lifetime: x2 made by another client in e right after the
# gateway's last change there is missing until e's attributes (3 s from
# that change) would be asked again; then open(2) finds it.
mkdir "$mnt/e" && echo e >"$mnt/e/f1" || bad "e/f1 through the gateway"
t0=$(date +%s.%N)
echo other >"$mnt2/e/x2" || bad "the other client's e/x2"
if stat "$mnt/e/x2" >/dev/null 2>&1; then
	echo "  e/x2 found at once (a slow machine?)" >&2
	# Only if the machine was slow enough to pass the 3 s.
	[ "$(echo "$(date +%s.%N) - $t0 > 2.5" | bc)" = 1 ] ||
		bad "e/x2 found within e's attribute lifetime: not answered from known names"
else
	echo "  e/x2 missing within e's attribute lifetime, as expected" >&2
fi
sleep 3.2
[ "$(cat "$mnt/e/x2" 2>&1)" = "other" ] || bad "e/x2 after e's attribute lifetime: '$(cat "$mnt/e/x2" 2>&1)', want 'other'"

# 5. A removal through the gateway ends the knowledge too (its reply
# carries no wcc of the directory here): a name another client makes
# right after it is found at once.
mkdir "$mnt/g" && echo g >"$mnt/g/f1" || bad "g/f1 through the gateway"
rm "$mnt/g/f1" || bad "rm g/f1 through the gateway"
echo other >"$mnt2/g/x3" || bad "the other client's g/x3"
[ "$(cat "$mnt/g/x3" 2>&1)" = "other" ] || bad "g/x3 made by another client after an rm through the gateway: '$(cat "$mnt/g/x3" 2>&1)'"

gw_check
unmount_gateway || bad "unmount failed"
unmount_gateway "$mnt2" "$pid2" "$log2" || bad "unmount of the other client failed"
exit $fail
