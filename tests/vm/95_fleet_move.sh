#!/bin/bash
# Guest test: a fleet, the users' case. Origin: knfsd in the guest's own network namespace. Two gateway hosts, each a network namespace with a mount namespace of its own (held by one long-running process, later commands entering it by pid), joined to the guest by veth pairs on a bridge; in each, a cachegw mounting the origin with fleet= (one PostgreSQL store, store_start) re-exported by that namespace's own knfsd (its rpcbind, mountd and nfsd; the same export line with the same fsid= in both). One service address is moved between them. Kernel NFSv3 clients (hard, tcp) in the guest's namespace mount the service address and run, for the whole test, a writer (new files of random bytes written, fsync'ed and read back O_DIRECT; now and then an fsync'ed overwrite in an older file), a reader (origin files read O_DIRECT and compared), a file held open and read at random offsets, and a shell whose working directory is inside the mount. Meanwhile the address moves a few seconds apart: the serving host's knfsd is stopped (rpc.nfsd 0), then its gateway (unmounted), the address moved to the other host, and the stopped host's gateway started again on its own cache_dir (so the next move can come back to it); during the middle move the store is stopped, and started again after it. At the end: 0 application errors, every file written and fsync'ed at the origin byte for byte, no knfsd warning of an errno it does not know (its EIO), the longest stall printed. Skipped unless CACHEGW_TEST_FLEET_MOVE is short (2 moves, NFSv3) or 1 (20 moves, CACHEGW_FLEET_MOVES, then NFSv4.2 clients through two moves: what they see is printed, not asserted). CACHEGW_FLEET_DEBUG=1: the gateways' FUSE debug output, and every request they answered with an error (but ENOENT) printed on failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start
# CACHEGW_TEST_FLEET_MOVE=short: two moves (there and back, the store
# stopped and started again during the first), NFSv3 only: 273-400 s of
# guest time on a loaded host, most of it the set-up: more than the
# suite's guest has left, so tools/test runs it only when asked.
# CACHEGW_TEST_FLEET_MOVE=1: the full run, 20 moves and the NFSv4.2 part
# (doc/fleet.md has its figures). Unset or 0: skipped.
case ${CACHEGW_TEST_FLEET_MOVE:-} in
1)
	MOVES=${CACHEGW_FLEET_MOVES:-20}
	V4=${CACHEGW_FLEET_V4:-1}
	;;
short)
	MOVES=${CACHEGW_FLEET_MOVES:-2}
	V4=${CACHEGW_FLEET_V4:-0}
	;;
*)
	echo "SKIP: a fleet's moves cost minutes of guest time; CACHEGW_TEST_FLEET_MOVE=short (2 moves) or 1 (20, and NFSv4.2) runs it" >&2
	exit 77
	;;
esac
GAP=${CACHEGW_FLEET_GAP:-3}	# seconds between two moves
STORE_MOVE=$(((MOVES + 1) / 2))	# the move during which the store is away
NFSD_THREADS=4
FSID=1001
BR=cgwfbr0
NET=10.99.0
ORIGIN_ADDR=$NET.1		# the guest's own namespace, on the bridge
SERVICE=$NET.100		# the fleet's service address
GW_MNT=/srv/gw			# the gateway's mount point on each host
# NFSv4's pseudo-root on each host (a tmpfs: the guest's root is an
# overlay, which knfsd cannot export), the gateway bound below it as
# /export, as doc/reexport.md tells users (tests/vm/lib.sh knfsd_v4root).
V4ROOT=/run/nfs4root
declare -A HOST_ADDR=([a]=$NET.11 [b]=$NET.12)
declare -A HOLDER=() GWPID=() RPCB=() MOUNTD=() CACHE=() GWLOG=() STATE=()

