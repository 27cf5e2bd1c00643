#!/bin/bash
# -o writeback (the kernel's FUSE write-back cache): random 4 KiB writes reach the origin as fewer, larger WRITEs of the kernel's dirty pages; after close a second gateway mount and libnfs (nfs-cat) read exactly the bytes written; with write_window=64k four writers wait for the window (waits and time counted) and every byte arrives; a full origin (tmpfs, size=4m) makes fsync and close fail with ENOSPC, one over its quota (a btrfs qgroup) with EDQUOT; after kill -9 of the gateway what was fsync'ed is at the origin, and the cache it left verifies and serves the same bytes; a 512 MiB dd conv=fsync (up to 16 WRITEs of 1 MiB in flight, each growing the file) keeps the gateway alive and reaches the origin and the cache byte for byte.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
test_origin "$data"
mnt=$(harness_tmpdir mnt)
mnt2=$(harness_tmpdir mnt2)
cdir=$(harness_tmpdir cache)
cdir2=$(harness_tmpdir cache2)

# rw.py FILE SEED N: N random 4 KiB pwrite()s into a 4 MiB file (the same
# ones for the same seed), then the expected bytes to FILE.expect; with a
# 4th argument, also the close()'s result ("ok" or the errno name).
cat >"$work/rw.py" <<-'PY'
	import errno, os, random, sys
	path, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
	rnd = random.Random(seed)
	size = 4 << 20
	model = bytearray(size)
	fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
	os.pwrite(fd, b"\0", size - 1)
	for i in range(n):
	    off = rnd.randrange(0, size // 4096) * 4096
	    buf = rnd.randbytes(4096)
	    os.pwrite(fd, buf, off)
	    model[off:off + 4096] = buf
	os.close(fd)
	open(sys.argv[4], "wb").write(model)
	PY
# full.py FILE BYTES fsync|close: write BYTES, then fsync (or only close);
# prints what each call gave ("write ok fsync ENOSPC close ok").
py_script "$work/full.py" <<-'PY'
	path, n, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
	fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
	out = ["write", res(lambda: os.write(fd, b"x" * n))]
	if how == "fsync":
	    out += ["fsync", res(lambda: os.fsync(fd))]
	out += ["close", res(lambda: os.close(fd))]
	print(" ".join(out))
	PY

# ---- 1. Random 4 KiB writes; close-to-open for another mount and libnfs.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1
WB_PID=$GW_PID WB_LOG=$GW_LOG
# acregmin=30: the reader's kernel holds the old size for 30 s unless the
# open that sees the new version tells it otherwise (close-to-open).
mount_gateway "$ORIGIN_URL" "$mnt2" "cache_dir=$cdir2,acregmin=30,acregmax=60" || exit 1
R_PID=$GW_PID R_LOG=$GW_LOG
# The second mount has the file's old (empty) version in its page cache.
: >"$mnt/rand.bin"
timeout 20 cat "$mnt2/rand.bin" >/dev/null
timeout 60 "$PY" "$work/rw.py" "$mnt/rand.bin" 7 2000 "$work/rand.expect" ||
	bad "(1) random writes through the writeback mount failed"
cmp -s "$work/rand.expect" "$data/rand.bin" || bad "(1) the origin's bytes differ after close"
cmp -s "$work/rand.expect" "$mnt2/rand.bin" || bad "(1) a second mount reads other bytes after the close: $(cmp "$work/rand.expect" "$mnt2/rand.bin" 2>&1 | head -c 300) size $(stat -c %s "$mnt2/rand.bin")"
timeout 20 nfs-cat "$(origin_url origin rand.bin)" >"$work/rand.nfscat" 2>/dev/null ||
	bad "(1) nfs-cat failed"
cmp -s "$work/rand.expect" "$work/rand.nfscat" || bad "(1) libnfs reads other bytes after the close"
cmp -s "$work/rand.expect" "$mnt/rand.bin" || bad "(1) the writeback mount reads other bytes"
wp=$(gw_metric "$cdir" write_writepage_total)
echo "  (1) 2000 random 4 KiB writes reached the origin in ${wp:-?} WRITEs of dirty pages" >&2
[ "${wp:-0}" -ge 1 ] && [ "${wp:-0}" -lt 2000 ] ||
	bad "(1) write_writepage_total is '${wp:-}', want 1..1999 (no write-back cache?)"
unmount_gateway "$mnt2" "$R_PID" "$R_LOG" || bad "(1) unmount of the second mount"
unmount_gateway "$mnt" "$WB_PID" "$WB_LOG" || bad "(1) unmount / gateway exit (log: $WB_LOG)"

# ---- 1b. Splice: the WRITEs' bytes come through a pipe (copied once) when
# a pipe of max_write + 4 KiB can be made; when it cannot (fs.pipe-max-size
# 1 MiB and no CAP_SYS_RESOURCE: root in this container, a user mount) the
# gateway says so and copies, and the bytes are the same either way.
pipe_max0=$(cat /proc/sys/fs/pipe-max-size)
restore_pipe_max() { local rc=$?; echo "$pipe_max0" >/proc/sys/fs/pipe-max-size; (exit $rc); harness_cleanup; }
trap restore_pipe_max EXIT
cap_res=$(( (0x$(awk '/^CapEff/{print $2}' /proc/self/status) >> 24) & 1 ))
splice_write() { # PIPE_MAX LABEL: sets n to write_spliced_total
	echo "$1" >/proc/sys/fs/pipe-max-size
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1
	head -c $((6 << 20)) /dev/urandom >"$work/sp.src"
	dd if="$work/sp.src" of="$mnt/sp.bin" bs=1M conv=fsync status=none ||
		bad "(1b, $2) dd through the mount failed"
	cmp -s "$work/sp.src" "$data/sp.bin" || bad "(1b, $2) the origin's bytes differ"
	n=$(gw_metric "$cdir" write_spliced_total)
	unmount_gateway "$mnt" "$GW_PID" "$GW_LOG" || bad "(1b, $2) unmount / gateway exit"
	echo "$pipe_max0" >/proc/sys/fs/pipe-max-size
}
splice_write $((2 << 20)) "pipe-max-size 2M"
echo "  (1b) 6 MiB through a 2 MiB pipe limit: ${n:-?} WRITEs spliced" >&2
[ "${n:-0}" -ge 1 ] || bad "(1b) write_spliced_total is '${n:-}' with fs.pipe-max-size 2M, want >= 1"
! grep -q "copied twice" "$GW_LOG" || bad "(1b) with a 2 MiB pipe limit the gateway says writes are copied twice"
if [ "$cap_res" = 0 ]; then
	splice_write $((1 << 20)) "pipe-max-size 1M"
	echo "  (1b) the same under a 1 MiB limit: ${n:-?} WRITEs spliced" >&2
	[ "${n:-x}" = 0 ] || bad "(1b) write_spliced_total is '${n:-}' with fs.pipe-max-size 1M, want 0"
	grep -q "copied twice.*fs.pipe-max-size" "$GW_LOG" ||
		bad "(1b) the gateway did not say why writes are copied twice: $(tail -3 "$GW_LOG")"
else
	echo "  (1b) CAP_SYS_RESOURCE here: the pipe-limit fallback cannot be provoked" >&2
fi

# ---- 2. Congestion: write_window=64k, four writers; they wait, nothing is
# lost, and the bdi's strict 1 % dirty limit is lifted.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback,write_window=64k" || exit 1
for i in 1 2 3 4; do head -c $((8 << 20)) /dev/urandom >"$work/w$i"; done
pids=()
for i in 1 2 3 4; do
	timeout 60 dd if="$work/w$i" of="$mnt/w$i" bs=1M conv=fsync status=none &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || bad "(2) a dd writer exited $?"; done
for i in 1 2 3 4; do
	cmp -s "$work/w$i" "$data/w$i" || bad "(2) w$i at the origin differs"
done
waits=$(gw_metric "$cdir" write_window_waits_total)
us=$(gw_metric "$cdir" write_window_wait_microseconds_total)
inflight=$(gw_metric "$cdir" write_window_bytes)
bdi=/sys/class/bdi/$(mountpoint -d "$mnt")
echo "  (2) window waits ${waits:-?}, ${us:-?} us waited, in flight ${inflight:-?}; bdi strict_limit $(cat "$bdi/strict_limit") max_ratio $(cat "$bdi/max_ratio")" >&2
[ "${waits:-0}" -gt 0 ] || bad "(2) no writer waited for a 64 KiB window"
[ "${us:-0}" -gt 0 ] || bad "(2) no time waited counted"
[ "${inflight:-x}" = 0 ] || bad "(2) ${inflight:-?} bytes still in flight"
[ "$(cat "$bdi/strict_limit")" = 0 ] || bad "(2) the bdi's strict_limit is still on"
[ "$(cat "$bdi/max_ratio")" = 100 ] || bad "(2) the bdi's max_ratio is $(cat "$bdi/max_ratio"), want 100"
unmount_gateway "$mnt" || bad "(2) unmount / gateway exit (log: $GW_LOG)"

# ---- 2b. dirty_max=16M: the mount's own enforced dirty limit. 64 MiB
# written and not yet fsync'ed are partly at the origin already (the
# flusher started when the limit was reached); all of it after close.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback,dirty_max=16M" || exit 1
head -c $((64 << 20)) /dev/urandom >"$work/dm.src"
timeout 60 "$PY" - "$work/dm.src" "$mnt/dm.bin" "$cdir" "$CACHEGW_INSPECT" >"$work/dm.out" 2>&1 <<-'PY'
	import os, subprocess, sys
	src, dst, cdir, inspect = sys.argv[1:5]
	fd = os.open(dst, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
	with open(src, "rb") as f:
	    while b := f.read(1 << 20):
	        os.write(fd, b)
	out = subprocess.run([inspect, "stats", "--cache-dir", cdir, "--prometheus"],
	                     capture_output=True, text=True).stdout
	n = [l.split()[1] for l in out.splitlines() if l.startswith("cachegw_write_writepage_total ")]
	print("before_close", n[0] if n else "?")
	os.close(fd)
	PY
bdi=/sys/class/bdi/$(mountpoint -d "$mnt")
mb=$(cat "$bdi/max_bytes") sl=$(cat "$bdi/strict_limit")
echo "  (2b) dirty_max=16M: bdi max_bytes $mb strict_limit $sl; write-back WRITEs before the close: $(cat "$work/dm.out")" >&2
[ "$sl" = 1 ] || bad "(2b) strict_limit is $sl, want 1"
[ "$mb" -ge $((15 << 20)) ] && [ "$mb" -le $((17 << 20)) ] || bad "(2b) max_bytes is $mb, want about 16M"
n=$(sed -n 's/^before_close //p' "$work/dm.out")
[ "${n:-0}" -ge 1 ] 2>/dev/null || bad "(2b) no WRITE of dirty pages before the close (write_writepage_total '${n:-}'): $(cat "$work/dm.out")"
cmp -s "$work/dm.src" "$data/dm.bin" || bad "(2b) the origin's bytes differ after close"
rm -f "$mnt/dm.bin"
unmount_gateway "$mnt" || bad "(2b) unmount / gateway exit (log: $GW_LOG)"

# ---- 3. A full origin: ENOSPC comes back from fsync, and from close.
small=$(harness_tmpdir small)
mount -t tmpfs -o size=4m cachegw-test-small "$small" || { bad "(3) cannot mount a tmpfs"; exit 1; }
harness_register_mount "$small"
origin_start small "$small" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" || exit 1
csmall=$(harness_tmpdir csmall)
mount_gateway "$SMALL_URL" "$mnt" "cache_dir=$csmall,writeback" || exit 1
# full_errors LABEL BYTES ERRNO [DIR]: BYTES written then fsync'ed, then
# BYTES written then only closed: fsync, and close, must say ERRNO. DIR (the
# origin's file system) is synced in between.
full_errors() {
	local out
	out=$(timeout 60 "$PY" "$work/full.py" "$mnt/a" "$2" fsync 2>&1)
	echo "  ($1) $2 bytes, fsync: $out" >&2
	case $out in
	"write ok fsync $3 close "*) ;;
	*) bad "($1) fsync: '$out', want 'write ok fsync $3 close ...'" ;;
	esac
	rm -f "$mnt/a"
	[ -z "${4:-}" ] || sync -f "$4"	# a btrfs qgroup frees at commit
	out=$(timeout 60 "$PY" "$work/full.py" "$mnt/b" "$2" close 2>&1)
	echo "  ($1) $2 bytes, close: $out" >&2
	[ "$out" = "write ok close $3" ] || bad "($1) close: '$out', want 'write ok close $3'"
	rm -f "$mnt/b"
}
full_errors 3 $((8 << 20)) ENOSPC
# After the refused WRITEs the kernel's pages (and its size) hold bytes
# the origin never took: the next open must show the origin's file, as a
# second reader would see it, not those pages.
out=$(timeout 60 "$PY" "$work/full.py" "$mnt/c" $((8 << 20)) close 2>&1)
[ "$out" = "write ok close ENOSPC" ] || bad "(3) close of c: '$out', want 'write ok close ENOSPC'"
sz_o=$(stat -c %s "$small/c" 2>&1) sz_m=$(stat -c %s "$mnt/c" 2>&1)
echo "  (3) after the refused WRITEs: $sz_o bytes at the origin, $sz_m on the mount" >&2
[ "$sz_m" = "$sz_o" ] || bad "(3) the mount says c has $sz_m bytes, the origin $sz_o"
timeout 30 cmp "$small/c" "$mnt/c" >/dev/null 2>&1 ||
	bad "(3) reading c through the mount after the refused WRITEs: $(timeout 30 cmp "$small/c" "$mnt/c" 2>&1 | head -c 200)"
