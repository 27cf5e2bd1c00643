#!/bin/bash
# fsync/close are only answered once the data is stable: a close racing another close whose COMMIT is held (and the origin restarted under it) returns after the resend, a COMMIT error reaches both, a write split into wsize chunks with the origin restarting between chunks is resent whole (counted, bytes exact), a WRITE answered with 0 bytes fails with EIO in bounded time while the gateway lives on, and a write lost in a restart is resent before a newer overlapping one (the origin ends with the newer bytes).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

work=$(harness_tmpdir work)
OPS=$work/ops.py
py_script "$OPS" <<-'PY'
	import ctypes, threading, time

	def count(log, marker):
	    with open(log, errors="replace") as f:
	        return f.read().count(marker)

	def wait_marker(log, marker, n, secs=30):
	    end = time.time() + secs
	    while time.time() < end:
	        if count(log, marker) >= n:
	            return True
	        time.sleep(0.05)
	    return False

	op = sys.argv[1]
	if op == "race":
	    # Two fds of one file; write through one; close the first (its
	    # flush COMMITs; the gateway holds that COMMIT), then, while it is
	    # held, close the second.
	    path, src, log = sys.argv[2:5]
	    data = open(src, "rb").read()
	    fd1 = os.open(path, os.O_RDWR)
	    fd2 = os.open(path, os.O_RDWR)
	    assert os.write(fd1, data) == len(data)
	    marker = "inject: COMMIT held"
	    before = count(log, marker)
	    out = {}
	    def first():
	        out["a"] = res(lambda: os.close(fd1))
	        out["a_end"] = time.monotonic()
	    t = threading.Thread(target=first)
	    t.start()
	    if not wait_marker(log, marker, before + 1):
	        print("no-held-commit")
	        sys.exit(1)
	    time.sleep(0.5)
	    b_start = time.monotonic()
	    out["b"] = res(lambda: os.close(fd2))
	    b_end = time.monotonic()
	    t.join()
	    print("a=%s b=%s b_took=%.2f b_before_a=%.2f" %
	          (out["a"], out["b"], b_end - b_start, out["a_end"] - b_end))
	elif op == "write":
	    # One write(2) of the whole file, then fsync and close.
	    path, src = sys.argv[2:4]
	    data = open(src, "rb").read()
	    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	    r = res(lambda: os.write(fd, data) == len(data) or
	            (_ for _ in ()).throw(OSError(errno.EIO, "short")))
	    if r == "ok":
	        r = res(lambda: os.fsync(fd))
	    c = res(lambda: os.close(fd))
	    print(r if r != "ok" else c)
	elif op == "overwrite":
	    # Write A, tell the test (file DONE_A), wait for its GO file, write
	    # B over A through the same fd, fsync, close: no flush in between.
	    path, a, b, done_a, go = sys.argv[2:7]
	    fd = os.open(path, os.O_WRONLY)
	    os.write(fd, open(a, "rb").read())
	    # With -o writeback, A is in the page cache: have the kernel send
	    # its WRITEs now (no COMMIT), as write-through does at write().
	    # SYNC_FILE_RANGE_WAIT_BEFORE|WRITE|WAIT_AFTER.
	    if ctypes.CDLL(None, use_errno=True).sync_file_range(
	            fd, ctypes.c_longlong(0), ctypes.c_longlong(0), 7) != 0:
	        print("sync_file_range: errno %d" % ctypes.get_errno())
	        sys.exit(1)
	    open(done_a, "w").close()
	    end = time.time() + 60
	    while not os.path.exists(go) and time.time() < end:
	        time.sleep(0.05)
	    os.pwrite(fd, open(b, "rb").read(), 0)
	    r = res(lambda: os.fsync(fd))
	    c = res(lambda: os.close(fd))
	    print(r if r != "ok" else c)
	PY

data=$(harness_tmpdir origin-data)
test_origin "$data"
# ganesha's write verifier is its start time in seconds: a restart within
# the second it started in keeps the verifier, and the origin then cannot
# tell its clients that it lost their unstable writes. Start the new one in
# a later second (measured: 2 runs in 3 of case (a) restarted that fast).
restart_origin() {
	local t0
	t0=$(($(date +%s) - $(ps -o etimes= -p "$ORIGIN_PID" 2>/dev/null || echo 0)))
	origin_stop origin
	# (etimes is whole seconds: one more for its rounding)
	while [ "$(date +%s)" -le $((t0 + 1)) ]; do sleep 0.1; done
	origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT"
}
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