work=$(harness_tmpdir work)
stop=$work/stop
loader_pids=()
stop_load() {
	local p
	touch "$stop"
	for p in "${loader_pids[@]}"; do
		# By the clock: under TCG, pid_wait_exit's 0.1 s steps take
		# several times that each.
		local until=$((SECONDS + 60))
		while pid_alive "$p" && [ $SECONDS -lt $until ]; do
			sleep 1
		done
		if pid_alive "$p"; then
			bad "a loop (pid $p) did not stop within 60 s: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
			stack_of "$p"
			kill -KILL "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null
	done
	loader_pids=()
}

# stack_of PID: where PID and its children wait in the kernel, the
# serving gateway's last requests: the report of a loop that hangs.
stack_of() {
	local p c h
	for p in "$1" $(pgrep -P "$1"); do
		echo "    pid $p ($(cat "/proc/$p/comm" 2>/dev/null)): $(tr '\n' ' ' <"/proc/$p/stack" 2>/dev/null)" >&2
		for c in $(pgrep -P "$p"); do
			echo "    pid $c ($(cat "/proc/$c/comm" 2>/dev/null)): $(tr '\n' ' ' <"/proc/$c/stack" 2>/dev/null)" >&2
		done
	done
	for h in a b; do
		tail -n 12 "${GWLOG[$h]}" | sed "s/^/    gateway $h: /" >&2
		grep -E '^=== move|fleet' "${GWLOG[$h]}" | tail -n 12 | sed "s/^/    gateway $h: /" >&2
	done
	tail -n 5 "$STORE_STORE_LOG" | sed 's/^/    store: /' >&2
	dmesg | tail -n 8 | sed 's/^/    dmesg: /' >&2
}

# ---- the gateway hosts -------------------------------------------------
# host_exec H CMD...: run CMD in host H's network and mount namespaces.
host_exec() {
	local pid=${HOLDER[$1]}
	shift
	nsenter -t "$pid" -m -n -- "$@"
}

# host_is_mounted H PATH: PATH is a mount point in H's mount namespace.
host_is_mounted() {
	awk -v m="$2" '$5 == m { found = 1 } END { exit !found }' \
		"/proc/${HOLDER[$1]}/mountinfo" 2>/dev/null
}

# host_make H: the namespaces (one process holds them for the whole
# test), a veth pair to the bridge, and the host's own /run, /var/lib/nfs,
# /etc/exports, nfsd file system, rpcbind and mountd.
host_make() {
	local h=$1 pids st
	unshare --net --mount --propagation private -- sleep 100000 </dev/null &
	HOLDER[$h]=$!
	harness_register_pid "${HOLDER[$h]}"
	sleep 0.2
	ip link add "cgwf${h}0" type veth peer name "cgwf${h}1" || return 1
	ip link set "cgwf${h}1" netns "${HOLDER[$h]}" || return 1
	ip link set "cgwf${h}0" master "$BR" up || return 1
	host_exec "$h" sh -c "ip link set lo up && ip addr add ${HOST_ADDR[$h]}/24 dev cgwf${h}1 &&
		ip link set cgwf${h}1 up" || return 1
	st=$(harness_tmpdir "host-$h") || return 1
	STATE[$h]=$st
	CACHE[$h]=$(harness_tmpdir "cache-$h") || return 1
	GWLOG[$h]=$work/gateway-$h.log
	# The same export line on every host: the same fsid=.
	cat >"$st/exports" <<-EOF
	$GW_MNT *(rw,no_subtree_check,sync,no_root_squash,fsid=$FSID)
	$V4ROOT *(rw,no_subtree_check,sync,no_root_squash,fsid=0,crossmnt)
	$V4ROOT/export *(rw,no_subtree_check,sync,no_root_squash,fsid=$((FSID + 1)))
	EOF
	# Prints "RPCBIND_PID MOUNTD_PID" once both answer.
	pids=$(host_exec "$h" bash -s "$st" <<-'EOS'
		st=$1
		exec 3>&1 >&2
		mkdir -p "$st/varlib/nfs" || exit 1
		mount -t tmpfs -o mode=755 hostrun /run || exit 1
		mkdir -p /run/rpcbind /run/lock /run/nfs4root
		mount -t tmpfs -o mode=755 nfs4root /run/nfs4root || exit 1
		mkdir /run/nfs4root/export || exit 1
		mount --bind "$st/varlib/nfs" /var/lib/nfs || exit 1
		mount --bind "$st/exports" /etc/exports || exit 1
		: >/var/lib/nfs/etab; : >/var/lib/nfs/rmtab
		mount -t nfsd nfsd /proc/fs/nfsd || exit 1
		echo 10 >/proc/fs/nfsd/nfsv4gracetime
		echo 10 >/proc/fs/nfsd/nfsv4leasetime
		rpcbind -f -w </dev/null >/dev/null 2>&1 3>&- &
		rb=$!
		for i in $(seq 100); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
		rpc.mountd -F -p 20048 </dev/null >/dev/null 2>&1 3>&- &
		md=$!
		for i in $(seq 100); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -q mountd && break; sleep 0.1; done
		echo "$rb $md" >&3
		EOS
	) || { vlog "host $h: rpcbind/mountd did not start"; return 1; }
	read -r RPCB[$h] MOUNTD[$h] <<<"$pids"
	[ -n "${MOUNTD[$h]}" ] || { vlog "host $h: rpcbind/mountd did not start"; return 1; }
	harness_register_pid "${RPCB[$h]}"
	harness_register_pid "${MOUNTD[$h]}"
}

