# shellcheck shell=bash
# tests/vm/lib.sh — the real kernel NFS server and client, for guest tests
# (run inside tools/vm; sources harness/origin.sh for the origin and the
# gateway). Every guest test:
#
#   . "$(dirname "$0")/lib.sh"
#   vm_test_start [inspect]
#
#   vm_test_start [inspect]          skip (exit 77) outside the guest, without
#                                    root + ganesha or the gateway (with
#                                    "inspect", cachegw-inspect); vm_cleanup
#                                    at exit
#   info MSG                         an indented note on stderr (bad, step
#                                    and test_require_cmd: tests/lib/common.sh)
#   knfsd_start                      load nfsd, start rpcbind/statd/mountd/nfsd
#   knfsd_export DIR FSID [OPTS]     export DIR to 127.0.0.1 (rw,no_subtree_check,
#                                    fsid=FSID,OPTS) as doc/reexport.md tells users
#   knfsd_unexport DIR
#   knfsd_v4root DIR FSID            a tmpfs pseudo-root (fsid=0,crossmnt) with
#                                    DIR bind-mounted below it as /export
#                                    (exported with fsid=FSID: a FUSE mount
#                                    needs its own); NFSv4 clients mount
#                                    127.0.0.1:/export
#   knfsd_reexport DIR FSID          the three above, as doc/reexport.md tells users:
#                                    DIR (a gateway mount) exported with fsid=FSID
#                                    for NFSv3 and under the pseudo-root with
#                                    FSID+1 for NFSv4
#   vm_reexport_clients MNT FSID     knfsd_reexport, then a v3 and a v4.2 client
#                                    (actimeo=0) at $c3 and $c4
#   nfs_mount SPEC MNT OPTS          kernel NFS client mount (unmounted at exit)
#   vm_cleanup                       the EXIT trap: client mounts, exports,
#                                    knfsd, then the harness's own cleanup

. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"	# the harness, bad, step, test_require_cmd

_VM_NFS_MOUNTS=()
_VM_BINDS=()
_VM_KNFSD=

vlog() { printf '[vm] %s\n' "$*" >&2; }

vm_require_guest() {
	if [ "$(hostname 2>/dev/null)" != cachegw-vm ]; then
		echo "SKIP: a guest test: run it with tools/vm run $0" >&2
		exit 77
	fi
}

# vm_test_start [inspect]: the start every guest test shares: skip unless in
# the guest, as root with ganesha and the gateway (and with "inspect",
# cachegw-inspect); clean up at exit (a test with more to clean sets its own
# EXIT trap after this).
vm_test_start() {
	vm_require_guest
	harness_require_root
	harness_require_gateway
	[ "${1:-}" != inspect ] || harness_require_inspect
	trap vm_cleanup EXIT
}
# info MESSAGE: an indented note.
info() { echo "  $*" >&2; }

knfsd_start() {
	[ -n "$_VM_KNFSD" ] && return 0
	# Short grace periods: otherwise every NFSv4 open and lock waits ~90 s.
	modprobe lockd nlm_grace_period=3 nlm_timeout=3 2>/dev/null || modprobe lockd
	modprobe nfsd || { vlog "modprobe nfsd failed"; return 1; }
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	mountpoint -q /var/lib/nfs/rpc_pipefs ||
		mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs 2>/dev/null
	echo 10 >/proc/fs/nfsd/nfsv4gracetime
	echo 10 >/proc/fs/nfsd/nfsv4leasetime
	harness_rpcbind_ensure || return 1
	: >/etc/exports
	rpc.statd --no-notify 2>/dev/null
	rpc.mountd || { vlog "rpc.mountd failed"; return 1; }
	rpc.nfsd 8 || { vlog "rpc.nfsd failed"; return 1; }
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null
	_VM_KNFSD=1
}

knfsd_export() { # DIR FSID [OPTS]
	exportfs -o "rw,no_subtree_check,sync,fsid=$2${3:+,$3}" "127.0.0.1:$1" ||
		{ vlog "exportfs $1 failed"; return 1; }
}

knfsd_unexport() { exportfs -u "127.0.0.1:$1" 2>/dev/null; }

