#!/bin/bash
# What the gateway knew survives a restart: with nocto,actimeo=600, files read before a restart are listed, found and opened after it without a READDIRPLUS, LOOKUP or ACCESS per directory or file (before: one of each), for root and for another user alike, a file refused before is refused without asking; a file whose mode changed at the origin while the gateway was down is asked about again (refused now), a file changed is read new; kept answers age from when the origin gave them, not from the restart (actimeo=2 and a 3 s pause: asked again); after a SIGKILL only the ACCESS answers are trusted (names and attributes of the killed run may miss its last changes); a damaged md.log costs only calls, never a wrong answer.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed" >&2; exit 77; }
AS_USER=(setpriv --reuid 1000 --regid 1000 --clear-groups --)

data=$(harness_tmpdir origin-data)
for d in d1 d2 d3; do
	mkdir "$data/$d"
	for f in $(seq 1 20); do echo "$d/f$f" >"$data/$d/f$f"; done
done
echo "root only" >"$data/d1/secret"
chmod 0600 "$data/d1/secret"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
chmod 0755 "$mnt"
st() { cache_inspect stats --cache-dir "$cdir" | awk -v n="$1" '$1 == n { print $2; exit }'; }
OPTS="cache_dir=$cdir,allow_other,nocto,actimeo=600"

# Every file's bytes as the origin has them, read through the mount.
read_all() { # WHO...
	local f n=0
	for f in $(cd "$data" && find . -type f -name 'f*' | sort); do
		[ "$("$@" cat "$mnt/$f" 2>&1)" = "$(cat "$data/$f")" ] || { bad "$*: $f reads '$("$@" cat "$mnt/$f" 2>&1)'"; return; }
		n=$((n + 1))
	done
	[ $n = 60 ] || bad "read $n files, want 60"
}
refused() { # WHO... -- FILE
	local out
	out=$("${@:1:$#-1}" cat "$mnt/${!#}" 2>&1) && { bad "${!#} readable by ${*:1:$#-1}: '$out'"; return; }
	case $out in *"Permission denied"*) ;; *) bad "${!#}: '$out', want Permission denied" ;; esac
}

tree() { (cd "$1" && find . | sort); }
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
[ "$(tree "$mnt")" = "$(tree "$data")" ] || bad "the tree through the mount differs from the origin's"
read_all env
read_all "${AS_USER[@]}"
refused "${AS_USER[@]}" d1/secret
first=$(st origin_access_calls_total)
echo "  first mount: $first ACCESS calls" >&2
[ "${first:-0}" -ge 60 ] || bad "the first reads made ${first:-no} ACCESS calls: the test does not see them"

# 1. A restart: the same reads ask the origin nothing about access.
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
[ "$(tree "$mnt")" = "$(tree "$data")" ] || bad "after a restart the tree (listed from what was kept) differs from the origin's: $(diff <(tree "$mnt") <(tree "$data") | head -5)"
read_all env
read_all "${AS_USER[@]}"
refused "${AS_USER[@]}" d1/secret
after=$(st origin_access_calls_total)
listings=$(st md_kept_listings_total)
rdp=$(st origin_readdirplus_calls_total)
echo "  after a restart: READDIRPLUS $rdp, listings from what was kept $listings" >&2
[ "${rdp:-999}" = 0 ] || bad "after a restart with nocto, listing the tree made $rdp READDIRPLUS calls"
[ "${listings:-0}" -ge 4 ] || bad "md_kept_listings_total ${listings:-none}, want 4 (the root and three directories)"
lookups=$(st origin_lookup_calls_total)
restored=$(st md_restored_access_total)
kept=$(st md_kept_lookups_total)
echo "  after a restart: ACCESS $after, LOOKUP $lookups, GETATTR $(st origin_getattr_calls_total), READDIRPLUS $(st origin_readdirplus_calls_total) (kept answers restored: $restored, lookups answered from kept names: $kept)" >&2
# Each user may be asked about searching the 4 directories once.
[ "${after:-999}" -le 8 ] || bad "after a restart the same reads made ${after:-?} ACCESS calls (one per directory and user at most)"
[ "${lookups:-999}" -le 2 ] || bad "after a restart the same reads made ${lookups:-?} LOOKUPs (names were kept)"
[ "${restored:-0}" -ge 60 ] || bad "md_restored_access_total ${restored:-none}, want at least 60"