rm -f "$mnt/c"
unmount_gateway "$mnt" || bad "(3) unmount / gateway exit (log: $GW_LOG)"
origin_stop small

# ---- 3b. Over quota at the origin: EDQUOT, from fsync and from close. A
# btrfs (this kernel has no ext4/xfs/tmpfs quota) with its tree limited to
# 2 MiB by a qgroup. The kernel keeps only ENOSPC of a failed write-back
# WRITE for close (any other error becomes EIO there), so the gateway must
# hand the origin's error back itself, as the NFS client's close does.
qimg=$(harness_tmpdir qimg)/q.img
qtop=$(harness_tmpdir qtop)
if ! { truncate -s 256M "$qimg" && mkfs.btrfs -q "$qimg" >/dev/null 2>&1 &&
	mount -o loop "$qimg" "$qtop"; }; then
	bad "(3b) cannot make a btrfs on a loop device"
else
	harness_register_mount "$qtop"
	mkdir "$qtop/d"
	if ! { btrfs quota enable "$qtop" && btrfs qgroup limit 2M "$qtop"; }; then
		bad "(3b) cannot limit the btrfs to 2 MiB (qgroup)"
	fi
	origin_start quota "$qtop/d" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" || exit 1
	cquota=$(harness_tmpdir cquota)
	mount_gateway "$QUOTA_URL" "$mnt" "cache_dir=$cquota,writeback" || exit 1
	full_errors 3b $((4 << 20)) EDQUOT "$qtop"
	n=$(gw_metric "$cquota" write_writepage_errors_total)
	echo "  (3b) write-back WRITEs refused: ${n:-?}" >&2
	[ "${n:-0}" -gt 0 ] || bad "(3b) write_writepage_errors_total is '${n:-}', want > 0"
	unmount_gateway "$mnt" || bad "(3b) unmount / gateway exit (log: $GW_LOG)"
	origin_stop quota
	umount "$qtop" || bad "(3b) cannot unmount the btrfs"
