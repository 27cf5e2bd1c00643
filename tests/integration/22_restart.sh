#!/bin/bash
# Restart reuse: a remount on the same cache_dir serves a whole tree without origin READs; SIGKILL mid-fill then remount serves exact bytes and reuses complete blocks (verify clean); a second gateway on a held cache_dir refuses with "in use".
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

data=$(harness_tmpdir origin-data)
fill_tree "$data/tree" || { echo "fill_tree failed" >&2; exit 1; }
KILL_SIZE=$((64 * 1048576))
head -c "$KILL_SIZE" /dev/urandom >"$data/kill.bin"
want_kill=$(sha256sum <"$data/kill.bin" | cut -d' ' -f1)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
mnt2=$(harness_tmpdir mnt2)
work=$(harness_tmpdir work)
cdir=$(harness_tmpdir cache)
LOGS=()
mount_gw() { mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1; LOGS+=("$GW_LOG"); }

# ---- 1. Restart reuse of a tree.
want=$(tree_manifest "$data/tree")
tree_bytes=$(find "$data/tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
mount_gw
got=$(harness_timeout 120 tree_manifest "$mnt/tree")
[ "$want" = "$got" ] || bad "first mount: manifest differs from the origin's"
gw_wait_metric "$cdir" cache_fill_bytes_total "$tree_bytes" 20 ||
	bad "fills incomplete: cache_fill_bytes_total $(gw_metric "$cdir" cache_fill_bytes_total) < $tree_bytes"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

mount_gw
drop_caches
got=$(harness_timeout 120 tree_manifest "$mnt/tree")
if [ "$want" != "$got" ]; then
	bad "after remount: manifest differs from the origin's (< origin, > mount)"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -n 20 >&2
fi
o=$(gw_metric "$cdir" origin_read_bytes_total)
h=$(gw_metric "$cdir" cache_hit_bytes_total)
[ "$o" = 0 ] || bad "after remount: origin_read_bytes_total $o, want 0 (every file was cached)"
[ "${h:-0}" -ge $((tree_bytes - 3 * 1048576)) ] || bad "after remount: cache_hit_bytes_total ${h:-none} < $tree_bytes (minus the sparse file)"

# ---- 2. A second gateway on the held cache_dir refuses, mounts nothing.
harness_register_mount "$mnt2"
timeout 30 "$CACHEGW" "$ORIGIN_URL" "$mnt2" -f -o "cache_dir=$cdir" </dev/null >"$work/second.out" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || bad "second gateway (-f) on a held cache_dir exited $rc (124 = still running after 30 s)"
grep -q "in use" "$work/second.out" || bad "second gateway's message lacks 'in use': $(head -c 300 "$work/second.out")"
is_mounted "$mnt2" && { bad "second gateway mounted $mnt2"; fusermount3 -u "$mnt2"; }
# The same without -f (daemon mode: the parent reports the child's verdict).
timeout 30 "$CACHEGW" "$ORIGIN_URL" "$mnt2" -o "cache_dir=$cdir" </dev/null >"$work/second-bg.out" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || bad "second gateway (background) on a held cache_dir exited $rc"
grep -q "in use" "$work/second-bg.out" || bad "second gateway (background) message lacks 'in use': $(head -c 300 "$work/second-bg.out")"
is_mounted "$mnt2" && { bad "second gateway (background) mounted $mnt2"; fusermount3 -u "$mnt2"; }
# The first one still serves.
[ "$(timeout 20 cat "$mnt/tree/nested/l1/file1" 2>&1)" = level1 ] || bad "first gateway stopped serving after the refused second one"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# ---- 3. SIGKILL while a read (and its fills) runs.
mount_gw
killed_pid=$GW_PID
# A paced reader: 1 MiB at a time, so the kill lands mid-file.
(
	for ((i = 0; i < 64; i++)); do
		dd if="$mnt/kill.bin" bs=1M skip=$i count=1 status=none 2>/dev/null || exit 1
		sleep 0.03
	done
) >/dev/null &
reader=$!
harness_register_pid "$reader"
if ! gw_wait_metric "$cdir" origin_read_bytes_total $((16 * 1048576)) 30; then
	bad "the reader did not get 16 MiB through in 30 s"
fi
before_kill=$(gw_metric "$cdir" cache_fill_bytes_total)
kill -KILL "$killed_pid"
pid_wait_exit "$killed_pid" 10 || bad "gateway survived SIGKILL?"
wait "$killed_pid" 2>/dev/null
pid_stop "$reader" 5
# The dead mount: "Transport endpoint is not connected" until unmounted.
fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt"
is_mounted "$mnt" && bad "cannot unmount the dead gateway's mount"
echo "killed after ${before_kill:-?} fill bytes" >&2

# The killed cache verifies clean (blocks torn by the kill are absent, not bad).
out=$(cache_inspect verify --cache-dir "$cdir" 2>&1)
[ $? = 0 ] || bad "verify right after the SIGKILL fails: $out"
cached=$(cache_inspect ls --cache-dir "$cdir" | awk -v s="$KILL_SIZE" 'NR > 1 && $2 == s { print $3; exit }')
echo "after the kill: ${cached:-no} bytes of kill.bin in the cache" >&2
[ "${cached:-0}" -ge $((4 * 1048576)) ] || bad "after the kill: only ${cached:-0} bytes of kill.bin cached, though ${before_kill:-?} had been filled"
mount_gw
drop_caches
# Reuse: the reader went from offset 0, so the first MiB was filled long
# before the kill; reading it again is served by the cache (a byte fetched
# from the origin is served from the fetch's buffer, never counted a hit).
timeout 30 dd if="$mnt/kill.bin" bs=1M count=1 status=none | cmp -s - <(head -c 1048576 "$data/kill.bin") ||
	bad "after SIGKILL + remount: the first MiB of kill.bin differs"
h=$(gw_metric "$cdir" cache_hit_bytes_total)
[ "${h:-0}" -ge 1048576 ] || bad "after SIGKILL + remount: the first MiB was not served from the cache (hit bytes ${h:-none})"
got=$(timeout 60 sha256sum <"$mnt/kill.bin" | cut -d' ' -f1)
[ "$got" = "$want_kill" ] || bad "after SIGKILL + remount: kill.bin bytes differ"
h=$(gw_metric "$cdir" cache_hit_bytes_total)
o=$(gw_metric "$cdir" origin_read_bytes_total)
c=$(gw_metric "$cdir" cache_corrupt_blocks_total)
echo "after restart: kill.bin: ${h:-?} bytes from the cache, ${o:-?} from the origin, corrupt blocks ${c:-?}" >&2
# The tree is still served from the cache as well.
got=$(harness_timeout 120 tree_manifest "$mnt/tree")
[ "$want" = "$got" ] || bad "after SIGKILL + remount: tree manifest differs"
o2=$(gw_metric "$cdir" origin_read_bytes_total)
[ "$o2" = "$o" ] || bad "after SIGKILL + remount: reading the (cached) tree moved origin_read_bytes $o -> $o2"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
out=$(cache_inspect verify --cache-dir "$cdir" 2>&1)
[ $? = 0 ] || bad "verify after the restart fails: $out"

if [ $fail != 0 ]; then
	for l in "${LOGS[@]}"; do echo "--- $l" >&2; tail -n 15 "$l" >&2; done
fi
exit $fail
