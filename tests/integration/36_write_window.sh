#!/bin/bash
# A tiny write window (write_window=64k): a 32 MiB dd bs=1M and 4 concurrent 16 MiB writers all complete with exact bytes at the origin; writers did wait for the window (cachegw_write_window_waits_total > 0) and nothing is left in flight.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

INSPECT=$(dirname "$CACHEGW")/../tools/inspect/cachegw-inspect
[ -x "$INSPECT" ] || { echo "SKIP: $INSPECT not built" >&2; exit 77; }
metric() { # CACHE_DIR NAME
	timeout 10 "$INSPECT" stats --cache-dir "$1" --prometheus |
		awk -v n="cachegw_$2" '$1 == n { print $2; f = 1 } END { if (!f) print "NA" }'
}

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
test_origin "$data"
test_mount write_window=64k

head -c $((32 << 20)) /dev/urandom >"$work/big"
for i in 1 2 3 4; do head -c $((16 << 20)) /dev/urandom >"$work/w$i"; done
w0=$(metric "$cdir" origin_write_bytes_total)

# 1. One writer, 1 MiB writes (each bigger than the window).
timeout 50 dd if="$work/big" of="$mnt/big" bs=1M conv=fsync status=none || bad "dd of 32 MiB exited $?"
cmp -s "$work/big" "$data/big" || bad "32 MiB file at the origin differs ($(cmp "$work/big" "$data/big" 2>&1 | head -c 200))"

# 2. Four writers at once (1 MiB and 64 KiB+1 writes), competing for it.
pids=()
for i in 1 2 3 4; do
	bs=1M
	[ $((i % 2)) = 0 ] && bs=65537
	timeout 50 dd if="$work/w$i" of="$mnt/w$i" bs=$bs conv=fsync status=none &
	pids+=($!)
done
for i in 1 2 3 4; do
	wait "${pids[i - 1]}" || bad "concurrent writer $i exited non-zero"
done
for i in 1 2 3 4; do
	cmp -s "$work/w$i" "$data/w$i" || bad "w$i at the origin differs ($(cmp "$work/w$i" "$data/w$i" 2>&1 | head -c 200))"
	cmp -s "$work/w$i" "$mnt/w$i" || bad "w$i through the mount differs"
done

waits=$(metric "$cdir" write_window_waits_total)
inflight=$(metric "$cdir" write_window_bytes)
w1=$(metric "$cdir" origin_write_bytes_total)
echo "  write_window_waits_total=$waits write_window_bytes=$inflight origin_write_bytes=$((w1 - w0))" >&2
[ "$waits" != NA ] && [ "$waits" -gt 0 ] || bad "cachegw_write_window_waits_total is $waits, want > 0"
[ "$inflight" = 0 ] || bad "cachegw_write_window_bytes is $inflight after all writers finished, want 0"
[ $((w1 - w0)) -ge $((96 << 20)) ] || bad "origin accepted $((w1 - w0)) bytes of WRITE, want >= 96 MiB"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