# mount_with VAR=VALUE|"" OPTS: a gateway with one fault injected (or none).
mount_with() {
	local inj=$1 opts=$2 rc
	mnt=$(harness_tmpdir mnt)
	cdir=$(harness_tmpdir cache)
	[ -n "$inj" ] && export "${inj?}"
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,timeo=20${opts:+,$opts}"
	rc=$?
	[ -n "$inj" ] && unset "${inj%%=*}"
	return $rc
}

# ---- (a) close racing close; the origin restarts between WRITE and COMMIT
head -c $((256 << 10)) /dev/urandom >"$work/a.src"
: >"$data/a.bin"
# The COMMIT is held until the origin has restarted (the release file),
# however long the restart takes on a loaded machine.
export CACHEGW_INJECT_RELEASE=$work/a.release
mount_with CACHEGW_INJECT_COMMIT_DELAY=2000 "" || exit 1
unset CACHEGW_INJECT_RELEASE
r0=$(gw_metric "$cdir" write_resends_total)
timeout 120 "$PY" "$OPS" race "$mnt/a.bin" "$work/a.src" "$GW_LOG" >"$work/a.out" 2>&1 &
py=$!
if timeout 30 bash -c 'until grep -q "inject: COMMIT held" "$1"; do sleep 0.1; done' _ "$GW_LOG"; then
	restart_origin || exit 1
fi
touch "$work/a.release"
wait "$py"
out=$(cat "$work/a.out")
echo "  (a) $out" >&2
r1=$(gw_metric "$cdir" write_resends_total)
[ "$(field a "$out")" = ok ] || bad "(a) first close: $out"
[ "$(field b "$out")" = ok ] || bad "(a) second close: $out"
# The second close must wait for the COMMIT in flight (held) and its
# resend: it may not come back before the first.
ahead=$(field b_before_a "$out")
[ -n "$ahead" ] && awk -v d="$ahead" 'BEGIN { exit !(d < 0.3) }' ||
	bad "(a) the second close returned ${ahead}s before the COMMIT in flight was answered"
[ -n "$r1" ] && [ "$r1" -gt "${r0:-0}" ] ||
	bad "(a) no resend counted after the origin restarted (write_resends_total $r0 -> $r1): did its verifier change?"
cmp -s "$work/a.src" "$data/a.bin" || bad "(a) bytes at the origin differ"
unmount_gateway "$mnt" || bad "(a) unmount / gateway exit (log: $GW_LOG)"

# ---- (a') the COMMIT fails: both closes see the error
: >"$data/e.bin"
export CACHEGW_INJECT_COMMIT_ERROR=EIO
mount_with CACHEGW_INJECT_COMMIT_DELAY=3000 "" || exit 1
unset CACHEGW_INJECT_COMMIT_ERROR
timeout 120 "$PY" "$OPS" race "$mnt/e.bin" "$work/a.src" "$GW_LOG" >"$work/e.out" 2>&1
out=$(cat "$work/e.out")
echo "  (a') $out" >&2
[ "$(field a "$out")" = EIO ] || bad "(a') first close with a failing COMMIT: $out (want EIO)"
[ "$(field b "$out")" = EIO ] || bad "(a') second close while that COMMIT was in flight: $out (want EIO)"
unmount_gateway "$mnt" || bad "(a') unmount / gateway exit (log: $GW_LOG)"

# ---- (b) one write of 4 wsize chunks; the origin restarts after the
# first three were answered, before the last is sent
WS=65536
head -c $((4 * WS)) /dev/urandom >"$work/b.src"
export CACHEGW_INJECT_RELEASE=$work/b.release
mount_with CACHEGW_INJECT_WRITE_DELAY=$((3 * WS)):1000 "wsize=$WS" || exit 1
unset CACHEGW_INJECT_RELEASE
r0=$(gw_metric "$cdir" write_resends_total)
w0=$(gw_metric "$cdir" origin_write_bytes_total)
timeout 120 "$PY" "$OPS" write "$mnt/b.bin" "$work/b.src" >"$work/b.out" 2>&1 &
py=$!
if timeout 30 bash -c 'until grep -q "inject: WRITE at .* held" "$1"; do sleep 0.1; done' _ "$GW_LOG"; then
	sleep 1
	restart_origin || exit 1
