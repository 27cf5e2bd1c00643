#!/bin/bash
# Huge sparse files through the mount (origin on tmpfs, which takes them): truncate to 1 PiB and 8 PiB, a read near the end (zeros), truncate to 0; and to 512 GiB (under the cache's 1 TiB object limit: cached) with data written near its end, read back, truncate to 0: each call returns within 60 s, the bytes are the origin's, and the gateway's peak RSS grows by less than 256 MiB (before: 37 s and +2 GiB for 1 PiB, the presence bitmap sized by the apparent size); afterwards an ordinary file still caches (a warm read takes no READ).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
trap 'cleanup_tmpfs' EXIT

tmpfs=
cleanup_tmpfs() {
	local rc=$?
	if [ -n "$tmpfs" ]; then
		[ -n "${mnt:-}" ] && _harness_unmount "$mnt"
		origin_stop origin
		umount "$tmpfs" 2>/dev/null || umount -l "$tmpfs"
	fi
	(exit $rc)
	harness_cleanup
}
tmpfs=$(harness_tmpdir origin-tmpfs)
mount -t tmpfs -o size=64m,mode=0755 cgwtest "$tmpfs" || { echo "SKIP: cannot mount a tmpfs" >&2; tmpfs=; exit 77; }
head -c 200000 /dev/urandom >"$tmpfs/plain.bin"
: >"$tmpfs/huge"
test_origin "$tmpfs"
test_mount -n

hwm() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$GW_PID/status"; }
h0=$(hwm)
# timed NAME CMD...: CMD succeeds within 60 s.
timed() {
	local name=$1 t0=$SECONDS
	shift
	timeout 60 "$@" || { bad "$name: failed or took over 60 s (status $?)"; return 1; }
	echo "  $name: $((SECONDS - t0)) s" >&2
}
# read_at SIZE-OFFSET: 4 KiB at OFFSET bytes before the end, as hex words
read_near_end() { # FILE SIZE
	timeout 60 python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_RDONLY)
b = os.pread(fd, 4096, int(sys.argv[2]) - 8192)
print(len(b), b.count(0))' "$1" "$2"
}
for p in 50 53; do
	size=$((1 << p))
	timed "truncate -s 2^$p" truncate -s "$size" "$mnt/huge"
	[ "$(stat -c %s "$mnt/huge")" = "$size" ] || bad "size after truncate -s 2^$p: $(stat -c %s "$mnt/huge")"
	got=$(read_near_end "$mnt/huge" "$size")
	[ "$got" = "4096 4096" ] || bad "4 KiB read near the end of 2^$p: '$got', want '4096 4096' (zeros)"
	timed "truncate -s 0 from 2^$p" truncate -s 0 "$mnt/huge"
	[ "$(stat -c %s "$tmpfs/huge")" = 0 ] || bad "the origin's size after truncate -s 0: $(stat -c %s "$tmpfs/huge")"
done
# Under the object limit: 512 GiB, data near the end, cached.
size=$((1 << 39))
timed "truncate -s 2^39" truncate -s "$size" "$mnt/huge"
head -c 4096 /dev/urandom >"$HARNESS_TMP/tail"
timed "write near the end of 2^39" dd if="$HARNESS_TMP/tail" of="$mnt/huge" bs=4096 seek=$((size / 4096 - 2)) conv=notrunc,fsync status=none
cmp -s "$HARNESS_TMP/tail" <(dd if="$mnt/huge" bs=4096 skip=$((size / 4096 - 2)) count=1 status=none) ||
	bad "the 4 KiB written near the end of 2^39 read back differently through the mount"
cmp -s "$HARNESS_TMP/tail" <(dd if="$tmpfs/huge" bs=4096 skip=$((size / 4096 - 2)) count=1 status=none) ||
	bad "the 4 KiB written near the end of 2^39 differ at the origin"
timed "truncate -s 0 from 2^39" truncate -s 0 "$mnt/huge"
h1=$(hwm)
grow=$(( (h1 - h0) / 1024 ))
echo "  gateway VmHWM $((h0 / 1024)) -> $((h1 / 1024)) MiB (+$grow)" >&2
[ "$grow" -lt 256 ] || bad "the gateway's peak RSS grew by $grow MiB, want < 256"

# An ordinary file still caches.
cmp -s "$tmpfs/plain.bin" "$mnt/plain.bin" || bad "plain.bin: bytes differ (cold)"
gw_wait_metric "$cdir" cache_fill_bytes_total 200000 20 || bad "plain.bin was not filled into the cache"
r0=$(cache_inspect stats --cache-dir "$cdir" | awk '$1 == "origin_read_calls_total" { print $2 }')
echo 3 >/proc/sys/vm/drop_caches
cmp -s "$tmpfs/plain.bin" "$mnt/plain.bin" || bad "plain.bin: bytes differ (warm)"
r1=$(cache_inspect stats --cache-dir "$cdir" | awk '$1 == "origin_read_calls_total" { print $2 }')
[ "$r0" = "$r1" ] || bad "a warm read of plain.bin made $((r1 - r0)) origin READs, want 0"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