# 1b. Names removed or renamed through the gateway are not answered from
# what was kept.
rm "$mnt/d3/f10" || bad "rm d3/f10 through the mount"
mv "$mnt/d3/f11" "$mnt/d3/f11b" || bad "mv d3/f11 through the mount"
echo 2 >/proc/sys/vm/drop_caches	# the kernel forgets its dentries
for n in f10 f11; do
	out=$(cat "$mnt/d3/$n" 2>&1) && bad "d3/$n, gone through the mount, reads '$out'"
done
[ "$(cat "$mnt/d3/f11b" 2>&1)" = "d3/f11" ] || bad "d3/f11b (renamed) reads '$(cat "$mnt/d3/f11b" 2>&1)'"
mv "$data/d3/f11b" "$data/d3/f11"
echo "d3/f10" >"$data/d3/f10"

# 1c. Written through the gateway, then a restart: the kept attributes
# are the ones after the write (size, bytes).
echo "appended through the mount" >>"$mnt/d2/f7" || bad "append to d2/f7"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
[ "$(stat -c %s "$mnt/d2/f7")" = "$(stat -c %s "$data/d2/f7")" ] || bad "d2/f7 after a write and a restart: size $(stat -c %s "$mnt/d2/f7"), origin $(stat -c %s "$data/d2/f7")"
[ "$(cat "$mnt/d2/f7")" = "$(cat "$data/d2/f7")" ] || bad "d2/f7 after a write and a restart reads '$(cat "$mnt/d2/f7")'"
kept=$(st md_kept_lookups_total)
[ "${kept:-0}" -ge 2 ] || bad "md_kept_lookups_total ${kept:-none} after looking up d2/f7 (kept names), want 2"
echo "d2/f7" >"$data/d2/f7"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1

# 2. Changed at the origin while the gateway was down, read with
# close-to-open: a mode (the kept answer no longer holds: asked again,
# refused), bytes (read new), though the listings are the kept ones (the
# directories' versions did not change). (With nocto,actimeo=600 both may
# be seen only once 600 s have passed since they were got: the bound.)
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
chmod 0600 "$data/d2/f2"
sleep 1.1	# a new ctime second for origins with coarse timestamps
echo "changed while down" >"$data/d3/f3"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
ls -l "$mnt/d2" "$mnt/d3" >/dev/null
refused "${AS_USER[@]}" d2/f2
[ "$("${AS_USER[@]}" cat "$mnt/d3/f3" 2>&1)" = "changed while down" ] || bad "d3/f3 after a change while down: '$("${AS_USER[@]}" cat "$mnt/d3/f3" 2>&1)'"
[ "$("${AS_USER[@]}" cat "$mnt/d2/f3")" = "d2/f3" ] || bad "d2/f3 (unchanged) through a restart"
chmod 0644 "$data/d2/f2"
echo "d3/f3" >"$data/d3/f3"

# 2b. Default options (close-to-open), names kept for 1 s (acdirmin=1,
# acdirmax=1): once that has passed, a file removed at the origin while
# the gateway was down is gone, one replaced is read new, though their
# names were kept.
CTO="cache_dir=$cdir,allow_other,acdirmin=1,acdirmax=1"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$CTO" || exit 1
read_all env
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
rm "$data/d1/f4"
rm "$data/d1/f5"
echo "a new d1/f5" >"$data/d1/f5"
sleep 1.2
mount_gateway "$ORIGIN_URL" "$mnt" "$CTO" || exit 1
out=$(cat "$mnt/d1/f4" 2>&1) && bad "d1/f4, removed while down, reads '$out'"
case $out in *"No such file"*) ;; *) bad "d1/f4 removed while down: '$out', want ENOENT" ;; esac
[ "$(cat "$mnt/d1/f5" 2>&1)" = "a new d1/f5" ] || bad "d1/f5 replaced while down reads '$(cat "$mnt/d1/f5" 2>&1)'"
[ "$(cat "$mnt/d1/f6" 2>&1)" = "d1/f6" ] || bad "d1/f6 (untouched) reads '$(cat "$mnt/d1/f6" 2>&1)'"
echo "d1/f4" >"$data/d1/f4"
echo "d1/f5" >"$data/d1/f5"