knfsd_v4root() { # DIR FSID
	local root=/run/nfs4root
	mkdir -p "$root"
	mountpoint -q "$root" || mount -t tmpfs -o mode=755 nfs4root "$root" || return 1
	mkdir -p "$root/export"
	mount --bind "$1" "$root/export" || return 1
	_VM_BINDS+=("$root/export")
	exportfs -o rw,no_subtree_check,fsid=0,crossmnt,sync "127.0.0.1:$root" || return 1
	knfsd_export "$root/export" "$2" no_root_squash
}

knfsd_reexport() { # DIR FSID
	knfsd_start || return 1
	knfsd_export "$1" "$2" no_root_squash || return 1
	knfsd_v4root "$1" $(($2 + 1))
}

# vm_reexport_clients MNT FSID: knfsd re-exports MNT (knfsd_reexport) and
# a v3 and a v4.2 kernel client mount it (actimeo=0: every stat and open
# goes through knfsd to the gateway); sets c3 and c4 to their mounts.
vm_reexport_clients() {
	step "knfsd exports the gateway mount"
	knfsd_reexport "$1" "$2" || return 1
	c3=$(harness_tmpdir client-v3)
	c4=$(harness_tmpdir client-v42)
	nfs_mount "127.0.0.1:$1" "$c3" vers=3,nolock,actimeo=0 || return 1
	nfs_mount "127.0.0.1:/export" "$c4" vers=4.2,actimeo=0
}

nfs_mount() { # SPEC MNT OPTS
	mkdir -p "$2"
	timeout 60 mount -t nfs -o "$3" "$1" "$2" || { vlog "mount -t nfs -o $3 $1 $2 failed"; return 1; }
	_VM_NFS_MOUNTS+=("$2")
}

