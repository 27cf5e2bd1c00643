#!/bin/bash
# cachegw-inspect warm (as root) on a tree a user swaps under it: a FIFO, a symlink to it and one to /dev/zero made at the origin are not read; files replaced, between the walk and the reads, by a symlink to the FIFO, a symlink to /dev/zero, a FIFO, and a directory on a file's path replaced by a symlink to /dev, are each skipped with a line saying what they became; warm ends within 60 s, exit 0, and the regular files are read and cached.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

data=$(harness_tmpdir origin-data)
mkdir "$data/tree" "$data/tree/sub"
head -c 100000 /dev/urandom >"$data/tree/r1"
head -c 1048576 /dev/urandom >"$data/tree/r2"
for v in victim1 victim2 victim3; do head -c 5000 /dev/urandom >"$data/tree/$v"; done
head -c 5000 /dev/urandom >"$data/tree/sub/zero"
mkfifo "$data/tree/fifo"
ln -s fifo "$data/tree/link_to_fifo"
ln -s /dev/zero "$data/tree/link_to_zero"
# Regular files the walk finds: r1 r2 victim1-3 sub/zero.
NREG=6
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { echo "FAIL: the origin did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
work=$(harness_tmpdir work)
cdir=$(harness_tmpdir cache)/c
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || { echo "FAIL: mount failed (log: $GW_LOG)" >&2; exit 1; }
[ -p "$mnt/tree/fifo" ] || bad "the origin's FIFO is not a FIFO through the mount: $(stat -c %F "$mnt/tree/fifo" 2>&1)"

# The swaps, made through the mount (so the kernel's view changes at once).
cat >"$work/swap.sh" <<-EOF
	set -e
	cd "$mnt/tree"
	rm victim1 && ln -s fifo victim1
	rm victim2 && ln -s /dev/zero victim2
	rm victim3 && mkfifo victim3
	mv sub sub.old && ln -s /dev sub
EOF
# warm asks the gateway `cached PATH` for every file it walked, then
# reads. A proxy for the control socket passes everything on, and makes
# the swaps when the NREG-th `cached` arrives, before answering it:
# after the walk, before the reads, every time.
proxy=$(harness_tmpdir proxy)
python3 - "$proxy/control.sock" "$cdir/control.sock" "$NREG" "$work/swap.sh" <<-'PY' &
	import socket, subprocess, sys, threading
	path, target, n, script = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
	srv = socket.socket(socket.AF_UNIX)
	srv.bind(path)
	srv.listen(8)
	count = 0
	lock = threading.Lock()
	def handle(c):
	    global count
	    req = b""
	    while not req.endswith(b"\n"):
	        d = c.recv(65536)
	        if not d:
	            break
	        req += d
	    up = socket.socket(socket.AF_UNIX)
	    up.connect(target)
	    up.sendall(req)
	    rep = b""
	    while True:
	        d = up.recv(65536)
	        if not d:
	            break
	        rep += d
	    up.close()
	    if req.startswith(b"cached "):
	        with lock:
	            count += 1
	            if count == n:
	                r = subprocess.run(["bash", script])
	                open(path + ".swapped", "w").write("%d\n" % r.returncode)
	    c.sendall(rep)
	    c.close()
	open(path + ".ready", "w").write("ready\n")
	while True:
	    c, _ = srv.accept()
	    threading.Thread(target=handle, args=(c,), daemon=True).start()
PY
px=$!
harness_register_pid "$px"
for ((i = 0; i < 100; i++)); do [ -e "$proxy/control.sock.ready" ] && break; sleep 0.1; done
[ -e "$proxy/control.sock.ready" ] || { bad "the control-socket proxy did not start"; exit 1; }

timeout -k 5 60 "$CACHEGW_INSPECT" warm --cache-dir "$proxy" -j 4 "$mnt/tree" >"$work/out" 2>"$work/err"
rc=$?
echo "warm: exit $rc" >&2
sed 's/^/  out: /' "$work/out" >&2
sed 's/^/  err: /' "$work/err" >&2
[ "$(cat "$proxy/control.sock.swapped" 2>/dev/null)" = 0 ] || bad "the swaps were not made after the walk (proxy: '$(cat "$proxy/control.sock.swapped" 2>/dev/null)')"
if [ $rc = 124 ] || [ $rc = 137 ]; then
	bad "warm still running after 60 s (blocked on a FIFO or reading a device)"
elif [ $rc != 0 ]; then
	bad "warm: exit $rc, want 0"
fi
for f in r1:100000 r2:1048576; do
	grep -qx "read ${f#*:} tree/${f%:*}" "$work/out" || bad "warm did not read tree/${f%:*} (${f#*:} bytes)"
done
for v in victim1 victim2 victim3 sub/zero fifo link_to_fifo link_to_zero; do
	grep -q "^read [0-9]* tree/$v\$" "$work/out" && bad "warm read tree/$v"
done
grep -q "$mnt/tree/victim1: skipped: now a symbolic link" "$work/err" || bad "no line says victim1 (now a symlink to the FIFO) was skipped"
grep -q "$mnt/tree/victim2: skipped: now a symbolic link" "$work/err" || bad "no line says victim2 (now a symlink to /dev/zero) was skipped"
grep -q "$mnt/tree/victim3: skipped: now a fifo" "$work/err" || bad "no line says victim3 (now a FIFO) was skipped"
grep -q "$mnt/tree/sub/zero: skipped: a directory on its path is now a symbolic link" "$work/err" || bad "no line says sub/zero (sub now a symlink to /dev) was skipped"
grep -q '^warmed 2 files (0 already cached, 0 failed, 4 skipped): ' "$work/out" || bad "warm summary: '$(tail -1 "$work/out")', want 'warmed 2 files (0 already cached, 0 failed, 4 skipped): ...'"
# The regular files are cached: a dry run (straight to the gateway) does
# not list them.
timeout 60 "$CACHEGW_INSPECT" warm --cache-dir "$cdir" --dry-run "$mnt/tree" >"$work/dry" 2>&1 || bad "warm --dry-run after: exit $?: $(head -c 300 "$work/dry")"
grep -Eq 'bytes: tree/r[12]$' "$work/dry" && bad "after warm, not fully cached: $(grep -E 'bytes: tree/r[12]$' "$work/dry")"

pid_stop "$px" 5
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
