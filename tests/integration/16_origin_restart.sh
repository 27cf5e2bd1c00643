#!/bin/bash
# The origin restarts under a hard mount: a read of an uncached file waits (the gateway trying the origin now and then, not spinning: its CPU ticks counted), then completes with the right bytes once the origin is back; a soft mount fails such a read with an error instead of hanging, and serves again afterwards.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
fill_tree "$data" || exit 1
cp "$data/$FILL_BIG" "$data/second.bin"
cp "$data/$FILL_BIG" "$data/third.bin"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
work=$(harness_tmpdir work)
want=$(sha256sum <"$data/$FILL_BIG" | cut -d' ' -f1)

# ---- hard (the default)
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,timeo=20" || exit 1
[ "$(sha256sum <"$mnt/one_byte" | cut -d' ' -f1)" = "$(sha256sum <"$data/one_byte" | cut -d' ' -f1)" ] ||
	bad "hard: first read differs"
origin_stop origin
( timeout 120 sha256sum <"$mnt/second.bin" | cut -d' ' -f1 >"$work/hard.sum" ) &
reader=$!
sleep 1
# Waiting is not working: a gateway whose origin refuses connections
# tries again now and then, it does not spin (top would show it). CPU
# ticks (1/100 s) of the gateway over 3 s of waiting.
cpu() { awk '{ print $14 + $15 }' "/proc/$GW_PID/stat"; }
t0=$(cpu)
sleep 3
t1=$(cpu)
echo "  hard, origin down: the gateway used $((t1 - t0)) CPU ticks in 3 s" >&2
[ $((t1 - t0)) -le 30 ] || bad "hard: the gateway used $((t1 - t0))/100 s of CPU in 3 s while its origin was down (spinning)"
kill -0 "$reader" 2>/dev/null || bad "hard: the read ended while the origin was down (it must wait)"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
wait "$reader" || bad "hard: the read failed after the origin came back"
[ "$(cat "$work/hard.sum")" = "$want" ] || bad "hard: bytes after the restart differ from the origin's"
unmount_gateway "$mnt" || bad "hard: unmount / gateway exit (log: $GW_LOG)"

# ---- soft
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,soft,timeo=10,retrans=1" || exit 1
ls "$mnt" >/dev/null || bad "soft: listing failed"
origin_stop origin
start=$(date +%s)
if timeout 60 cat "$mnt/third.bin" >/dev/null 2>"$work/soft.err"; then
	bad "soft: a read of an uncached file succeeded with the origin down"
fi
took=$(($(date +%s) - start))
[ "$took" -lt 60 ] || bad "soft: the failing read took ${took}s (hung?)"
echo "  soft: failed after ${took}s: $(head -n 1 "$work/soft.err")" >&2
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
got=""
for _ in $(seq 30); do
	got=$(timeout 60 sha256sum <"$mnt/third.bin" 2>/dev/null | cut -d' ' -f1)
	[ "$got" = "$want" ] && break
	sleep 1
done
[ "$got" = "$want" ] || bad "soft: reads do not recover after the origin came back"
unmount_gateway "$mnt" || bad "soft: unmount / gateway exit (log: $GW_LOG)"
exit $fail
