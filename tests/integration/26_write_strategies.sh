#!/bin/bash
# Each cache_write mode (direct, dontcache, buffered, fadvise): a 16 MiB file read cold, remount, drop caches, read warm: exact bytes, hit bytes >= file size, no origin READ; verify clean; direct leaves the cache's data out of the page cache.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

SIZE=$((16 * 1048576 + 3333))
data=$(harness_tmpdir origin-data)
head -c "$SIZE" /dev/urandom >"$data/f.bin"
want=$(sha256sum <"$data/f.bin" | cut -d' ' -f1)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)

msum() { timeout 60 sha256sum <"$mnt/f.bin" | cut -d' ' -f1; }
# Page-cache bytes of the cache's data files (not .meta).
resident() {
	command -v fincore >/dev/null 2>&1 || { echo -; return; }
	find "$1/objects" -type f ! -name '*.meta' -print0 |
		xargs -0r fincore -b -n -o RES 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}

for mode in direct dontcache buffered fadvise; do
	cdir=$(harness_tmpdir "cache-$mode")
	opts="cache_dir=$cdir,cache_write=$mode"
	mount_gateway "$ORIGIN_URL" "$mnt" "$opts" || { bad "$mode: mount failed"; continue; }
	[ "$(msum)" = "$want" ] || bad "$mode: cold read differs"
	gw_wait_metric "$cdir" cache_fill_bytes_total "$SIZE" 20 ||
		bad "$mode: cache_fill_bytes_total $(gw_metric "$cdir" cache_fill_bytes_total) < $SIZE 20 s after the read"
	res=$(resident "$cdir")
	unmount_gateway "$mnt" || bad "$mode: unmount (log: $GW_LOG)"
	fallback=$(grep -Ei 'refused|using buffered' "$GW_LOG" | head -n 1)
	echo "$mode: data files resident in the page cache after the fill: $res bytes${fallback:+ (gateway: $fallback)}" >&2
	if [ "$mode" = direct ] && [ -z "$fallback" ] && [ "$res" != - ] && [ "$res" -gt $((SIZE / 10)) ]; then
		bad "direct: $res bytes of the cache's data files are in the page cache (O_DIRECT fills should leave ~0)"
	fi
	out=$(cache_inspect verify --cache-dir "$cdir" 2>&1) || bad "$mode: verify after the fill fails: $out"

	mount_gateway "$ORIGIN_URL" "$mnt" "$opts" || { bad "$mode: remount failed"; continue; }
	drop_caches
	[ "$(msum)" = "$want" ] || bad "$mode: warm read differs"
	h=$(gw_metric "$cdir" cache_hit_bytes_total)
	o=$(gw_metric "$cdir" origin_read_bytes_total)
	c=$(gw_metric "$cdir" cache_corrupt_blocks_total)
	# Every byte came from the cache (no origin READ, checked below). The
	# kernel may ask for a few pages twice (readahead pages dropped and read
	# again), so the hit count is at least the size, not exactly it.
	if [ -z "$h" ] || [ "$h" -lt "$SIZE" ]; then
		bad "$mode: warm read: cache_hit_bytes_total ${h:-none}, want >= $SIZE"
	elif [ "$h" -gt "$SIZE" ]; then
		echo "$mode: the kernel asked for $((h - SIZE)) bytes twice during the warm read" >&2
	fi
	[ "$o" = 0 ] || bad "$mode: warm read: origin_read_bytes_total ${o:-none}, want 0"
	[ "$c" = 0 ] || bad "$mode: warm read: cache_corrupt_blocks_total ${c:-none}"
	unmount_gateway "$mnt" || bad "$mode: unmount (log: $GW_LOG)"
done
exit $fail