fi

# ---- 4. kill -9: what was fsync'ed is at the origin; the cache is sound.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1
head -c $((3 << 20)) /dev/urandom >"$work/k1"
head -c $((3 << 20)) /dev/urandom >"$work/k2"
timeout 30 dd if="$work/k1" of="$mnt/k1" bs=64k conv=fsync status=none || bad "(4) dd k1 exited $?"
timeout 30 cat "$mnt/k1" >/dev/null
timeout 30 dd if="$work/k2" of="$mnt/k2" bs=64k status=none || bad "(4) dd k2 exited $?"
kill -9 "$GW_PID"
wait "$GW_PID" 2>/dev/null
fusermount3 -u -z "$mnt" 2>/dev/null
cmp -s "$work/k1" "$data/k1" || bad "(4) the fsync'ed file is not at the origin after kill -9"
echo "  (4) after kill -9: k2 (never fsync'ed) has $(stat -c %s "$data/k2" 2>/dev/null || echo no) bytes at the origin" >&2
cache_inspect verify --cache-dir "$cdir" >"$work/verify" 2>&1 || bad "(4) verify of the cache left by kill -9: $(tail -n 3 "$work/verify")"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1
cmp -s "$work/k1" "$mnt/k1" || bad "(4) after the restart the mount reads other bytes of k1"
unmount_gateway "$mnt" || bad "(4) unmount / gateway exit (log: $GW_LOG)"

