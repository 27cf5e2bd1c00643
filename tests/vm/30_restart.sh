#!/bin/bash
# Guest test: restart the gateway under live kernel NFS clients of its knfsd re-export (v3 and v4.2, hard mounts), (a) cleanly and (b) after kill -9, on the same cache_dir with the same fsid=: a reader's open fd (mid-file), a shell cd'ed into a directory of the mount, and files stat'ed and read before all carry on with exact bytes: no ESTALE, no EIO, the same file handles, the same inode numbers; reads issued while the export is down wait and then succeed.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start

data=$(harness_tmpdir origin-data)
(
	set -e
	cd "$data"
	head -c $((3 * 1048576 + 4321)) /dev/urandom >big
	mkdir -p d/sub
	head -c 70000 /dev/urandom >d/sub/x
	printf 'relative y\n' >d/sub/y
	head -c 5000 /dev/urandom >d/z
	for i in 0 1 2 3 4 5 6 7; do head -c $((i * 1000 + 1)) /dev/urandom >"s$i"; done
	for i in 0 1 2 3; do head -c $((i * 65536 + 3)) /dev/urandom >"r$i"; done
	head -c 12345 /dev/urandom >d/sub/deep
) || { echo "cannot make the origin's files" >&2; exit 1; }

origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
GWOPTS="cache_dir=$cdir,allow_other"
mount_gateway "$ORIGIN_URL" "$mnt" "$GWOPTS" || exit 1

FSID3=7331 FSID4=7332
V4BIND=/run/nfs4root/export
# As doc/reexport.md says: no delegations through a re-export.
echo 0 >/proc/sys/fs/leases-enable
knfsd_start || exit 1
knfsd_export "$mnt" "$FSID3" no_root_squash || exit 1
knfsd_v4root "$mnt" "$FSID4" || exit 1
c3=$HARNESS_TMP/c3
c4=$HARNESS_TMP/c4
# actimeo=0: every stat and open asks the server with the handle the client
# holds, so a stale one cannot hide behind the attribute cache.
nfs_mount "127.0.0.1:$mnt" "$c3" vers=3,nolock,hard,actimeo=0 || exit 1
nfs_mount "127.0.0.1:/export" "$c4" vers=4.2,hard,actimeo=0 || exit 1