vm_cleanup() {
	local m i
	for ((i = ${#_VM_NFS_MOUNTS[@]} - 1; i >= 0; i--)); do
		m=${_VM_NFS_MOUNTS[i]}
		timeout 20 umount "$m" 2>/dev/null || timeout 10 umount -f -l "$m" 2>/dev/null
	done
	if [ -n "$_VM_KNFSD" ]; then
		exportfs -ua 2>/dev/null
		timeout 30 rpc.nfsd 0 2>/dev/null
	fi
	for m in "${_VM_BINDS[@]}"; do
		umount -l "$m" 2>/dev/null
	done
	harness_cleanup
}

# vm_manifest DIR [nohash]: tree_manifest's lines (path, type, mode, size
# or link target, sha256; "-" for the hash with nohash) from one process:
# under TCG a process per file costs about a second.
vm_manifest() {
	python3 - "$1" "${2:-}" <<-'PY'
	import hashlib, os, stat, sys
	top, nohash = sys.argv[1], sys.argv[2] == "nohash"
	out = []
	for d, dirs, files in os.walk(top):
	    for n in dirs + files:
	        p = os.path.join(d, n)
	        rel = os.path.relpath(p, top)
	        st = os.lstat(p)
	        mode = "%o" % stat.S_IMODE(st.st_mode)
	        if stat.S_ISLNK(st.st_mode):
	            out.append((rel, "l", mode, os.readlink(p), "-"))
	        elif stat.S_ISDIR(st.st_mode):
	            out.append((rel, "d", mode, "-", "-"))
	        elif stat.S_ISREG(st.st_mode) and nohash:
	            out.append((rel, "f", mode, str(st.st_size), "-"))
	        elif stat.S_ISREG(st.st_mode):
	            try:
	                with open(p, "rb") as f:
	                    h = hashlib.sha256(f.read()).hexdigest()
	            except OSError as e:
	                h = "READ-ERROR " + e.strerror
	            out.append((rel, "f", mode, str(st.st_size), h))
	        else:
	            out.append((rel, "?", mode, "-", "-"))
	for r in sorted(out):
	    print("\t".join(r))
	PY
}

# ---- knfsd as the origin, in a network namespace of its own -------------
#
#   knfsd_origin_start DIR FSID      export DIR from a knfsd in network
#                                    namespace cgworigin (own nfsd threads,
#                                    lockd, rpcbind, mountd, rpc.statd; own
#                                    /run, /var/lib/nfs,
#                                    /etc/exports), reached over a veth pair;
#                                    sets KNFSD_ORIGIN_URL (nfs://ADDR/DIR
#                                    with nfsport= and mountport=)
#                                    (KNFSD_ORIGIN_MANAGE_GIDS=n: its mountd
#                                    trusts the groups in AUTH_SYS, as
#                                    nfs-ganesha and most filers do; Debian's
#                                    nfs.conf says y)
#   knfsd_origin_exec CMD...         run CMD in the origin's namespaces
#   knfsd_origin_stop                rpc.nfsd 0 there, mountd and rpcbind
#                                    stopped by pid (vm_cleanup does not)
#
# nfsd is per network namespace: one in the guest's own namespace (the
# re-export) and this one never share threads, as two machines would not.
# `ip netns exec` gives each command a new mount namespace, so the setup
# runs as one script and later commands enter its namespaces by pid.
KNFSD_ORIGIN_NS=cgworigin
KNFSD_ORIGIN_HOST=10.214.1.1		# the guest's end of the veth
KNFSD_ORIGIN_ADDR=10.214.1.2		# the origin's end
KNFSD_ORIGIN_MNT_PORT=20048
KNFSD_ORIGIN_THREADS=${KNFSD_ORIGIN_THREADS:-8}
KNFSD_ORIGIN_MANAGE_GIDS=${KNFSD_ORIGIN_MANAGE_GIDS:-}
_VM_ORIGIN_PID=		# rpcbind's: holds the origin's namespaces
_VM_ORIGIN_MOUNTD=
_VM_ORIGIN_STATD=

knfsd_origin_exec() {
	[ -n "$_VM_ORIGIN_PID" ] || return 1
	nsenter -t "$_VM_ORIGIN_PID" -m -n -- "$@"
}

knfsd_origin_start() { # DIR FSID
	local dir=$1 fsid=$2 state pids
	modprobe veth || { vlog "modprobe veth failed"; return 1; }
	modprobe lockd nlm_grace_period=3 nlm_timeout=3 2>/dev/null || modprobe lockd
	modprobe nfsd || { vlog "modprobe nfsd failed"; return 1; }
	ip netns add "$KNFSD_ORIGIN_NS" || return 1
	ip link add cgwo0 type veth peer name cgwo1 || return 1
	ip link set cgwo1 netns "$KNFSD_ORIGIN_NS" || return 1
	ip addr add "$KNFSD_ORIGIN_HOST/24" dev cgwo0 && ip link set cgwo0 up || return 1
	ip netns exec "$KNFSD_ORIGIN_NS" sh -c "ip link set lo up &&
		ip addr add $KNFSD_ORIGIN_ADDR/24 dev cgwo1 && ip link set cgwo1 up" || return 1
	state=$(harness_tmpdir knfsd-origin) || return 1
	# Prints "RPCBIND_PID MOUNTD_PID STATD_PID" once nfsd runs.
	pids=$(ip netns exec "$KNFSD_ORIGIN_NS" bash -s "$dir" "$fsid" "$state" \
		"$KNFSD_ORIGIN_HOST" "$KNFSD_ORIGIN_MNT_PORT" "$KNFSD_ORIGIN_THREADS" \
		"$KNFSD_ORIGIN_MANAGE_GIDS" <<-'EOS'
		dir=$1 fsid=$2 state=$3 client=$4 mport=$5 threads=$6 mgids=$7
		exec 3>&1 >&2
		mkdir -p "$state/run" "$state/varlib/nfs" && : >"$state/exports" || exit 1
		if [ -n "$mgids" ]; then
			# This namespace's nfs.conf: [mountd] manage-gids as asked.
			{ sed '/^[[:space:]]*manage-gids[[:space:]]*=/d' /etc/nfs.conf 2>/dev/null
			  printf '[mountd]\nmanage-gids=%s\n' "$mgids"; } >"$state/nfs.conf"
			mount --bind "$state/nfs.conf" /etc/nfs.conf || exit 1
		fi
		mount -t tmpfs -o mode=755 orun /run || exit 1
		mkdir -p /run/rpcbind /run/lock
		mount --bind "$state/varlib/nfs" /var/lib/nfs || exit 1
		mount --bind "$state/exports" /etc/exports || exit 1
		: >/var/lib/nfs/etab; : >/var/lib/nfs/rmtab
		mount -t nfsd nfsd /proc/fs/nfsd || exit 1
		echo 10 >/proc/fs/nfsd/nfsv4gracetime
		echo 10 >/proc/fs/nfsd/nfsv4leasetime
		rpcbind -f -w </dev/null >/dev/null 2>&1 3>&- &
		rb=$!
		for i in $(seq 100); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
		# rpc.statd: lockd asks it to monitor each client that locks
		# (SM_MON); without it every NLM lock is refused (NOLOCKS).
		mkdir -p /var/lib/nfs/statd/sm /var/lib/nfs/statd/sm.bak
		rpc.statd -F --no-notify -P /var/lib/nfs/statd </dev/null >/dev/null 2>&1 3>&- &
		sd=$!
		for i in $(seq 100); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -q status && break; sleep 0.1; done
		exportfs -o "rw,no_subtree_check,sync,no_root_squash,insecure,fsid=$fsid" \
			"${client%.*}.0/24:$dir" || exit 1
		rpc.mountd -F -p "$mport" </dev/null >/dev/null 2>&1 3>&- &
		md=$!
		rpc.nfsd -N 4 "$threads" 3>&- || exit 1
		for i in $(seq 100); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -q mountd && break; sleep 0.1; done
		echo "$rb $md $sd" >&3
		EOS
	) || { vlog "the origin's knfsd did not start"; return 1; }
	read -r _VM_ORIGIN_PID _VM_ORIGIN_MOUNTD _VM_ORIGIN_STATD <<<"$pids"
	[ -n "$_VM_ORIGIN_MOUNTD" ] || { vlog "the origin's knfsd did not start"; return 1; }
	KNFSD_ORIGIN_URL="nfs://$KNFSD_ORIGIN_ADDR$dir?nfsport=2049&mountport=$KNFSD_ORIGIN_MNT_PORT"
}

knfsd_origin_stop() {
	[ -n "$_VM_ORIGIN_PID" ] || return 0
	knfsd_origin_exec exportfs -ua 2>/dev/null
	knfsd_origin_exec timeout 30 rpc.nfsd 0 2>/dev/null
	pid_stop "$_VM_ORIGIN_MOUNTD" 5
	[ -n "${_VM_ORIGIN_STATD:-}" ] && pid_stop "$_VM_ORIGIN_STATD" 5
	pid_stop "$_VM_ORIGIN_PID" 5
	_VM_ORIGIN_PID=
	ip link del cgwo0 2>/dev/null
	ip netns del "$KNFSD_ORIGIN_NS" 2>/dev/null
}

# vm_hang_report GW_PID: what every nfsd thread and the gateway's threads
# wait in (kernel stacks, and gdb's backtraces of the gateway if there).
vm_hang_report() {
	local t
	echo "--- nfsd threads: kernel stacks, by count" >&2
	for t in $(pgrep -x nfsd); do
		cat "/proc/$t/stack" 2>/dev/null | awk '{print $2}' | head -n 12 | paste -sd' '
	done | sort | uniq -c | sort -rn | sed 's/^/    /' >&2
	echo "--- gateway $1: kernel stacks of its threads, by count" >&2
	for t in /proc/"$1"/task/*; do
		cat "$t/stack" 2>/dev/null | awk '{print $2}' | head -n 8 | paste -sd' '
	done | sort | uniq -c | sort -rn | sed 's/^/    /' >&2
	if command -v gdb >/dev/null; then
		echo "--- gateway $1: gdb backtraces" >&2
		timeout 120 gdb -p "$1" -batch -nx -ex 'set pagination off' \
			-ex 'thread apply all bt 12' 2>/dev/null |
			grep -E '^(Thread|#)' | sed 's/^/    /' >&2
	fi
}

# vm_proc_kb PID FIELD: a kB field of /proc/PID/status (VmHWM, VmRSS, ...).
vm_proc_kb() {
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null
}