# host_up H: H's gateway mounted (on its cache_dir) and re-exported by
# H's knfsd.
host_up() {
	local h=$1 i
	# nsenter execs the gateway: $! is the gateway's pid.
	nsenter -t "${HOLDER[$h]}" -m -n -- "$CACHEGW" "$ORIGIN" "$GW_MNT" -f \
		${CACHEGW_FLEET_DEBUG:+-d} -o "cache_dir=${CACHE[$h]},allow_other,fleet=$FLEET_CONNINFO,fleet_member=$h" \
		</dev/null >>"${GWLOG[$h]}" 2>&1 &
	GWPID[$h]=$!
	harness_register_pid "${GWPID[$h]}"
	for ((i = 0; i < 300; i++)); do
		host_is_mounted "$h" "$GW_MNT" && break
		pid_alive "${GWPID[$h]}" || break
		sleep 0.1
	done
	host_is_mounted "$h" "$GW_MNT" ||
		{ vlog "host $h: the gateway did not mount: $(tail -n 5 "${GWLOG[$h]}")"; return 1; }
	host_exec "$h" mount --bind "$GW_MNT" "$V4ROOT/export" || { vlog "host $h: bind under $V4ROOT failed"; return 1; }
	host_exec "$h" exportfs -ra || { vlog "host $h: exportfs -ra failed"; return 1; }
	host_exec "$h" rpc.nfsd "$NFSD_THREADS" || { vlog "host $h: rpc.nfsd failed"; return 1; }
}

# host_down H: H's knfsd stopped (its threads, then its exports), then its
# gateway (unmounted; the process exits).
host_down() {
	local h=$1 i
	host_exec "$h" timeout 60 rpc.nfsd 0 || vlog "host $h: rpc.nfsd 0 failed"
	host_exec "$h" exportfs -ua
	host_exec "$h" umount "$V4ROOT/export" || host_exec "$h" umount -l "$V4ROOT/export"
	for ((i = 0; i < 20; i++)); do
		host_exec "$h" fusermount3 -u "$GW_MNT" 2>/dev/null && break
		host_is_mounted "$h" "$GW_MNT" || break
		sleep 0.5
	done
	if host_is_mounted "$h" "$GW_MNT"; then
		vlog "host $h: the gateway mount is busy: lazy unmount"
		host_exec "$h" fusermount3 -u -z "$GW_MNT"
	fi
	pid_wait_exit "${GWPID[$h]}" 30 || { vlog "host $h: gateway ${GWPID[$h]} did not exit"; pid_stop "${GWPID[$h]}" 5; }
	wait "${GWPID[$h]}" 2>/dev/null
	GWPID[$h]=
}

