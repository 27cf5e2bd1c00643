#!/bin/bash
# Guest test: the takeover while the origin is away, under knfsd. ganesha origin behind a proxy → cachegw (supervise, hard) → knfsd re-export → kernel NFS clients (v3 and v4.2, hard). Per client, for the whole test: a reader (a fixed set of origin files read O_DIRECT and compared), a file held open and read, and a writer (a new file written and fsync'ed now and then). The proxy stops (the origin unreachable, its write verifier kept); the start command run again is refused (exit 1, one line naming the origin) and the old process serves on; the serving process is killed (SIGKILL) and its successor serves without the origin; 10 s later the proxy starts again. At the end: no error in any loop (the clients waited, nothing failed), no per-op error in the clients' mountstats, every file written and fsync'ed at the origin byte for byte, every reader file read right through both clients. Skips (77) below Linux 6.9: run it with CACHEGW_VM_KERNEL=6.12.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start inspect
if ! python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: takeover needs FUSE_NOTIFY_RESEND (Linux >= 6.9), this guest runs $(uname -r) (CACHEGW_VM_KERNEL=6.12)" >&2
	exit 77
fi
FAR_NFS_PORT=$((REEXPORT_NFS_PORT + 20))
FAR_MNT_PORT=$((REEXPORT_MNT_PORT + 20))
DOWN=${CACHEGW_ORIGIN_DOWN_S:-10}

work=$(harness_tmpdir work)
stop=$work/stop
loader_pids=()
stop_load() {
	local p
	touch "$stop"
	for p in "${loader_pids[@]}"; do
		pid_wait_exit "$p" 120 || kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	loader_pids=()
}
trap 'stop_load; vm_cleanup' EXIT

data=$(harness_tmpdir origin-data)
(
	set -e
	mkdir -p "$data/d" "$data/w_v3" "$data/w_v42"
	for i in 1 2 3 4; do head -c $((i * 70001 + 13)) /dev/urandom >"$data/d/r$i"; done
	head -c 50000 /dev/urandom >"$data/d/held"
) || { echo "cannot make the origin's files" >&2; exit 1; }
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
latproxy_start origin 0 "$FAR_NFS_PORT" "$FAR_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
opts="cache_dir=$cdir,allow_other,supervise,logfile=$work/gw.log"
mount_gateway "$ORIGIN_FAR_URL" "$mnt" "$opts" || exit 1
gw_register_serving "$cdir"
echo 0 >/proc/sys/fs/leases-enable	# doc/reexport.md: no delegations
vm_reexport_clients "$mnt" 7921 || exit 1	# hard mounts, actimeo=0

# One python per loop (under TCG a process per file costs ~1 s). Each
# counts its operations and errors until $stop exists, logs each error
# with the time to its .err, and leaves "OPS ERRORS" in its .result.
cat >"$work/load.py" <<-'PY'
	import mmap, os, random, sys, time
	kind, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
	args = sys.argv[4:]
	ops = errors = 0
	log = open(out + ".err", "a", buffering=1)

	def read_direct(path):
	    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
	    try:
	        buf = mmap.mmap(-1, os.fstat(fd).st_size + 65536)
	        view, got = memoryview(buf), 0
	        while got < len(buf):
	            n = os.preadv(fd, [view[got:]], got)
	            if n == 0:
	                break
	            got += n
	        return bytes(view[:got])
	    finally:
	        os.close(fd)

	def op(what, fn):
	    global ops, errors
	    ops += 1
	    try:
	        fn()
	    except Exception as e:
	        errors += 1
	        log.write("%s %s: %s\n" % (time.strftime("%H:%M:%S"), what, e))

	def drop(fd):
	    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)

	def reader(mnt, orig, gwdir, *files):
	    want = {f: open(os.path.join(orig, f), "rb").read() for f in files}
	    gw = {f: os.open(os.path.join(gwdir, f), os.O_RDONLY) for f in files}
	    while not os.path.exists(stop):
	        for f in files:
	            def check():
	                drop(gw[f])
	                if read_direct(os.path.join(mnt, f)) != want[f]:
	                    raise Exception("differs")
	            op("read " + f, check)
	            time.sleep(0.2)

	def held(path, orig, gwpath):
	    want = open(orig, "rb").read()
	    gw = os.open(gwpath, os.O_RDONLY)
	    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
	    buf = mmap.mmap(-1, 8192)
	    rnd = random.Random(os.getpid())
	    while not os.path.exists(stop):
	        def check():
	            off = rnd.randint(0, len(want) - 1)
	            drop(gw)
	            n = os.preadv(fd, [buf], off)
	            if buf[:n] != want[off:off + 8192]:
	                raise Exception("pread at %d differs" % off)
	        op("held pread", check)
	        time.sleep(0.5)

	def writer(mnt, local):
	    os.makedirs(local, exist_ok=True)
	    i = 0
	    while not os.path.exists(stop):
	        i += 1
	        name = "f%04d" % i
	        data = os.urandom(random.randint(1, 300000))
	        open(os.path.join(local, name), "wb").write(data)
	        def write_new():
	            fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	            try:
	                view = memoryview(data)
	                while view:
	                    view = view[os.write(fd, view):]
	                os.fsync(fd)
	            finally:
	                os.close(fd)
	        op("write " + name, write_new)
	        time.sleep(1)

	{"reader": reader, "held": held, "writer": writer}[kind](*args)
	with open(out + ".result", "w") as f:
	    f.write("%d %d\n" % (ops, errors))