# The agent (one python process per client): holds big open (O_DIRECT, so
# every read goes to the server) at an offset mid-file, has stat'ed s* and
# read r* and d/sub/deep before; on each "check" line from its FIFO it reads
# on from the open fd, reads the whole file again through it, stats and
# reads the other files by path, and compares bytes with the origin's, file
# handles (name_to_handle_at: the NFS client's handle holds the server's)
# and inode numbers with those from before. Prints "BAD ..." lines, then
# "done N".
agent_py=$HARNESS_TMP/agent.py
cat >"$agent_py" <<-'PY'
import ctypes, hashlib, mmap, os, sys
mnt, data, fifo = sys.argv[1], sys.argv[2], sys.argv[3]
import time
libc = ctypes.CDLL(None, use_errno=True)
DIRECT = 0 if os.environ.get("AGENT_NODIRECT") else os.O_DIRECT
class FH(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
def handle(p):
    fh, mid = FH(), ctypes.c_int()
    fh.bytes = 128
    if libc.name_to_handle_at(-100, p.encode(), ctypes.byref(fh), ctypes.byref(mid), 0) != 0:
        e = ctypes.get_errno()
        return "error " + os.strerror(e)
    return "%d:%s" % (fh.type, bytes(fh.h[:fh.bytes]).hex())
buf = mmap.mmap(-1, 1 << 20)
def pread_all(fd, off=0, n=None):
    out = bytearray()
    while n is None or len(out) < n:
        want = (1 << 20) if n is None else min(1 << 20, n - len(out))
        got = os.preadv(fd, [memoryview(buf)[:want]], off + len(out))
        if got == 0:
            break
        out += buf[:got]
    return bytes(out)
def origin(f):
    with open(os.path.join(data, f), "rb") as g:
        return g.read()
def read_direct(f):
    fd = os.open(os.path.join(mnt, f), os.O_RDONLY | DIRECT)
    try:
        return pread_all(fd)
    finally:
        os.close(fd)
stat_set = ["s%d" % i for i in range(8)] + ["d", "d/sub", "d/z"]
read_set = ["r%d" % i for i in range(4)] + ["d/sub/deep"]
bad = []
def check(what, got, want):
    if got != want:
        bad.append("BAD %s: %s: got %s, want %s" % (mnt, what, str(got)[:120], str(want)[:120]))
big = origin("big")
fd = os.open(os.path.join(mnt, "big"), os.O_RDONLY | DIRECT)
pos = len(big) // 2 + 12345
check("first half of big", pread_all(fd, 0, pos), big[:pos])
before = {}
for f in stat_set:
    st = os.stat(os.path.join(mnt, f))
    before[f] = (st.st_ino, st.st_size, handle(os.path.join(mnt, f)))
for f in read_set:
    check("read of %s before" % f, read_direct(f), origin(f))
    st = os.stat(os.path.join(mnt, f))
    before[f] = (st.st_ino, st.st_size, handle(os.path.join(mnt, f)))
before["big"] = (os.fstat(fd).st_ino, len(big), handle(os.path.join(mnt, "big")))
for b in bad:
    print(b)
print("handle of big: %s" % before["big"][2])
print("ready %d" % len(bad), flush=True)
def commands():
    while True:
        with open(fifo) as f:
            for line in f:
                yield line.split()
for cmd in commands():
    if cmd == ["quit"]:
        break
    if cmd != ["check"]:
        continue
    bad = []
    t0 = time.time()
    try:
        # The open fd: on from where it is, then the whole file.
        n = 256 * 1024
        got = pread_all(fd, pos, n)
        check("open fd at %d" % pos, hashlib.sha256(got).hexdigest(), hashlib.sha256(big[pos:pos + n]).hexdigest())
        pos = (pos + n) % len(big)
        check("open fd, whole file", hashlib.sha256(pread_all(fd)).hexdigest(), hashlib.sha256(big).hexdigest())
        check("open fd, fstat inode", os.fstat(fd).st_ino, before["big"][0])
    except OSError as e:
        bad.append("BAD %s: open fd: %s" % (mnt, e))
    for f in stat_set + read_set + ["big"]:
        try:
            st = os.stat(os.path.join(mnt, f))
            check("stat %s (inode, size, handle)" % f, (st.st_ino, st.st_size, handle(os.path.join(mnt, f))), before[f])
            if f in read_set:
                check("read of %s" % f, hashlib.sha256(read_direct(f)).hexdigest(), hashlib.sha256(origin(f)).hexdigest())
        except OSError as e:
            bad.append("BAD %s: %s: %s" % (mnt, f, e))
    for b in bad:
        print(b)
    print("done %d (%.1f s)" % (len(bad), time.time() - t0), flush=True)
PY

# Polling without a process per poll (a process costs about a second under
# TCG): nap SECS reads with a timeout from a FIFO that nobody writes.
mkfifo "$HARNESS_TMP/nap"
exec {NAP_FD}<>"$HARNESS_TMP/nap"
nap() { read -r -t "$1" -u "$NAP_FD" _; }
# lines_matching FILE REGEX: how many lines of FILE match (bash regex).
lines_matching() {
	local l n=0
	while IFS= read -r l; do [[ $l =~ $2 ]] && n=$((n + 1)); done <"$1"
	echo "$n"
}
# wait_for FILE REGEX SECS [N]: until N (1) lines of FILE match.
wait_for() {
	local i
	for ((i = 0; i < $3 * 2; i++)); do
		[ "$(lines_matching "$1" "$2")" -ge "${4:-1}" ] && return 0
		nap 0.5
	done
	return 1
}

# Per client: the agent and a shell cd'ed into d/sub, each reading one
# command line at a time from its FIFO (opened again for each, so that no
# other process holds it open) and writing to a file.
kids=()
for v in 3 4; do
	c=$HARNESS_TMP/c$v
	mkfifo "$HARNESS_TMP/agent$v.in" "$HARNESS_TMP/shell$v.in"
	python3 "$agent_py" "$c" "$data" "$HARNESS_TMP/agent$v.in" </dev/null >"$HARNESS_TMP/agent$v.out" 2>&1 &
	harness_register_pid $!
	kids+=($!)
	(cd "$c/d/sub" && exec bash -c 'while read -r l <"$1"; do eval "$l"; done' _ "$HARNESS_TMP/shell$v.in") \
		</dev/null >"$HARNESS_TMP/shell$v.out" 2>&1 &
	harness_register_pid $!
	kids+=($!)
done
# send FIFO LINE (the reader may be gone: do not wait for ever)
send() {
	timeout 60 bash -c 'printf "%s\n" "$2" >"$1"' _ "$1" "$2" || bad "cannot send '$2' to $1"
}
want_ls=$(cd "$data/d/sub" && ls -A)
want_sums=$(cd "$data/d/sub" && sha256sum x y ../z)
for v in 3 4; do
	wait_for "$HARNESS_TMP/agent$v.out" '^ready' 120 || { bad "v$v: the agent did not start: $(cat "$HARNESS_TMP/agent$v.out")"; exit 1; }
	grep -q '^ready 0$' "$HARNESS_TMP/agent$v.out" || bad "v$v: reads before the restart: $(cat "$HARNESS_TMP/agent$v.out")"
	info "v$v client, $(grep '^handle of big' "$HARNESS_TMP/agent$v.out")"
done

# shell_cmds V TAG: ls and relative reads in the cd'ed shell.
shell_cmds() {
	send "$HARNESS_TMP/shell$1.in" "echo '== $2'; ls -A; sha256sum x y ../z; echo \"== end $2 \$?\""
}
# shell_check V TAG: its output equals the origin's.
shell_check() {
	local out=$HARNESS_TMP/shell$1.out got
	wait_for "$out" "^== end $2 " 200 || { bad "v$1 shell ($2): no answer: $(tail -n 5 "$out")"; return; }
	got=$(sed -n "/^== $2\$/,/^== end $2 /p" "$out" | sed '1d;$d')
	[ "$got" = "$want_ls"$'\n'"$want_sums" ] ||
		bad "v$1 shell in d/sub ($2): ls and relative reads differ from the origin's: $(printf '%s' "$got" | head -n 8 | tr '\n' '|')"
	grep -q "^== end $2 0\$" "$out" || bad "v$1 shell ($2): a command failed: $(printf '%s' "$got" | tail -n 3)"
}
# agent_check V N: the agent's N-th answer (to the N-th "check") is clean.
agent_check() {
	local out=$HARNESS_TMP/agent$1.out
	wait_for "$out" '^done' 200 "$2" || { bad "v$1 agent: no answer to check $2: $(tail -n 5 "$out")"; return; }
	info "v$1 agent, check $2: $(grep '^done' "$out" | sed -n "${2}p")"
	grep '^done' "$out" | sed -n "${2}p" | grep -q '^done 0 ' ||
		bad "v$1 agent (check $2): $(grep '^BAD' "$out" | tail -n 6 | tr '\n' '|')"
}

# Everyone looks once before anything restarts.
for v in 3 4; do shell_cmds "$v" before; send "$HARNESS_TMP/agent$v.in" check; done
for v in 3 4; do shell_check "$v" before; agent_check "$v" 1; done
[ $fail = 0 ] || exit 1
# The gateway's own handle (node-id, generation) of a file, for the record.
# gw_handle PATH: the handle name_to_handle_at gives for PATH.
gw_handle() {
	python3 - "$1" <<-'PY'
	import ctypes, sys
	libc = ctypes.CDLL(None, use_errno=True)
	class FH(ctypes.Structure):
	    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
	fh, mid = FH(), ctypes.c_int()
	fh.bytes = 128
	r = libc.name_to_handle_at(-100, sys.argv[1].encode(), ctypes.byref(fh), ctypes.byref(mid), 0)
	print("%d:%s" % (fh.type, bytes(fh.h[:fh.bytes]).hex()) if r == 0 else "error")
	PY
}
gwfh_before=$(gw_handle "$mnt/d/sub/deep")
info "the gateway's FUSE handle of d/sub/deep: $gwfh_before"

# The restart procedure. knfsd's threads are stopped first (rpc.nfsd 0):
# then the clients' requests go unanswered and hard mounts retry them,
# where a withdrawn export would answer NFS3ERR_STALE; stopping them also
# closes the files NFSv4 opens hold on the gateway mount (its clients
# reclaim their opens in the grace period afterwards). exportfs -u drops
# the export cache's references to the mount, so it can be unmounted.
unexport_all() {
	timeout 60 rpc.nfsd 0 || bad "rpc.nfsd 0 failed"
	knfsd_unexport "$mnt"
	knfsd_unexport "$V4BIND"
}
reexport_all() {
	mount --bind "$mnt" "$V4BIND" || { bad "bind mount of the new gateway mount failed"; return 1; }
	knfsd_export "$mnt" "$FSID3" no_root_squash || bad "exportfs of the new mount failed"
	knfsd_export "$V4BIND" "$FSID4" no_root_squash || bad "exportfs (v4) of the new mount failed"
	timeout 60 rpc.nfsd 8 || bad "rpc.nfsd 8 failed"
}
# Requests issued while the export is down: they must wait, not fail.
send_checks() { # TAG
	for v in 3 4; do shell_cmds "$v" "$1"; send "$HARNESS_TMP/agent$v.in" check; done
}

step "(a) clean restart: knfsd stopped, export withdrawn, gateway unmounted and mounted again on the same cache_dir"
unexport_all
send_checks a
umount "$V4BIND" || bad "umount of the v4 bind mount failed"
unmount_gateway "$mnt" || bad "the first gateway did not stop cleanly (log: $GW_LOG)"
is_mounted "$mnt" && { bad "$mnt still mounted"; exit 1; }
mount_gateway "$ORIGIN_URL" "$mnt" "$GWOPTS" || exit 1
reexport_all
for v in 3 4; do shell_check "$v" a; agent_check "$v" 2; done
step "(a) done"

step "(b) kill -9 of the gateway, then the same"
kill -9 "$GW_PID"
wait "$GW_PID" 2>/dev/null
info "the killed gateway's status: $?"
unexport_all
send_checks b
umount -l "$V4BIND" || bad "umount -l of the v4 bind mount failed"
fusermount3 -u -z "$mnt" || bad "fusermount3 -u -z of the dead mount failed"
mount_gateway "$ORIGIN_URL" "$mnt" "$GWOPTS" || exit 1
reexport_all
for v in 3 4; do shell_check "$v" b; agent_check "$v" 3; done
step "(b) done"

gwfh_after=$(gw_handle "$mnt/d/sub/deep")
[ "$gwfh_after" = "$gwfh_before" ] || bad "the gateway's FUSE handle of d/sub/deep changed: $gwfh_before -> $gwfh_after"

# The NFSv3 client counts the errors each operation got: a stale handle
# that the client quietly looked up again would show here.
errs=$(awk -v m="$c3" '
	$1 == "device" { on = ($5 == m) }
	on && $1 ~ /^(GETATTR|ACCESS|READ|READDIR|READDIRPLUS|LOOKUP):$/ { printf "%s%s", $1, $10 " " }' /proc/self/mountstats)
info "v3 client, errors per operation: $errs"
for e in $errs; do
	[ "${e#*:}" = 0 ] || [ -z "${e#*:}" ] || bad "v3 client: operation ${e%%:*} got ${e#*:} errors"
done

step "stop"
for v in 3 4; do
	send "$HARNESS_TMP/agent$v.in" quit
	send "$HARNESS_TMP/shell$v.in" exit
done
for p in "${kids[@]}"; do
	if pid_wait_exit "$p" 30; then
		wait "$p" 2>/dev/null
	else
		bad "agent or shell $p did not exit"
	fi
done
timeout 30 umount "$c4" "$c3" || bad "umount of the clients failed"
_VM_NFS_MOUNTS=()
timeout 60 rpc.nfsd 0
exportfs -ua
umount "$V4BIND"
_VM_BINDS=()
unmount_gateway "$mnt" || bad "the last gateway did not stop cleanly (log: $GW_LOG)"
step "done"
exit $fail