# 2c. Close-to-open over kept names and attributes: a file that grew at
# the origin while the gateway was down is read whole after a restart,
# though the kernel was first given its kept (old) size.
LONG="cache_dir=$cdir,allow_other,acregmin=60,acregmax=60,acdirmin=60,acdirmax=60"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$LONG" || exit 1
[ "$(cat "$mnt/d2/f9")" = "d2/f9" ] || bad "d2/f9 before the growth"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
sleep 1.1
echo "grown while the gateway was down" >>"$data/d2/f9"
mount_gateway "$ORIGIN_URL" "$mnt" "$LONG" || exit 1
[ "$(cat "$mnt/d2/f9")" = "$(cat "$data/d2/f9")" ] || bad "d2/f9, grown while down, reads '$(cat "$mnt/d2/f9")' (close-to-open after a restart)"
[ "$(stat -c %s "$mnt/d2/f9")" = "$(stat -c %s "$data/d2/f9")" ] || bad "d2/f9's size after the open: $(stat -c %s "$mnt/d2/f9"), origin $(stat -c %s "$data/d2/f9")"
echo "d2/f9" >"$data/d2/f9"

# 3. Aged from the fetch, not from the restart: with actimeo=2, answers
# got 3 s before are not used.
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
sleep 3
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,nocto,actimeo=2" || exit 1
read_all env
aged=$(st origin_access_calls_total)
echo "  actimeo=2, 3 s later: $aged ACCESS calls" >&2
[ "${aged:-0}" -ge 60 ] || bad "answers older than actimeo=2 were used: ${aged:-?} ACCESS calls for 60 files"

# 3b. A gateway killed (SIGKILL: the last records of its run may be
# missing) leaves only its ACCESS answers to the next start: names and
# attributes are asked again, access is not.
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
read_all env
# A change through the killed run, so that it wrote records after the last
# clean mark (a run that wrote nothing leaves md.log as clean as it was).
echo killed >"$mnt/d2/by-the-killed-run" || bad "a create before the SIGKILL failed"
kill -KILL "$GW_PID"
wait "$GW_PID" 2>/dev/null
fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
read_all env
l=$(st origin_lookup_calls_total)
acc=$(st origin_access_calls_total)
echo "  after SIGKILL: LOOKUP $l, ACCESS $acc" >&2
[ "${l:-0}" -ge 60 ] || bad "after SIGKILL, names kept by the killed run were used (LOOKUP ${l:-?})"
[ "${acc:-999}" -le 4 ] || bad "after SIGKILL, ACCESS answers were not kept (ACCESS ${acc:-?})"
grep -q 'last stop was not clean' "$GW_LOG" || bad "no log line about the stop that was not clean"

# 4. A damaged md.log: calls, never a wrong answer.
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
size=$(stat -c %s "$cdir/md.log")
[ "$size" -gt 1000 ] || bad "md.log is $size bytes"
printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$cdir/md.log" bs=1 seek=$((size / 3)) conv=notrunc status=none
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
read_all env
read_all "${AS_USER[@]}"
refused "${AS_USER[@]}" d1/secret
grep -q 'kept metadata (md.log)' "$GW_LOG" || bad "no log line about the damaged md.log"

# 5. A LOOKUP the origin answered shows that the caller may search the
# directory: kept as such, a file found by its path after a restart (from
# kept names) asks no ACCESS of the directories on the way (before: one
# per directory, the far bench's last ACCESS).
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
cdir=$(harness_tmpdir cache5)
OPTS="cache_dir=$cdir,allow_other,nocto,actimeo=600"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
[ "$(cat "$mnt/d3/f5")" = d3/f5 ] || bad "5: d3/f5 by its path"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1
[ "$(cat "$mnt/d3/f5")" = d3/f5 ] || bad "5: d3/f5 by its path after a restart"
echo "  5: after a restart, d3/f5 by its path: ACCESS $(st origin_access_calls_total), LOOKUP $(st origin_lookup_calls_total), kept lookups $(st md_kept_lookups_total)" >&2
[ "$(st md_kept_lookups_total)" -ge 2 ] || bad "5: the names on the way were not answered from what was kept"
[ "$(st origin_access_calls_total)" = 0 ] || bad "5: $(st origin_access_calls_total) ACCESS calls for a path looked up before the restart"
exit $fail
