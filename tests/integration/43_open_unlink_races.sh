#!/bin/bash
# Opens, stats and unlinks racing: a stat racing the last close of a file leaves no cache object open behind it (the gateway holds no object fds once every file is closed); the hidden name of a file unlinked while open cannot be unlinked or renamed over (EBUSY, as on the Linux NFS client), so the open descriptor keeps its data, and the name goes at the last close, and it is not one of the file's names (fstat: nlink 0 after a listing); a file whose RELEASE the kernel drops at unmount (the gateway had not read it yet) is released at exit: no leak report, and its hidden name (it was unlinked while open) is gone from the origin.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

SECS=${CACHEGW_REVIEW_SECS:-15}
NF=${CACHEGW_REVIEW_FILES:-2}
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
for ((i = 0; i < NF; i++)); do head -c $((64 * 1024)) /dev/urandom >"$data/f$i"; done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
# actimeo=0: every stat is a GETATTR at the gateway.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,actimeo=0" || exit 1

# Descriptors the gateway holds on cache objects (data and metadata files).
obj_fds() {
	local n=0 f t
	for f in /proc/"$GW_PID"/fd/*; do
		t=$(readlink "$f" 2>/dev/null) || continue
		case $t in "$cdir"/objects/*) n=$((n + 1)) ;; esac
	done
	echo $n
}

# 1. GETATTR racing the last close: a closed file holds no cache object.
cat >"$work/race.py" <<-'PY'
	import os, random, sys, time
	role, secs, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
	stop = time.time() + secs
	n = 0
	while time.time() < stop:
	    f = random.choice(files)
	    if role == "openclose":
	        fd = os.open(f, os.O_RDONLY)
	        os.pread(fd, 4096, 0)
	        os.close(fd)
	    else:
	        os.stat(f)
	    n += 1
	print("%s: %d ops" % (role, n))
	PY
files=()
for ((i = 0; i < NF; i++)); do files+=("$mnt/f$i"); done
pids=()
for r in openclose openclose stat stat stat; do
	timeout $((SECS + 30)) "$PY" "$work/race.py" $r "$SECS" "${files[@]}" >>"$work/race.out" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || bad "a racer failed: $(tail -n 3 "$work/race.out")"; done
sed 's/^/  /' "$work/race.out" >&2
n=$(obj_fds)
echo "  object fds held with every file closed: $n" >&2
[ "$n" -eq 0 ] || bad "the gateway holds $n cache object fds with no file open (GETATTR attached objects to closed files)"
# A closed file's object is opened again by the next open: still cached.
cat "$mnt/f0" >/dev/null

# 2. The hidden name of an open, unlinked file: unlinking it or renaming
# over it would destroy the file under its open descriptor (rm -rf of the
# directory does both), so both are EBUSY, and the descriptor still reads.
mkdir "$data/busy" && chmod 0777 "$data/busy"
b=$(timeout 30 "$PY" - "$mnt/busy" <<-'PY'
	import errno, os, sys
	d = sys.argv[1]
	def show(name, fn):
	    try:
	        fn(); print(name, "ok")
	    except OSError as e:
	        print(name, errno.errorcode.get(e.errno, e.errno))
	fd = os.open(os.path.join(d, "f"), os.O_RDWR | os.O_CREAT, 0o644)
	os.write(fd, b"kept data\n"); os.fsync(fd)
	open(os.path.join(d, "other"), "w").write("other\n")
	os.unlink(os.path.join(d, "f"))
	hidden = [n for n in os.listdir(d) if n != "other"]
	print("hidden", len(hidden))
	# As on a local fs: no name left, whatever a listing of the hidden
	# name (READDIRPLUS, LOOKUP) told the kernel.
	os.stat(os.path.join(d, hidden[0])) if hidden else None
	print("nlink", os.fstat(fd).st_nlink)
	h = os.path.join(d, hidden[0]) if hidden else os.path.join(d, "none")
	show("unlink-hidden", lambda: os.unlink(h))
	show("rename-over-hidden", lambda: os.rename(os.path.join(d, "other"), h))
	try:
	    print("read", os.pread(fd, 100, 0).decode().strip())
	except OSError as e:
	    print("read", errno.errorcode.get(e.errno, e.errno))
	os.close(fd)
	PY
)
printf '%s\n' "$b" | sed 's/^/  busy: /' >&2
want=$'hidden 1\nnlink 0\nunlink-hidden EBUSY\nrename-over-hidden EBUSY\nread kept data'
[ "$b" = "$want" ] || bad "hidden name of an open, unlinked file: got '$(echo $b)', want '$(echo $want)'"
for ((i = 0; i < 50; i++)); do
	[ "$(ls -A "$data/busy")" = other ] && break
	sleep 0.1
done
[ "$(ls -A "$data/busy")" = other ] || bad "origin after the last close: $(ls -A "$data/busy" | tr '\n' ' '), want only 'other'"

# 2b. A rename over an open file that fails at the origin (its source was
# removed there behind the mount's back) puts the open file back under
# its name: the hidden name is undone, nothing is lost at the last close.
mkdir "$data/undo" && echo target >"$data/undo/tgt" && echo source >"$data/undo/src"
stat "$mnt/undo/src" >/dev/null	# the kernel knows src now
rm "$data/undo/src"
u=$(timeout 30 "$PY" - "$mnt/undo" <<-'PY'
	import errno, os, sys
	d = sys.argv[1]
	fd = os.open(os.path.join(d, "tgt"), os.O_RDONLY)
	try:
	    os.rename(os.path.join(d, "src"), os.path.join(d, "tgt")); print("rename ok")
	except OSError as e:
	    print("rename", errno.errorcode.get(e.errno, e.errno))
	print("read", os.pread(fd, 100, 0).decode().strip())
	os.close(fd)
	PY
)
printf '%s\n' "$u" | sed 's/^/  undo: /' >&2
[ "$u" = $'rename ENOENT\nread target' ] || bad "failed rename over an open file: got '$(echo $u)'"
sleep 1
[ "$(ls -A "$data/undo")" = tgt ] && [ "$(cat "$data/undo/tgt")" = target ] ||
	bad "failed rename over an open file: the origin has '$(ls -A "$data/undo" | tr '\n' ' ')' after the close, want tgt"

# 3. Last: releases the kernel never delivers. An unmount ends the
# connection, and with it the RELEASE of a file closed just before that
# the gateway has not read yet (as when it is slow under load); the
# gateway must still free what the open gave it. Deterministic here: the
# file is let go while the gateway is stopped, by a munmap (a close would
# send a FLUSH and wait for it; a directory's close does too).
mkdir "$data/rel"
echo mapped >"$mnt/rel/mapped"
mkfifo "$work/go"
timeout 60 "$PY" - "$mnt" "$work/go" >"$work/held.out" 2>&1 <<-'PY' &
	import ctypes, mmap, os, sys
	mnt, go = sys.argv[1], sys.argv[2]
	libc = ctypes.CDLL(None, use_errno=True)
	libc.mmap.restype = ctypes.c_void_p
	libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
	                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
	libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
	# libc's mmap, not Python's (which keeps a dup of the fd: its close
	# would FLUSH).
	fd = os.open(os.path.join(mnt, "rel", "mapped"), os.O_RDONLY)
	m = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
	assert m not in (None, ctypes.c_void_p(-1).value)
	os.close(fd)		# FLUSH, answered; the mapping holds the file
	os.unlink(os.path.join(mnt, "rel", "mapped"))	# open: a hidden name
	print("ready", flush=True)
	open(go).read()		# the gateway is stopped now
	libc.munmap(m, 4096)	# RELEASE, queued
	print("let go", flush=True)
	PY
held=$!
for ((i = 0; i < 100; i++)); do grep -q ready "$work/held.out" && break; sleep 0.1; done
if grep -q ready "$work/held.out"; then
	kill -STOP "$GW_PID"
	timeout 20 bash -c 'echo go >"$1"' _ "$work/go"
	wait "$held" || bad "the holder failed: $(cat "$work/held.out")"
	timeout 20 fusermount3 -u "$mnt" || bad "unmount with the gateway stopped failed"
	kill -CONT "$GW_PID"
else
	bad "the holder did not start: $(cat "$work/held.out")"
	kill "$held"
fi
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
# The file is closed for good: nothing of it stays at the origin.
left=$(ls -A "$data/rel")
[ -z "$left" ] || bad "after an unmount that dropped the RELEASE of an unlinked file, the origin still has: $left"
exit $fail
