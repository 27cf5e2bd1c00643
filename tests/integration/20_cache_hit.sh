#!/bin/bash
# Second read is served from the disk cache (same mount after drop_caches, and after a remount on the same cache_dir): exact bytes, origin_read_bytes does not move, hit bytes do; the read's data buffers are unmapped once idle; cache dir 0700, files 0600.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

SIZE=$((24 * 1048576 + 4321))	# not a multiple of the block size
data=$(harness_tmpdir origin-data)
head -c "$SIZE" /dev/urandom >"$data/a.bin"
head -c $((8 * 1048576)) /dev/urandom >"$data/b.bin"
want_a=$(sha256sum <"$data/a.bin" | cut -d' ' -f1)
want_b=$(sha256sum <"$data/b.bin" | cut -d' ' -f1)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)/c	# created by the gateway

msum() { timeout 60 sha256sum <"$mnt/$1" | cut -d' ' -f1; }

# ---- 1. One mount: cold read, then (page cache dropped) a read from cache.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
[ "$(msum a.bin)" = "$want_a" ] || bad "cold read of a.bin: bytes differ from the origin's"
o1=$(gw_metric "$cdir" origin_read_bytes_total)
[ -n "$o1" ] || { bad "no counters from cachegw-inspect stats"; o1=0; }
[ "$o1" -ge "$SIZE" ] || bad "cold read: origin_read_bytes_total $o1 < file size $SIZE"
# Concurrent and adjacent misses share fetches: each block comes from the
# origin about once (1/8 slack for reads straddling two fetches).
[ "$o1" -le $((SIZE + SIZE / 8)) ] || bad "cold read: origin_read_bytes_total $o1 for a $SIZE-byte file: blocks fetched more than once"
# Fills are asynchronous: wait until the whole file is written.
gw_wait_metric "$cdir" cache_fill_bytes_total "$SIZE" 20 ||
	bad "cache_fill_bytes_total $(gw_metric "$cdir" cache_fill_bytes_total) < $SIZE 20 s after the read"
h1=$(gw_metric "$cdir" cache_hit_bytes_total)
drop_caches
[ "$(msum a.bin)" = "$want_a" ] || bad "warm read (same mount): bytes differ"
o2=$(gw_metric "$cdir" origin_read_bytes_total)
h2=$(gw_metric "$cdir" cache_hit_bytes_total)
[ "$o2" = "$o1" ] || bad "warm read (same mount): origin_read_bytes_total moved $o1 -> $o2"
[ $((h2 - h1)) -ge "$SIZE" ] || bad "warm read (same mount): cache_hit_bytes_total moved by $((h2 - h1)), want >= $SIZE"
# b.bin only cold here; its warm read comes after the remount.
[ "$(msum b.bin)" = "$want_b" ] || bad "cold read of b.bin: bytes differ"
# The data buffers the reads used are recycled while busy and unmapped
# once the gateway has been idle for a housekeeping tick (5 s).
db=$(gw_metric "$cdir" data_buffer_bytes)
[ "${db:-0}" -gt 0 ] || bad "data_buffer_bytes ${db:-none} right after the reads, want > 0"
for ((i = 0; i < 30; i++)); do
	db=$(gw_metric "$cdir" data_buffer_bytes)
	[ "$db" = 0 ] && break
	sleep 1
done
[ "$db" = 0 ] || bad "data_buffer_bytes $db after 30 idle s, want 0 (recycled buffers not unmapped)"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
log1=$GW_LOG

# ---- 2. Permissions of what the cache wrote (gateway stopped).
m=$(stat -c %a "$cdir")
[ "$m" = 700 ] || bad "cache dir mode $m, want 700"
d=$(find "$cdir" -mindepth 1 -type d ! -perm 0700 -printf '%m %P\n')
[ -z "$d" ] || bad "cache subdirectories not 0700: $(echo "$d" | head -5 | tr '\n' ' ')"
f=$(find "$cdir" -mindepth 1 ! -type d ! -perm 0600 -printf '%m %y %P\n')
[ -z "$f" ] || bad "cache files not 0600: $(echo "$f" | head -5 | tr '\n' ' ')"
n=$(find "$cdir/objects" -type f | wc -l)
[ "$n" -ge 4 ] || bad "objects/ holds $n files, want data + meta for 2 objects"

# ---- 3. Remount on the same cache_dir: both files from the cache only.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
drop_caches
[ "$(msum a.bin)" = "$want_a" ] || bad "read after remount: a.bin bytes differ"
[ "$(msum b.bin)" = "$want_b" ] || bad "read after remount: b.bin bytes differ"
o3=$(gw_metric "$cdir" origin_read_bytes_total)
h3=$(gw_metric "$cdir" cache_hit_bytes_total)
[ "$o3" = 0 ] || bad "after remount: origin_read_bytes_total $o3, want 0"
[ "${h3:-0}" -ge $((SIZE + 8 * 1048576)) ] || bad "after remount: cache_hit_bytes_total $h3 < $((SIZE + 8 * 1048576))"
c3=$(gw_metric "$cdir" cache_corrupt_blocks_total)
[ "$c3" = 0 ] || bad "after remount: cache_corrupt_blocks_total $c3"
# The control socket is 0600.
m=$(stat -c %a "$cdir/control.sock" 2>/dev/null)
[ "$m" = 600 ] || bad "control.sock mode '$m', want 600"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
if [ $fail != 0 ]; then
	echo "--- gateway logs:" >&2
	tail -n 20 "$log1" "$GW_LOG" >&2
fi
exit $fail
