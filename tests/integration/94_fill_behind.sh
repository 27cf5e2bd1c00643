#!/bin/bash
# fill_behind=: a cache disk slower than the origin (CACHEGW_INJECT_CACHE_SLOW holds each cache write's completion 100 ms). With fill_behind=skip a cold read of 128 MiB is not held to the disk: fills the disk cannot take are dropped and counted (cache_fills_behind_bytes_total, fill_queue_skipped_bytes_total), the bytes read are the origin's, and a second read fetches what was not cached from the origin again (READ bytes moved), bytes equal. With the default (wait) nothing is dropped: after the read every byte is cached.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

SIZE=$((128 * 1048576))
test_origin_random big "$SIZE"
mnt=$(harness_tmpdir mnt)
m() { gw_metric "$1" "$2"; }
export CACHEGW_INJECT_CACHE_SLOW=100

# skip
c1=$(harness_tmpdir cache)/c
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$c1,fill_behind=skip" || exit 1
cmp -s "$data/big" "$mnt/big" || bad "skip: the cold read's bytes differ from the origin's"
behind=$(( $(m "$c1" cache_fills_behind_bytes_total) + $(m "$c1" fill_queue_skipped_bytes_total) ))
filled=$(m "$c1" cache_fill_bytes_total)
echo "  skip: $behind bytes not cached (disk behind), $filled cached" >&2
[ "$behind" -gt 0 ] || bad "skip: nothing was dropped although the cache disk was behind"
r0=$(m "$c1" origin_read_bytes_total)
drop_caches
cmp -s "$data/big" "$mnt/big" || bad "skip: the second read's bytes differ"
r1=$(m "$c1" origin_read_bytes_total)
echo "  skip: the second read fetched $((r1 - r0)) bytes from the origin" >&2
[ $((r1 - r0)) -gt 0 ] || bad "skip: the second read fetched nothing from the origin although $behind bytes were not cached"
unmount_gateway "$mnt" || bad "skip: unmount / gateway exit (log: $GW_LOG)"

# wait (the default)
c2=$(harness_tmpdir cache)/c
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$c2" || exit 1
cmp -s "$data/big" "$mnt/big" || bad "wait: the cold read's bytes differ"
gw_wait_metric "$c2" cache_fill_bytes_total "$SIZE" 120 || bad "wait: not every byte read was cached ($(m "$c2" cache_fill_bytes_total) of $SIZE)"
behind=$(( $(m "$c2" cache_fills_behind_bytes_total) + $(m "$c2" fill_queue_skipped_bytes_total) ))
[ "$behind" = 0 ] || bad "wait: $behind bytes dropped"
unmount_gateway "$mnt" || bad "wait: unmount / gateway exit (log: $GW_LOG)"
exit $fail
