#!/bin/bash
# A stat storm on one file asks a far origin once, not once per caller: with the attribute cache off (actimeo=0) and the origin 200 ms away, 32 processes that stat the same file at once make at most a few GETATTRs (before: about 32); every one of them gets the file's size as it is; a change at the origin is seen by the next storm; a caller killed while waiting on a shared GETATTR ends at once.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

RTT=200
FAR_NFS_PORT=${CACHEGW_FAR_NFS_PORT:-$((REEXPORT_NFS_PORT + 20))}
FAR_MNT_PORT=${CACHEGW_FAR_MNT_PORT:-$((REEXPORT_MNT_PORT + 20))}
data=$(harness_tmpdir origin-data)
echo "twelve bytes" >"$data/hot"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
latproxy_start origin "$RTT" "$FAR_NFS_PORT" "$FAR_MNT_PORT" || { echo "FAIL: the proxy did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_FAR_URL" "$mnt" "cache_dir=$cdir,actimeo=0" || exit 1
st() { cache_inspect stats --cache-dir "$cdir" | awk -v n="$1" '$1 == n { print $2; exit }'; }
out=$(harness_tmpdir out)

storm() { # WANT_SIZE: 32 stats at once, each must say WANT_SIZE
	local i bad_n=0 pids=()
	for i in $(seq 1 32); do
		stat -c %s "$mnt/hot" >"$out/$i" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"	# not a bare wait: the harness's processes are children too
	for i in $(seq 1 32); do
		[ "$(cat "$out/$i")" = "$1" ] || bad_n=$((bad_n + 1))
	done
	[ $bad_n = 0 ] || bad "$bad_n of 32 stats did not say $1 (e.g. '$(cat "$out/1")')"
}

stat "$mnt/hot" >/dev/null
g0=$(st origin_getattr_calls_total)
storm 13
g1=$(st origin_getattr_calls_total)
echo "  32 stats at once: $((g1 - g0)) GETATTRs, $(st getattr_joined_total) joined one in flight" >&2
[ $((g1 - g0)) -le 8 ] || bad "32 stats at once made $((g1 - g0)) GETATTRs"
[ "$(st getattr_joined_total)" -ge 20 ] || bad "getattr_joined_total $(st getattr_joined_total)"

# A change at the origin: the next storm sees it.
echo "now twenty-five bytes" >"$data/hot"
storm 22

# A caller killed while it waits on a shared GETATTR ends at once.
stat "$mnt/hot" >/dev/null &
lead=$!
sleep 0.05
timeout -s KILL 0.5 stat "$mnt/hot" >/dev/null 2>&1 &
victim=$!
t0=$(date +%s%N)
wait "$victim"
t=$((($(date +%s%N) - t0) / 1000000))
wait "$lead"
[ $t -lt 3000 ] || bad "a killed stat took $t ms to end"
exit $fail
