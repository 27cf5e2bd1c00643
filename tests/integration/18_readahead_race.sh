#!/bin/bash
# A block the cache gets while a readahead looks for what to fetch is not fetched as an empty range: the readahead found the block absent, a fill made it present before its second look, and it started a fetch of 0 bytes, which no READ ever completes; the next write to the file waited for that fetch for ever (WRITE in gw_inode_drop_fetch), and the writer, its readers and the test hung unkillably (35_concurrency under TSan and ASan, about 1 run in 20 on a loaded machine). CACHEGW_INJECT_READAHEAD_HOLD holds the readahead between its two looks, so the window is opened on purpose.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

BS=65536	# the cache's block size (the default)
data=$(harness_tmpdir origin-data)
rel=$(harness_tmpdir release)/go
head -c $((16 * BS)) /dev/urandom >"$data/f"
test_origin "$data"
CACHEGW_INJECT_READAHEAD_HOLD=0:1 CACHEGW_INJECT_RELEASE=$rel test_mount
gw_check
if ! grep -q 'fault injection: CACHEGW_INJECT_READAHEAD_HOLD' "$GW_LOG"; then
	echo "SKIP: the gateway was built without fault injection" >&2
	exit 77
fi

# done_within SECS PID: true once PID has exited (it is a child of ours).
# A FUSE request the gateway never answers leaves its caller in D state,
# deaf even to SIGKILL, so nothing here waits on one without a bound.
done_within() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		kill -0 "$2" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# 1. Reader A: two O_DIRECT reads of one block each; the second is
#    sequential, so its readahead looks at block 2, finds it absent, and
#    is held there (its read is answered after the hold).
dd if="$mnt/f" of=/dev/null bs=$BS count=2 iflag=direct status=none &
pa=$!
log_wait "$GW_LOG" "readahead held between its cache scans at $((2 * BS))" 1 ||
	bad "the readahead was not held at block 2: $(grep 'readahead held' "$GW_LOG")"

# 2. Meanwhile reader B reads block 2 itself: fetched, filled into the
#    cache. A write elsewhere in the file then drops the fetches the inode
#    keeps, so nothing but the cache holds block 2 when A looks again.
timeout 20 dd if="$mnt/f" of=/dev/null bs=$BS skip=2 count=1 iflag=direct status=none ||
	bad "reader B failed"
head -c 4096 /dev/urandom >"$HARNESS_TMP/patch"
timeout 20 dd if="$HARNESS_TMP/patch" of="$mnt/f" bs=4096 seek=$((14 * BS / 4096)) conv=notrunc status=none ||
	bad "the first write failed"
# The fills' cache writes complete (blocks 0-2 present; B's readahead
# fills more).
gw_wait_metric "$cdir" cache_fill_bytes_total $((3 * BS)) ||
	echo "  (fills: $(gw_metric "$cdir" cache_fill_bytes_total) bytes)" >&2
sleep 0.3

# 3. A looks again and goes on; its read is answered.
touch "$rel"
done_within 20 "$pa" || bad "reader A's read was not answered"
wait "$pa" || bad "reader A failed"

# 4. The next write waits only for fetches that end: before the fix it
#    waited for the empty one for ever.
timeout 20 dd if="$HARNESS_TMP/patch" of="$mnt/f" bs=4096 seek=$((15 * BS / 4096)) conv=notrunc status=none &
pw=$!
if done_within 20 "$pw"; then
	wait "$pw" || bad "the second write failed"
else
	bad "the second write hung (a fetch that never ends?); gateway threads:"
	timeout 60 gdb -p "$GW_PID" -batch -nx -ex 'thread apply all bt 10' 2>/dev/null |
		grep -E "gw_inode_drop_fetch|gw_write " | cut -c1-160 | head -n 4 >&2
fi
if [ "$fail" = 0 ]; then
	# The bytes: the origin's file with both patches, through the mount.
	cmp -s "$data/f" <(timeout 20 cat "$mnt/f") || bad "the mount's bytes differ from the origin's"
	cmp -s -n 4096 -i $((14 * BS)):0 "$data/f" "$HARNESS_TMP/patch" ||
		bad "the first write is not at the origin"
	unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
fi
exit $fail
