#!/bin/bash
# Culling: cache_size=16M holds (counter and allocated blocks) while 100 MiB are read, every read exact; a cache on a loop-mounted 64 MiB ext4 fills up and keeps serving exact bytes, culling or skipping fills, never running out of space.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
for b in mkfs.ext4 losetup; do
	command -v "$b" >/dev/null 2>&1 || { echo "SKIP: $b not installed" >&2; exit 77; }
done

MiB=1048576
N=10
FSIZE=$((10 * MiB))
data=$(harness_tmpdir origin-data)
declare -A WANT
for ((i = 0; i < N; i++)); do
	head -c $((FSIZE + i)) /dev/urandom >"$data/f$i"
	WANT[f$i]=$(sha256sum <"$data/f$i" | cut -d' ' -f1)
done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)

# O_DIRECT: every read reaches the gateway (a page-cache hit of a file read
# in the first pass would fill nothing, and culling could not be judged).
msum() { timeout 60 dd if="$mnt/$1" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1; }
# Bytes allocated by the object files (data + meta), as the cap counts them.
alloc_bytes() { find "$1/objects" -type f -printf '%b\n' 2>/dev/null | awk '{ s += $1 * 512 } END { print s + 0 }'; }
metric() { gw_metric "$cdir" "$1"; }

# ---- 1. cache_size=16M while reading 10 x 10 MiB, twice.
cdir=$(harness_tmpdir cache)
CAP=$((16 * MiB))
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,cache_size=16M" || exit 1
max_used=0 max_alloc=0
check_cap() { # LABEL
	local u a
	u=$(metric cache_used_bytes)
	a=$(alloc_bytes "$cdir")
	[ -n "$u" ] || { bad "$1: no cache_used_bytes"; return; }
	[ "$u" -le "$CAP" ] || bad "$1: cache_used_bytes $u > cache_size $CAP"
	[ "$a" -le "$CAP" ] || bad "$1: object files allocate $a bytes > cache_size $CAP"
	[ "$u" -gt "$max_used" ] && max_used=$u
	[ "$a" -gt "$max_alloc" ] && max_alloc=$a
}
for pass in 1 2; do
	for ((i = 0; i < N; i++)); do
		[ "$(msum "f$i")" = "${WANT[f$i]}" ] || bad "cache_size=16M, pass $pass: f$i bytes differ"
		check_cap "pass $pass, after f$i"
		sleep 0.3	# let the fills of f$i land
		check_cap "pass $pass, f$i settled"
	done
done
culled=$(metric cache_culled_objects_total)
[ "${culled:-0}" -gt 0 ] || bad "cache_size=16M: cache_culled_objects_total ${culled:-none}, want > 0"
objs=$(metric cache_objects)
echo "cache_size=16M: max used $max_used, max allocated $max_alloc, culled $culled, objects $objs, errors $(metric cache_errors_total), skipped $(metric cache_fills_skipped_total)" >&2
# The most recently read file is still in the cache and served from it.
last=f$((N - 1))
lsize=$((FSIZE + N - 1))
cached_of() { cache_inspect ls --cache-dir "$cdir" | awk -v s="$1" 'NR > 1 && $2 == s { print $3; exit }'; }
for ((i = 0; i < 100; i++)); do
	[ "$(cached_of "$lsize")" = "$lsize" ] && break
	sleep 0.2
done
[ "$(cached_of "$lsize")" = "$lsize" ] || {
	bad "cache_size=16M: the most recently read file $last is not wholly cached 20 s after its read"
	cache_inspect ls --cache-dir "$cdir" >&2
}
h1=$(metric cache_hit_bytes_total)
o1=$(metric origin_read_bytes_total)
drop_caches
[ "$(msum "$last")" = "${WANT[$last]}" ] || bad "cache_size=16M: re-read of $last differs"
h2=$(metric cache_hit_bytes_total)
o2=$(metric origin_read_bytes_total)
[ $((h2 - h1)) -ge "$FSIZE" ] || bad "cache_size=16M: the most recent file was not kept (hit bytes +$((h2 - h1)), origin +$((o2 - o1)))"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
# The cap holds on disk after shutdown too.
a=$(alloc_bytes "$cdir")
[ "$a" -le "$CAP" ] || bad "cache_size=16M: $a bytes allocated after unmount"
[ "$(cache_inspect verify --cache-dir "$cdir" >/dev/null 2>&1; echo $?)" = 0 ] || bad "cache_size=16M: verify fails afterwards"

# ---- 2. A cache on a small filesystem (64 MiB ext4 on a loop device).
img=$(harness_tmpdir img)/cache.img
lfs=$(harness_tmpdir loopfs)
truncate -s 64M "$img"
mkfs.ext4 -q -F "$img" || { bad "mkfs.ext4 failed"; exit 1; }
mount -o loop "$img" "$lfs" || { echo "SKIP: cannot loop-mount an ext4 image" >&2; exit 77; }
harness_register_mount "$lfs"
cdir=$lfs/cache
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
min_avail=
note_free() {
	local av
	av=$(df --output=avail -B1 "$lfs" | tail -n 1 | tr -d ' ')
	[ -z "$min_avail" ] || [ "$av" -lt "$min_avail" ] && min_avail=$av
	[ "$av" -gt 0 ] || bad "$1: the cache filesystem has 0 bytes free"
}
for pass in 1 2; do
	for ((i = 0; i < N; i++)); do
		[ "$(msum "f$i")" = "${WANT[f$i]}" ] || bad "small fs, pass $pass: f$i bytes differ"
		note_free "small fs, pass $pass, after f$i"
		sleep 0.3
		note_free "small fs, pass $pass, f$i settled"
	done
done
culled=$(metric cache_culled_objects_total)
skipped=$(metric cache_fills_skipped_total)
errors=$(metric cache_errors_total)
[ $((${culled:-0} + ${skipped:-0})) -gt 0 ] || bad "small fs: neither culled (${culled:-none}) nor skipped fills (${skipped:-none}) after 200 MiB through a 64 MiB cache fs"
# bstop (3% by default) is a floor: fills stop before it. Allow some
# overshoot (metadata, a fill racing the check), not the floor's whole size.
fs_size=$(df --output=size -B1 "$lfs" | tail -n 1 | tr -d ' ')
[ $((min_avail * 100 / fs_size)) -ge 1 ] ||
	bad "small fs: free space fell to $min_avail of $fs_size bytes ($((min_avail * 1000 / fs_size))‰), far below bstop=3%"
echo "small fs: min free $min_avail bytes, culled $culled, fills skipped $skipped, errors $errors, used $(metric cache_used_bytes)" >&2
# Still serving, and from the cache for what it holds.
drop_caches
for ((i = 0; i < N; i++)); do
	[ "$(msum "f$i")" = "${WANT[f$i]}" ] || bad "small fs, final pass: f$i bytes differ"
done
h=$(metric cache_hit_bytes_total)
[ "${h:-0}" -gt 0 ] || bad "small fs: nothing was ever served from the cache"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
[ "$(cache_inspect verify --cache-dir "$cdir" >/dev/null 2>&1; echo $?)" = 0 ] || bad "small fs: verify fails afterwards"
umount "$lfs" || bad "cannot unmount the loop filesystem"
[ $fail = 0 ] || tail -n 20 "$GW_LOG" >&2
exit $fail