# address_to H [FROM]: the service address leaves FROM and goes to H; the
# guest forgets FROM's link address for it.
address_to() {
	[ -z "${2:-}" ] || host_exec "$2" ip addr del "$SERVICE/24" dev "cgwf${2}1"
	host_exec "$1" ip addr add "$SERVICE/24" dev "cgwf${1}1" || return 1
	ip neigh flush to "$SERVICE" 2>/dev/null
	return 0
}

# Every host down and gone; by pid, whatever state the test left.
fleet_cleanup() {
	local h m i
	for ((i = ${#_VM_NFS_MOUNTS[@]} - 1; i >= 0; i--)); do
		m=${_VM_NFS_MOUNTS[i]}
		timeout 20 umount "$m" 2>/dev/null || timeout 10 umount -f -l "$m" 2>/dev/null
	done
	_VM_NFS_MOUNTS=()
	for h in "${!HOLDER[@]}"; do
		pid_alive "${HOLDER[$h]}" || continue
		host_exec "$h" timeout 60 rpc.nfsd 0 2>/dev/null
		host_exec "$h" exportfs -ua 2>/dev/null
		host_is_mounted "$h" "$V4ROOT/export" && host_exec "$h" umount -l "$V4ROOT/export"
		host_is_mounted "$h" "$GW_MNT" && { host_exec "$h" fusermount3 -u "$GW_MNT" 2>/dev/null ||
			host_exec "$h" fusermount3 -u -z "$GW_MNT" 2>/dev/null; }
		[ -z "${GWPID[$h]:-}" ] || pid_stop "${GWPID[$h]}" 10
		pid_stop "${MOUNTD[$h]:-}" 5
		pid_stop "${RPCB[$h]:-}" 5
		pid_stop "${HOLDER[$h]}" 5
		ip link del "cgwf${h}0" 2>/dev/null
	done
	HOLDER=()
	ip link del "$BR" 2>/dev/null
}
trap 'stop_load; fleet_cleanup; vm_cleanup' EXIT

# ---- the origin, the store, the bridge ---------------------------------
data=$(harness_tmpdir origin-data)
(
	set -e
	mkdir -p "$data/d/sub" "$data/w_v3" "$data/w_v42"
	for i in 1 2 3 4 5; do head -c $((i * 90001 + 17)) /dev/urandom >"$data/d/r$i"; done
	head -c 70000 /dev/urandom >"$data/d/held"
	for i in 1 2 3; do head -c $((i * 3000)) /dev/urandom >"$data/d/sub/s$i"; done
) || { echo "cannot make the origin's files" >&2; exit 1; }

step "bridge $BR ($ORIGIN_ADDR), knfsd origin, the store"
modprobe veth && modprobe bridge || { echo "FAIL: no veth or bridge module" >&2; exit 1; }
ip link add "$BR" type bridge || exit 1
ip addr add "$ORIGIN_ADDR/24" dev "$BR" && ip link set "$BR" up || exit 1
knfsd_start || exit 1
exportfs -o "rw,no_subtree_check,sync,no_root_squash,insecure,fsid=7501" "$NET.0/24:$data" ||
	{ echo "FAIL: exportfs of the origin" >&2; exit 1; }
mport=$(rpcinfo -p 127.0.0.1 | awk '$2 == 3 && $3 == "tcp" && $5 == "mountd" { print $4; exit }')
[ -n "$mport" ] || { echo "FAIL: the origin's mountd has no port" >&2; exit 1; }
ORIGIN="nfs://$ORIGIN_ADDR$data?nfsport=2049&mountport=$mport"
store_start store "$STORE_PORT" || { echo "FAIL: the store did not start" >&2; exit 1; }
# The gateways reach it through its socket: a file, not the network, so
# any namespace sharing the guest's file systems can.
# (Not STORE_CONNINFO: store_start sets that, to 127.0.0.1, each time the
# store starts, and a host's namespace has a loopback of its own.)
FLEET_CONNINFO="host=$STORE_STORE_DIR port=$STORE_STORE_PORT user=postgres dbname=cachegw"
mkdir -p "$GW_MNT"

step "gateway hosts a and b"
for h in a b; do
	host_make "$h" || exit 1
	host_up "$h" || exit 1
done
address_to a || exit 1

step "NFSv3 clients (hard, tcp) on $SERVICE"
c3=$(harness_tmpdir client-v3)
nfs_mount "$SERVICE:$GW_MNT" "$c3" vers=3,proto=tcp,hard,nolock,actimeo=0 || exit 1
ls "$c3/d" >/dev/null || { echo "FAIL: ls through the service address" >&2; exit 1; }

# ---- the load: one python per kind (a process per file costs ~1 s under
# TCG). Each counts operations and errors until $stop exists, logs every
# error with its time to its .err, and leaves "OPS ERRORS MAX_MS" (its
# slowest operation: the longest stall it saw) in its .result.
cat >"$work/load.py" <<-'PY'
	import mmap, os, random, sys, time
	kind, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
	args = sys.argv[4:]
	ops = errors = 0
	slowest = 0.0
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
	    global ops, errors, slowest
	    ops += 1
	    t0 = time.monotonic()
	    try:
	        fn()
	    except Exception as e:
	        errors += 1
	        log.write("%s %s: %s\n" % (time.strftime("%H:%M:%S"), what, e))
	    slowest = max(slowest, time.monotonic() - t0)

	class Mismatch(Exception):
	    pass

	def writer(mnt, local):
	    os.makedirs(local, exist_ok=True)
	    rnd = random.Random(os.getpid())
	    names, i = [], 0
	    while not os.path.exists(stop):
	        i += 1
	        name = "f%04d" % i
	        data = os.urandom(rnd.choice([1, 4095, 4096, 65537, rnd.randint(1, 300000)]))
	        with open(os.path.join(local, name), "wb") as f:
	            f.write(data)

	        def write_new():
	            fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	            try:
	                view = memoryview(data)
	                while view:
	                    view = view[os.write(fd, view):]
	                os.fsync(fd)
	            finally:
	                os.close(fd)
	            if read_direct(os.path.join(mnt, name)) != data:
	                raise Mismatch("read back differs")
	        op("write " + name, write_new)
	        names.append(name)
	        if i % 4 == 0:
	            old = rnd.choice(names)
	            with open(os.path.join(local, old), "rb") as f:
	                want = bytearray(f.read())
	            off = rnd.randint(0, len(want))
	            patch = os.urandom(rnd.randint(1, 20000))
	            want[off:off + len(patch)] = patch
	            with open(os.path.join(local, old), "wb") as f:
	                f.write(want)

	            def overwrite():
	                fd = os.open(os.path.join(mnt, old), os.O_WRONLY)
	                try:
	                    os.pwrite(fd, patch, off)
	                    os.fsync(fd)
	                finally:
	                    os.close(fd)
	                if read_direct(os.path.join(mnt, old)) != bytes(want):
	                    raise Mismatch("read back differs")
	            op("overwrite %s at %d" % (old, off), overwrite)
	        time.sleep(0.2)

	def reader(mnt, orig, *files):
	    want = {f: open(os.path.join(orig, f), "rb").read() for f in files}
	    while not os.path.exists(stop):
	        for f in files:
	            def check():
	                if read_direct(os.path.join(mnt, f)) != want[f]:
	                    raise Mismatch("differs")
	            op("read " + f, check)
	            time.sleep(0.1)

	def held(path, orig):
	    # Opened once: every read goes out with the handle the first host
	    # gave, to whichever host has the address.
	    want = open(orig, "rb").read()
	    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
	    buf = mmap.mmap(-1, 8192)
	    rnd = random.Random(os.getpid())
	    while not os.path.exists(stop):
	        def check():
	            off = rnd.randint(0, len(want) - 1)
	            n = os.preadv(fd, [buf], off)
	            if buf[:n] != want[off:off + 8192]:
	                raise Mismatch("pread at %d differs" % off)
	        op("held pread", check)
	        time.sleep(0.3)
	    os.close(fd)

	{"writer": writer, "reader": reader, "held": held}[kind](*args)
	with open(out + ".result", "w") as f:
	    f.write("%d %d %d\n" % (ops, errors, int(slowest * 1000)))
PY

# The shell inside: its working directory in the mount, ls and cat there.
cwd_loop() { # CLIENT_MNT OUT
	local out=$2 ops=0 errors=0 i t0 dt slowest=0
	cd "$1/d/sub" || { echo "0 1 0" >"$out.result"; return; }
	while [ ! -e "$stop" ]; do
		for i in 1 2 3; do
			t0=${EPOCHREALTIME/./}
			ops=$((ops + 1))
			ls -l . .. >/dev/null 2>>"$out.err" || { errors=$((errors + 1)); echo "$(date +%T) ls failed" >>"$out.err"; }
			ops=$((ops + 1))
			cat "s$i" >"$out.cat" 2>>"$out.err" && cmp -s "$out.cat" "$data/d/sub/s$i" ||
				{ errors=$((errors + 1)); echo "$(date +%T) cat s$i failed or differs" >>"$out.err"; }
			dt=$(((${EPOCHREALTIME/./} - t0) / 1000))
			[ $dt -le $slowest ] || slowest=$dt
		done
		sleep 0.5
	done
	echo "$ops $errors $slowest" >"$out.result"
}

# load_start CLIENT_MNT TAG: the four loops on one client mount.
load_start() {
	local c=$1 v=$2
	python3 "$work/load.py" writer "$stop" "$work/writer-$v" "$c/w_$v" "$work/local-$v" </dev/null &
	loader_pids+=($!)
	python3 "$work/load.py" reader "$stop" "$work/reader-$v" "$c/d" "$data/d" r1 r2 r3 r4 r5 </dev/null &
	loader_pids+=($!)
	python3 "$work/load.py" held "$stop" "$work/held-$v" "$c/d/held" "$data/d/held" </dev/null &
	loader_pids+=($!)
	cwd_loop "$c" "$work/cwd-$v" </dev/null &
	loader_pids+=($!)
}

# load_report TAG...: each loop's counts; errors are failures unless
# TOLERATE is set (then only shown).
load_report() {
	local f n ops errors slowest v
	for v; do
		for f in "$work"/*-"$v".result; do
			[ -e "$f" ] || { bad "$v: no loop left a result"; continue; }
			n=$(basename "$f" .result)
			read -r ops errors slowest <"$f"
			info "$n: $ops operations, $errors errors, slowest (longest stall) ${slowest} ms"
			[ "$ops" -gt 0 ] || bad "$n did nothing"
			[ "$slowest" -le "${longest:-0}" ] || longest=$slowest
			if [ "$errors" != 0 ]; then
				if [ -n "${TOLERATE:-}" ]; then
					info "$n: $errors errors: $(head -n 5 "$work/$n.err" | tr '\n' ';')"
				else
					bad "$n: $errors errors: $(head -n 5 "$work/$n.err" | tr '\n' ';')"
				fi
			fi
		done
		[ "$(ls "$work"/*-"$v".result 2>/dev/null | wc -l)" = 4 ] ||
			bad "$v: not every loop left a result: $(cd "$work" && ls ./*-"$v".result 2>/dev/null | tr '\n' ' ')"
	done
}

# origin_check TAG: what the writer of TAG fsync'ed is at the origin.
origin_check() {
	python3 - "$work/local-$1" "$data/w_$1" <<-'PY' || bad "$1: the origin's w_$1 differs from what was written"
	import os, sys
	local, origin = sys.argv[1], sys.argv[2]
	want, have = sorted(os.listdir(local)), sorted(os.listdir(origin))
	bad = 0
	if want != have:
	    print("  names differ: only written %s, only at the origin %s" % (
	        sorted(set(want) - set(have))[:5], sorted(set(have) - set(want))[:5]), file=sys.stderr)
	    bad = 1
	differ = [n for n in want if os.path.exists(os.path.join(origin, n)) and
	          open(os.path.join(origin, n), "rb").read() != open(os.path.join(local, n), "rb").read()]
	if differ:
	    print("  %d differ: %s" % (len(differ), " ".join(differ[:10])), file=sys.stderr)
	    bad = 1
	print("  %d files compared" % len(want), file=sys.stderr)
	sys.exit(bad)
	PY
}

# move FROM TO: stop FROM (knfsd, then gateway), the address to TO, FROM's
# gateway started again on its cache_dir. Sets MOVED to the seconds from
# the stop's start to the address's arrival.
move() {
	local from=$1 to=$2 t0 t1
	t0=$(date +%s.%N)
	host_down "$from"
	address_to "$to" "$from" || return 1
	t1=$(date +%s.%N)
	MOVED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	host_up "$from"
}

# What the kernel says of a failing operation, for the report of an error:
# the client's and knfsd's events that carry a nonzero error or status.
# Best effort.
tr=/sys/kernel/tracing
trace_on() {
	[ -e "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null || return 0
	# One process: under TCG a process per event costs about a second.
	python3 - "$tr" <<-'PY'
	import glob, os, sys
	tr = sys.argv[1]
	def put(path, text):
	    try:
	        with open(path, "w") as f:
	            f.write(text)
	    except OSError:
	        pass
	for e in glob.glob(tr + "/events/nfs/*") + glob.glob(tr + "/events/nfsd/*"):
	    try:
	        fmt = open(e + "/format").read()
	    except OSError:
	        continue
	    if e.endswith(("nfsd_set_fh_dentry_badhandle", "nfsd_fh_verify_err")):
	        put(e + "/enable", "1")
	        continue
	    # The client's "error" is a count of bytes when positive.
	    for f, cond in (("error", "error < 0"), ("status", "status != 0")):
	        if " %s;" % f in fmt:
	            put(e + "/filter", cond)
	            put(e + "/enable", "1")
	            break
	put(tr + "/buffer_size_kb", "4096")
	put(tr + "/trace", "")
	PY
	return 0
}
trace_report() {
	[ -r "$tr/trace" ] || return 0
	# Not errors: ENOENT (a new name's LOOKUP), ECHILD (RCU walk).
	grep -v '^#' "$tr/trace" | grep -Ev 'error=-(2|10) |NOENT' | tail -n 20 | sed 's/^/    trace: /' >&2
}
trace_on

step "the load: a writer, a reader, a held file, a shell inside"
load_start "$c3" v3
sleep "$GAP"
at=a
step "$MOVES moves of $SERVICE, ${GAP} s apart"
for ((k = 1; k <= MOVES; k++)); do
	if [ $at = a ]; then to=b; else to=a; fi
	up=$(cut -d' ' -f1 /proc/uptime)
	for h in a b; do echo "=== move $k at $(date +%T) (uptime $up s): $at -> $to" >>"${GWLOG[$h]}"; done
	if [ $k = "$STORE_MOVE" ]; then
		# The store away during a failover: stopped before the move,
		# started again a gap after it. Meanwhile the host coming
		# back starts without it, and a new name (the writer's next
		# file) waits for it on the host serving.
		store_stop store
		t_store=$(date +%s.%N)
		move "$at" "$to" || { bad "move $k ($at -> $to) failed"; break; }
		sleep "$GAP"
		store_start store || { bad "the store did not start again"; break; }
		info "move $k at $(date +%T) (uptime $up s): $at -> $to, the address moved $MOVED s after the stop began; the store away $(awk -v a="$t_store" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
	else
		move "$at" "$to" || { bad "move $k ($at -> $to) failed"; break; }
		info "move $k at $(date +%T) (uptime $up s): $at -> $to, the address moved $MOVED s after the stop began"
	fi
	at=$to
	sleep "$GAP"
done

step "the load stops"
sleep "$GAP"
stop_load
longest=0
load_report v3
info "longest stall of an operation over $MOVES moves: $longest ms"
step "what the writer fsync'ed is at the origin byte for byte"
origin_check v3
for h in a b; do
	grep -E 'BUG:|ERROR: AddressSanitizer|runtime error:' "${GWLOG[$h]}" >&2 && bad "gateway $h's log has a report"
done
# knfsd warns once when a file system gives it an errno it does not know,
# and answers that call NFS3ERR_IO: an EIO the client's application gets.
dmesg | grep -E 'non-standard errno' >&2 && bad "knfsd got an errno it does not know from a gateway"
if [ "$fail" != 0 ]; then
	for h in a b; do
		grep -Ev '^$|credentials: a caller|O_DIRECT refused|fleet: export' "${GWLOG[$h]}" |
			tail -n 15 | sed "s/^/    gateway $h: /" >&2
	done
	dmesg | grep -E 'nfs: |lockd|WARNING|BUG|RIP' | grep -v 'grace period' |
		tail -n 20 | sed 's/^/    dmesg: /' >&2
	dmesg | grep -B 3 -A 40 -m 1 'WARNING:' | sed 's/^/    dmesg: /' >&2
	dmesg | grep -E 'nfsd: |non-standard' | tail -n 10 | sed 's/^/    dmesg: /' >&2
	# With CACHEGW_FLEET_DEBUG (FUSE debug output): every FUSE request the
	# gateways answered with an error other than ENOENT, after the last
	# move marker before it.
	for h in a b; do
		awk -v h="$h" '
		/^=== move/ { mark = $0; next }
		/^unique: [0-9]+, opcode:/ { u = $2; req[u] = $0; next }
		/^   unique: [0-9]+, error: -/ {
			u = $2; e = $4
			if (e != "-2" && e != "-61" && e != "-38" && e != "-95")
				print "    gateway " h ": " mark " | " req[u] " | " $0
		}' "${GWLOG[$h]}" | tail -n 30 >&2
	done
	trace_report
fi

# ---- NFSv4.2: two moves, shown ------------------------------------------
if [ "$V4" = 1 ]; then
	if [ $at = a ]; then to=b; else to=a; fi
	step "NFSv4.2 clients through two moves ($at -> $to and back): what they see"
	c4=$(harness_tmpdir client-v42)
	if nfs_mount "$SERVICE:/export" "$c4" vers=4.2,proto=tcp,hard,actimeo=0; then
		rm -f "$stop"
		load_start "$c4" v42
		sleep $((GAP * 2))
		# There and back: each host once takes over clients whose state
		# the other held.
		for k in 1 2; do
			move "$at" "$to" || { bad "the NFSv4.2 move ($at -> $to) failed"; break; }
			info "v4.2 move $k at $(date +%T): $at -> $to, the address moved $MOVED s after the stop began"
			at=$to
			if [ $at = a ]; then to=b; else to=a; fi
			sleep $((GAP * 3))
		done
		stop_load
		TOLERATE=1 load_report v42
		dmesg | grep -iE 'nfs|lost|reclaim' | grep -v 'tracking' | tail -n 10 | sed 's/^/    dmesg: /' >&2
		trace_report
	else
		info "NFSv4.2 mount of $SERVICE:/export failed"
	fi
fi
step "done"
exit $fail