PY

# mountstats_errors MNT: "OPS ERRORS BYOP" of the client mount MNT ("-"
# for ERRORS if the kernel's mountstats have no errors column).
mountstats_errors() {
	python3 - "$1" <<-'PY'
	import sys
	mnt, inside, ops, errs, have, by = sys.argv[1], False, 0, 0, True, []
	for line in open("/proc/self/mountstats"):
	    w = line.split()
	    if line.startswith("device "):
	        inside = len(w) > 4 and w[4] == mnt
	        continue
	    if inside and len(w) >= 2 and w[0].endswith(":") and w[0][:-1].isupper() and w[1].isdigit():
	        ops += int(w[1])
	        if len(w) >= 10:
	            errs += int(w[9])
	            if int(w[9]):
	                by.append("%s=%s" % (w[0][:-1], w[9]))
	        else:
	            have = False
	print(ops, errs if have else "-", ",".join(by) or "-")
	PY
}

step "warm, then the load: per client a reader, a held file, a writer"
for c in "$c3" "$c4"; do
	for i in 1 2 3 4; do cmp -s "$data/d/r$i" "$c/d/r$i" || bad "warm: d/r$i through $c differs"; done
done
declare -A ms0
for c in "$c3" "$c4"; do ms0[$c]=$(mountstats_errors "$c"); done
for v in v3 v42; do
	if [ $v = v3 ]; then c=$c3; else c=$c4; fi
	python3 "$work/load.py" reader "$stop" "$work/reader-$v" "$c/d" "$data/d" "$mnt/d" r1 r2 r3 r4 </dev/null &
	loader_pids+=($!)
	python3 "$work/load.py" held "$stop" "$work/held-$v" "$c/d/held" "$data/d/held" "$mnt/d/held" </dev/null &
	loader_pids+=($!)
	python3 "$work/load.py" writer "$stop" "$work/writer-$v" "$c/w_$v" "$work/local-$v" </dev/null &
	loader_pids+=($!)
done
sleep 5

step "the origin goes away (the proxy stops)"
pid_stop "$ORIGIN_FAR_PID" 5
t0=$SECONDS
p=$(gw_serving "$cdir")
# Into a file, not $(...): a process that took the mount over anyway
# would hold a pipe open as long as it serves.
timeout 120 "$CACHEGW" "$ORIGIN_FAR_URL" "$mnt" -o "$opts" </dev/null >"$work/upgrade.out" 2>&1
rc=$?
out=$(cat "$work/upgrade.out")
info "the start command again: exit $rc: $out"
[ $rc != 0 ] && [ $rc != 124 ] || bad "an upgrade without the origin: exit $rc"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && case $out in *"cannot reach the origin"*) true ;; *) false ;; esac ||
	bad "an upgrade without the origin does not say why in one line: $out"
[ "$(gw_serving "$cdir")" = "$p" ] || bad "the serving process changed after the refused upgrade"

step "SIGKILL of the serving process"
kill -KILL "$p" || bad "no serving process $p"
gw_wait_successor "$cdir" "$p" 60 || bad "no successor of $p"
while [ $((SECONDS - t0)) -lt "$DOWN" ]; do sleep 1; done
is_mounted "$mnt" || bad "the gateway's mount is gone while the origin was away"
pid_alive "$GW_PID" || bad "the supervisor is gone"

step "the origin is back after $((SECONDS - t0)) s"
latproxy_start origin 0 "$FAR_NFS_PORT" "$FAR_MNT_PORT" || bad "the proxy did not start again"
sleep 10	# the loops go on with the origin back
step "the load stops"
stop_load
for f in "$work"/*.result; do
	n=$(basename "$f" .result)
	read -r ops errors <"$f"
	info "$n: $ops operations, $errors errors"
	[ "$ops" -gt 0 ] || bad "$n did nothing"
	[ "$errors" = 0 ] || bad "$n: $errors errors: $(head -n 5 "$work/$n.err" | tr '\n' ';')"
done
[ "$(ls "$work"/*.result 2>/dev/null | wc -l)" = 6 ] || bad "not every loop left a result: $(cd "$work" && ls ./*.result 2>/dev/null | tr '\n' ' ')"
for c in "$c3" "$c4"; do
	read -r o0 e0 by0 <<<"${ms0[$c]}"
	read -r o1 e1 by1 <<<"$(mountstats_errors "$c")"
	info "$(basename "$c"): $((o1 - o0)) RPCs, per-op errors $e0 -> $e1 ($by1)"
	[ "$e1" = - ] || [ "$e1" = "$e0" ] || bad "$(basename "$c"): per-op errors in mountstats: $by0 -> $by1"
done
step "what the writers fsync'ed is at the origin; the readers' files read right"
for v in v3 v42; do
	for f in "$work/local-$v"/*; do
		cmp -s "$f" "$data/w_$v/$(basename "$f")" || bad "$v: $(basename "$f") differs at the origin"
	done
done
for c in "$c3" "$c4"; do
	for i in 1 2 3 4; do cmp -s "$data/d/r$i" "$c/d/r$i" || bad "after: d/r$i through $c differs"; done
done
grep -q 'starting without the origin' "$work/gw.log" || bad "the successor did not say it started without the origin"
sanitizer_check "$work/gw.log" || bad "sanitizer report in the gateway's log"
step "done"
exit $fail