# ---- 5. Parallel WRITEs that each grow the file: each answer brings its
# own post-op size to the cache, in any order (a fill planned against one
# size ran into a presence map shrunk meanwhile to another: ASan
# heap-buffer-overflow in plan_marks_locked, the plain build aborted).
big_mib=${CACHEGW_TEST_WB_BIG_MIB:-512}
head -c $((big_mib << 20)) /dev/urandom >"$work/big"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1
# The cache's io_uring runs at most 4 workers for each thread that enters
# it to submit (a worker is named iou-wrk-<that thread>), and one thread
# submits every fill (c->sub_thread; the completion thread resubmits a
# refused RWF_DONTCACHE write): each FUSE thread submitting its own fills
# had a pool of up to 8, 16-38 workers in all copying into one object
# under its inode lock (+45 % gateway CPU per GiB).
( most=0 all=0; while kill -0 "$GW_PID" 2>/dev/null && [ ! -e "$work/big.done" ]; do
	sleep 0.02
	w=$(cat /proc/"$GW_PID"/task/*/comm 2>/dev/null | grep '^iou-wrk-') || continue
	n=$(sort <<<"$w" | uniq -c | sort -n | awk 'END { print $1 + 0 }')
	t=$(wc -l <<<"$w")
	[ "$n" -le "$most" ] && [ "$t" -le "$all" ] && continue
	[ "$n" -le "$most" ] || most=$n
	[ "$t" -le "$all" ] || all=$t
	echo "$most $all" >"$work/iowq.max"
done ) &
sampler=$!
timeout 120 dd if="$work/big" of="$mnt/big" bs=1M conv=fsync status=none || bad "(5) dd of $big_mib MiB exited $?"
touch "$work/big.done"; wait "$sampler"
read -r iowq iowq_all <"$work/iowq.max" 2>/dev/null
echo "  (5) at most ${iowq:-0} io_uring workers at once for one submitting thread, ${iowq_all:-0} in all" >&2
[ "${iowq:-0}" -le 4 ] || bad "(5) the cache's io_uring ran $iowq workers at once for one thread, want at most 4"
[ "${iowq_all:-0}" -le 8 ] || bad "(5) the cache's io_uring ran $iowq_all workers at once, want at most 8 (one submitting thread, and the completion thread's)"
cmp -s "$work/big" "$data/big" || bad "(5) the origin's bytes differ after dd conv=fsync"
inflight=$(gw_metric "$cdir" write_inflight_max)
echo "  (5) $big_mib MiB dd: at most ${inflight:-?} WRITEs in flight at once, $(gw_metric "$cdir" cache_writes_skipped_bytes_total) bytes not cached (the cache disk was behind)" >&2
[ "${inflight:-0}" -ge 2 ] || bad "(5) write_inflight_max '${inflight:-}': the WRITEs never overlapped"
unmount_gateway "$mnt" || bad "(5) unmount / gateway exit (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
cmp -s "$work/big" "$mnt/big" || bad "(5) after a remount the mount reads other bytes"
unmount_gateway "$mnt" || bad "(5) unmount / gateway exit (log: $GW_LOG)"
cache_inspect verify --cache-dir "$cdir" >"$work/verify" 2>&1 || bad "(5) verify of the cache: $(tail -n 3 "$work/verify")"
rm -f "$work/big"
exit $fail
