# shellcheck shell=bash
# tests/vm/lib.sh — the real kernel NFS server and client, for guest tests
# (run inside tools/vm; sources tests/lib/origin.sh for the origin and the
# gateway). Every guest test:
#
#   . "$(dirname "$0")/lib.sh"
#   trap vm_cleanup EXIT
#
#   knfsd_start                      load nfsd, start rpcbind/statd/mountd/nfsd
#   knfsd_export DIR FSID [OPTS]     export DIR to 127.0.0.1 (rw,no_subtree_check,
#                                    fsid=FSID,OPTS) as the README tells users
#   knfsd_unexport DIR
#   knfsd_v4root DIR FSID            a tmpfs pseudo-root (fsid=0,crossmnt) with
#                                    DIR bind-mounted below it as /export
#                                    (exported with fsid=FSID: a FUSE mount
#                                    needs its own); NFSv4 clients mount
#                                    127.0.0.1:/export
#   nfs_mount SPEC MNT OPTS          kernel NFS client mount (unmounted at exit)
#   vm_cleanup                       the EXIT trap: client mounts, exports,
#                                    knfsd, then the harness's own cleanup

. "$(dirname "${BASH_SOURCE[0]}")/../lib/origin.sh"

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

# vm_manifest DIR: tree_manifest's lines (path, type, mode, size or link
# target, sha256) from one process: under TCG a process per file costs
# about a second.
vm_manifest() {
	python3 - "$1" <<-'PY'
	import hashlib, os, stat, sys
	top = sys.argv[1]
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

# vm_proc_kb PID FIELD: a kB field of /proc/PID/status (VmHWM, VmRSS, ...).
vm_proc_kb() {
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null
}
