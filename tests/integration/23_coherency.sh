#!/bin/bash
# A file changed at the origin behind the gateway (same size, grown, shrunk) is seen on the next open (close-to-open), its new bytes then cached; with nocto,actimeo=2 the change is seen once the attribute timeout expires.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
MiB=1048576
declare -A OLD_SIZE=([same.bin]=$((2 * MiB + 17)) [grow.bin]=$((1 * MiB + 5)) [shrink.bin]=$((3 * MiB + 9)))
declare -A NEW_SIZE=([same.bin]=$((2 * MiB + 17)) [grow.bin]=$((3 * MiB + 333)) [shrink.bin]=$((1 * MiB + 7)))
FILES="same.bin grow.bin shrink.bin"
for f in $FILES; do
	head -c "${OLD_SIZE[$f]}" /dev/urandom >"$data/$f"
	cp "$data/$f" "$data/nocto-$f"
done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)

sum() { sha256sum <"$1" | cut -d' ' -f1; }
msum() { timeout 30 sha256sum <"$mnt/$1" | cut -d' ' -f1; }
# Change a file at the origin in place (same inode): new bytes, NEW_SIZE.
change() { # NAME SIZE
	head -c "$2" /dev/urandom >"$work/new"
	if [ "$2" = "$(stat -c %s "$data/$1")" ]; then
		dd if="$work/new" of="$data/$1" bs=1M conv=notrunc status=none
	else
		cat "$work/new" >"$data/$1"
	fi
}

# ---- 1. Close-to-open (default options): the next open sees the change at
# once, although the attribute cache (acregmin 3 s) would still be valid.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
for f in $FILES; do
	[ "$(msum "$f")" = "$(sum "$data/$f")" ] || bad "cto: first read of $f differs"
done
gw_wait_metric "$cdir" cache_fill_bytes_total $((${OLD_SIZE[same.bin]} + ${OLD_SIZE[grow.bin]} + ${OLD_SIZE[shrink.bin]})) 20 ||
	bad "cto: fills incomplete"
sleep 1.1	# a different mtime second, whatever the origin's granularity
for f in $FILES; do
	change "$f" "${NEW_SIZE[$f]}"
done
for f in $FILES; do
	want=$(sum "$data/$f")
	got=$(msum "$f")
	[ "$got" = "$want" ] || bad "cto: $f changed at the origin (${OLD_SIZE[$f]} -> ${NEW_SIZE[$f]} bytes): the next open reads old or mixed bytes"
	s=$(timeout 10 stat -c %s "$mnt/$f")
	[ "$s" = "${NEW_SIZE[$f]}" ] || bad "cto: $f size through the mount $s, want ${NEW_SIZE[$f]}"
done
# The new bytes are cached in turn: an unchanged file is served by the cache.
gw_wait_metric "$cdir" cache_fill_bytes_total \
	$((${OLD_SIZE[same.bin]} + ${OLD_SIZE[grow.bin]} + ${OLD_SIZE[shrink.bin]} + ${NEW_SIZE[same.bin]} + ${NEW_SIZE[grow.bin]} + ${NEW_SIZE[shrink.bin]})) 20 ||
	bad "cto: the new bytes were not filled into the cache"
o1=$(gw_metric "$cdir" origin_read_bytes_total)
h1=$(gw_metric "$cdir" cache_hit_bytes_total)
drop_caches
for f in $FILES; do
	[ "$(msum "$f")" = "$(sum "$data/$f")" ] || bad "cto: read after the change (from the cache) of $f differs"
done
o2=$(gw_metric "$cdir" origin_read_bytes_total)
h2=$(gw_metric "$cdir" cache_hit_bytes_total)
[ "$o2" = "$o1" ] || bad "cto: unchanged files read again from the origin ($o1 -> $o2)"
[ $((h2 - h1)) -ge $((${NEW_SIZE[same.bin]} + ${NEW_SIZE[grow.bin]} + ${NEW_SIZE[shrink.bin]})) ] ||
	bad "cto: cache_hit_bytes moved by $((h2 - h1)) only"
# A change within the page cache's life (no drop_caches): still seen.
sleep 1.1
change same.bin "${NEW_SIZE[same.bin]}"
[ "$(msum same.bin)" = "$(sum "$data/same.bin")" ] || bad "cto: second change of same.bin not seen (stale page cache?)"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# ---- 2. A change made while the gateway was down is seen after a remount.
sleep 1.1
change grow.bin $((2 * MiB + 1))
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
[ "$(msum grow.bin)" = "$(sum "$data/grow.bin")" ] || bad "change while unmounted: grow.bin reads stale bytes from the cache"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# ---- 3. nocto,actimeo=2: new bytes at the latest once the timeout expired.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,nocto,actimeo=2" || exit 1
for f in $FILES; do
	[ "$(msum "nocto-$f")" = "$(sum "$data/nocto-$f")" ] || bad "nocto: first read of nocto-$f differs"
done
sleep 1.1
for f in $FILES; do
	change "nocto-$f" "${NEW_SIZE[$f]}"
done
# Within the timeout old bytes may be served: nothing asserted.
sleep 2.5
for f in $FILES; do
	want=$(sum "$data/nocto-$f")
	got=$(msum "nocto-$f")
	[ "$got" = "$want" ] || bad "nocto,actimeo=2: nocto-$f still old or mixed 2.5 s after the change"
done
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
[ $fail = 0 ] || tail -n 20 "$GW_LOG" >&2
exit $fail
