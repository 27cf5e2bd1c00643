#!/bin/bash
# A far origin (cachegw-latproxy, 20 ms round trip, in front of ganesha): the proxy refuses bad arguments (exit 2), the gateway through it serves the origin's bytes (a tree and a 24 MiB file), every origin call it counts took at least the round trip (the mean time of every procedure called >= 20 ms, so the proxy delays and the counters see it), a warm re-read makes no READ, and killing the proxy mid-run leaves no process behind.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

RTT=20
FAR_NFS_PORT=${CACHEGW_FAR_NFS_PORT:-$((REEXPORT_NFS_PORT + 20))}
FAR_MNT_PORT=${CACHEGW_FAR_MNT_PORT:-$((REEXPORT_MNT_PORT + 20))}

proxy=${CACHEGW_LATPROXY:-$(dirname "$CACHEGW")/../tools/bench/cachegw-latproxy}
for args in "" "--rtt" "--rtt -1 1:2" "--rtt 20" "--rtt 20 1" "--rtt 20 70000:1" "--rtt x 1:2"; do
	# shellcheck disable=SC2086
	timeout 10 "$proxy" $args >/dev/null 2>&1 </dev/null
	rc=$?
	[ $rc = 2 ] || bad "cachegw-latproxy $args: exit $rc, want 2"
done

data=$(harness_tmpdir origin-data)
FILL_MANY_COUNT=60
fill_tree "$data" || { echo "FAIL: fill_tree" >&2; exit 1; }
SIZE=$((24 * 1048576 + 99))
head -c "$SIZE" /dev/urandom >"$data/far.bin"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { echo "FAIL: the origin did not start" >&2; exit 1; }
latproxy_start origin "$RTT" "$FAR_NFS_PORT" "$FAR_MNT_PORT" || { echo "FAIL: the proxy did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)/c
mount_gateway "$ORIGIN_FAR_URL" "$mnt" "cache_dir=$cdir" || { echo "FAIL: mount through the proxy" >&2; exit 1; }

diff -r --no-dereference "$data" "$mnt" >"$HARNESS_TMP/diff" 2>&1 || bad "the tree through the far origin differs from the origin's: $(head -n 3 "$HARNESS_TMP/diff")"
cmp -s "$data/far.bin" "$mnt/far.bin" || bad "far.bin: bytes differ (cold)"
st() { awk -v n="$1" '$1 == n { print $2; exit }' "$2"; }
gw_wait_metric "$cdir" cache_fill_bytes_total "$SIZE" 60 || bad "fills did not complete"
cache_inspect stats --cache-dir "$cdir" >"$HARNESS_TMP/s1" || bad "stats failed"
for p in read readdirplus; do
	[ "$(st "origin_${p}_calls_total" "$HARNESS_TMP/s1")" -gt 0 ] || bad "no $p calls counted"
done
# Every procedure called at all: its mean time is at least the round trip.
for p in $(awk '$1 ~ /^origin_[a-z]+_calls_total$/ && $2 > 0 { sub(/^origin_/, "", $1); sub(/_calls_total$/, "", $1); print $1 }' "$HARNESS_TMP/s1"); do
	c=$(st "origin_${p}_calls_total" "$HARNESS_TMP/s1")
	us=$(st "origin_${p}_microseconds_total" "$HARNESS_TMP/s1")
	[ "$((us / c))" -ge $((RTT * 1000)) ] ||
		bad "mean $p time $((us / c)) us over $c calls, want >= ${RTT} ms (the proxy's round trip)"
	echo "  $p: $c calls, mean $((us / c)) us"
done
r1=$(st origin_read_calls_total "$HARNESS_TMP/s1")
cmp -s "$data/far.bin" "$mnt/far.bin" || bad "far.bin: bytes differ (warm)"
cache_inspect stats --cache-dir "$cdir" >"$HARNESS_TMP/s2" || bad "stats failed"
r2=$(st origin_read_calls_total "$HARNESS_TMP/s2")
[ "$r1" = "$r2" ] || bad "a warm re-read made $((r2 - r1)) READs, want 0"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
pid_stop "$ORIGIN_FAR_PID" 5
pid_alive "$ORIGIN_FAR_PID" && bad "the proxy did not stop on SIGTERM"
exit $fail