else
	bad "(b) the WRITE chunk was never held"
fi
touch "$work/b.release"
wait "$py"
out=$(cat "$work/b.out")
r1=$(gw_metric "$cdir" write_resends_total)
w1=$(gw_metric "$cdir" origin_write_bytes_total)
echo "  (b) write+fsync: $out; resends $r0 -> $r1; origin write bytes $w0 -> $w1" >&2
[ "$out" = ok ] || bad "(b) write/fsync: $out"
[ -n "$r1" ] && [ "$r1" -gt "${r0:-0}" ] ||
	bad "(b) the chunks written before the restart were not resent (write_resends_total $r0 -> $r1)"
[ -n "$w1" ] && [ $((w1 - ${w0:-0})) -ge $((8 * WS)) ] ||
	bad "(b) origin took $((${w1:-0} - ${w0:-0})) bytes, want the write and its resend ($((8 * WS)))"
cmp -s "$work/b.src" "$data/b.bin" || bad "(b) bytes at the origin differ"
unmount_gateway "$mnt" || bad "(b) unmount / gateway exit (log: $GW_LOG)"

# ---- (c) every WRITE is answered OK with 0 bytes
head -c 100 /dev/urandom >"$work/c.src"
printf 'alive\n' >"$data/other"
mount_with CACHEGW_INJECT_WRITE_ZERO=0 "" || exit 1
start=$(date +%s)
out=$(timeout 60 "$PY" "$OPS" write "$mnt/c.bin" "$work/c.src" 2>&1)
took=$(($(date +%s) - start))
echo "  (c) write of 100 bytes answered with 0: $out after ${took}s" >&2
[ "$out" = EIO ] || bad "(c) write answered with 0 bytes: got '$out', want EIO"
[ "$took" -lt 30 ] || bad "(c) took ${took}s"
pid_alive "$GW_PID" || bad "(c) the gateway died"
[ "$(timeout 20 cat "$mnt/other" 2>&1)" = alive ] || bad "(c) the mount no longer serves reads"
unmount_gateway "$mnt" || bad "(c) unmount / gateway exit (log: $GW_LOG)"

# ---- (d) a write before an origin restart, then an overlapping one after
# it, one fsync: the lost older bytes are resent before the newer ones, so
# the origin ends with the newer bytes
# Two wsize pieces: with -o writeback a file the kernel sends whole in
# one WRITE of up to 64 KiB goes FILE_SYNC (nothing to lose or resend).
head -c $((2 * WS)) /dev/urandom >"$work/d.a"
head -c $((2 * WS)) /dev/urandom >"$work/d.b"
: >"$data/d.bin"
mount_with "" "wsize=$WS" || exit 1
r0=$(gw_metric "$cdir" write_resends_total)
timeout 120 "$PY" "$OPS" overwrite "$mnt/d.bin" "$work/d.a" "$work/d.b" \
	"$work/d.done_a" "$work/d.go" >"$work/d.out" 2>&1 &
py=$!
timeout 30 bash -c 'until [ -e "$1" ]; do sleep 0.1; done' _ "$work/d.done_a" ||
	bad "(d) the first write did not complete"
restart_origin || exit 1
touch "$work/d.go"
wait "$py"
out=$(cat "$work/d.out")
r1=$(gw_metric "$cdir" write_resends_total)
echo "  (d) overwrite across a restart: $out; resends $r0 -> $r1" >&2
[ "$out" = ok ] || bad "(d) write/fsync: $out"
[ -n "$r1" ] && [ "$r1" -gt "${r0:-0}" ] || bad "(d) nothing resent after the restart"
cmp -s "$work/d.b" "$data/d.bin" || {
	cmp -s "$work/d.a" "$data/d.bin" &&
		bad "(d) the origin holds the OLDER write's bytes: the resend undid the newer write" ||
		bad "(d) bytes at the origin differ"
}
unmount_gateway "$mnt" || bad "(d) unmount / gateway exit (log: $GW_LOG)"
exit $fail
