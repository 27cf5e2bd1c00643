#!/bin/bash
# A sparse 1 GiB origin file (a few MiB of data at a few offsets) read whole through the mount: exact bytes, the cache grows by well under 1 % of the file (its zero blocks are holes, not data), and a second read comes from the cache alone; in the default (direct) and the buffered write mode.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

GiB=$((1024 * 1048576))
data=$(harness_tmpdir origin-data)
f=$data/sparse.bin
truncate -s $GiB "$f"
# 4.5 MiB of random data: at the start, in the middle (not block-aligned),
# and just before the end.
put() { head -c "$2" /dev/urandom | dd of="$f" bs=4096 seek="$1" oflag=seek_bytes conv=notrunc status=none; }
put 0 1048576
put $((300 * 1048576 + 12345)) $((2 * 1048576))
put $((700 * 1048576)) 1048576
put $((GiB - 524288 - 100)) 524288
real=$(( $(stat -c %b "$f") * 512 ))
hlog "origin file: $GiB bytes, $real allocated"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)

for mode in direct buffered; do
	cdir=$(harness_tmpdir "cache-$mode")/c
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,cache_write=$mode" || exit 1
	timeout 30 sync
	before=$(du -s -B1 "$cdir" | cut -f1)
	timeout 120 cmp "$mnt/sparse.bin" "$f" || bad "$mode: cold read differs from the origin"
	# Fills are asynchronous; fill bytes count the holes too.
	gw_wait_metric "$cdir" cache_fill_bytes_total $GiB 60 ||
		bad "$mode: cache_fill_bytes_total $(gw_metric "$cdir" cache_fill_bytes_total) < $GiB 60 s after the read"
	timeout 30 sync
	after=$(du -s -B1 "$cdir" | cut -f1)
	grown=$((after - before))
	used=$(gw_metric "$cdir" cache_used_bytes)
	hlog "$mode: cache dir grew by $grown bytes (limit $((GiB / 100))); cache_used_bytes $used"
	[ "$grown" -lt $((GiB / 100)) ] || bad "$mode: cache dir grew by $grown bytes for $real bytes of data at the origin (want < $((GiB / 100)): zeros were stored)"
	[ -n "$used" ] && [ "$used" -lt $((GiB / 100)) ] || bad "$mode: cache_used_bytes '$used', want < $((GiB / 100))"
	o1=$(gw_metric "$cdir" origin_read_bytes_total)
	h1=$(gw_metric "$cdir" cache_hit_bytes_total)
	drop_caches
	timeout 120 cmp "$mnt/sparse.bin" "$f" || bad "$mode: warm read differs from the origin"
	o2=$(gw_metric "$cdir" origin_read_bytes_total)
	h2=$(gw_metric "$cdir" cache_hit_bytes_total)
	[ "$o2" = "$o1" ] || bad "$mode: warm read: origin_read_bytes_total moved $o1 -> $o2"
	[ $((h2 - h1)) -ge $GiB ] || bad "$mode: warm read: cache_hit_bytes_total moved by $((h2 - h1)), want >= $GiB"
	c=$(gw_metric "$cdir" cache_corrupt_blocks_total)
	[ "$c" = 0 ] || bad "$mode: cache_corrupt_blocks_total $c"
	unmount_gateway "$mnt" || bad "$mode: unmount / gateway exit (log: $GW_LOG)"
	# Offline: every block present and verified.
	v=$(cache_inspect verify --cache-dir "$cdir" 2>&1) || bad "$mode: cachegw-inspect verify: $v"
	[ $fail = 0 ] || tail -n 20 "$GW_LOG" >&2
done
exit $fail
