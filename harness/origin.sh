# shellcheck shell=bash
# harness/origin.sh — the loopback origin harness of cachegw, shared by its
# tools (demo, bench, test; installed with cachegw-bench) and its tests
# (through tests/lib/test.sh), neither reaching into the other: loopback NFS origins
# (nfs-ganesha, VFS FSAL) on 127.0.0.1, gateway mounts, and cleanup of
# everything started.  Source it, then install the cleanup trap:
#
#   . "$(dirname "$0")/../../harness/origin.sh"
#   trap harness_cleanup EXIT
#
# Everything this file starts is registered and stopped by pid in
# harness_cleanup; nothing is ever stopped by name.
#
# Functions:
#   harness_require_root                 exit 77 unless root + ganesha present
#   harness_require_gateway              exit 77 unless $CACHEGW is executable
#   harness_tmpdir                       print a new temp dir (removed at exit)
#   harness_register_pid PID             kill PID at cleanup (TERM, then KILL)
#   harness_register_mount MNT           unmount MNT at cleanup
#   harness_register_dir DIR             rm -rf DIR at cleanup (one file system)
#   harness_cleanup                      the EXIT trap
#   origin_start NAME DIR NFS_PORT MNT_PORT
#                                        export DIR as /NAME; sets
#                                        ${NAME^^}_URL, _URLQ, _PID, _DIR, _LOG
#                                        ($GANESHA_FSAL_OPTS, if set: more
#                                        of the export's FSAL block, e.g.
#                                        "fsid_type = Major64;")
#                                        (with ORIGIN_NLM_PORT=N in the
#                                        environment: NLM served on port N,
#                                        rpc.statd started: origin_url
#                                        adds nlmport=N)
#   origin_stop NAME                     stop that ganesha, wait for exit
#   origin_url NAME PATH                 URL of PATH inside NAME's export
#   store_start NAME PORT, store_stop NAME, store_wipe NAME, store_sql NAME SQL
#                                        a fleet store (PostgreSQL 15);
#                                        sets ${NAME^^}_CONNINFO, _STORE_PID
#   mount_gateway URL MNT [OPTS]         start "$CACHEGW URL MNT -f -o OPTS"
#                                        (stderr -> $GW_LOG), wait for mount;
#                                        sets GW_PID, GW_LOG, GW_MNT;
#                                        $CACHEGW_TEST_GW_OPTS is added to OPTS
#   unmount_gateway MNT                  fusermount3 -u, wait for exit (20 s),
#                                        fail on non-zero exit / sanitizer log
#   is_mounted MNT                       true if MNT is a mount point (reads
#                                        /proc/self/mountinfo; never stats MNT)
#   sanitizer_check LOG                  fail if LOG holds an ASan/UBSan/LSan report
#   fill_tree DIR                        fill DIR with the varied test tree
#   tree_manifest DIR [--mtime]          sorted manifest of DIR for diffing
#
# Ports (override with the environment for a second concurrent run):
ORIGIN_NFS_PORT=${CACHEGW_ORIGIN_NFS_PORT:-20490}
ORIGIN_MNT_PORT=${CACHEGW_ORIGIN_MNT_PORT:-20491}
REEXPORT_NFS_PORT=${CACHEGW_REEXPORT_NFS_PORT:-20590}
REEXPORT_MNT_PORT=${CACHEGW_REEXPORT_MNT_PORT:-20591}
STORE_PORT=${CACHEGW_STORE_PORT:-20595}

_HARNESS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${CACHEGW:=$_HARNESS_ROOT/build/gateway/cachegw}"
export CACHEGW

# Names of the big file and the 300-file directory made by fill_tree.
FILL_BIG=big.bin
FILL_BIG_SIZE=$((33 * 1048576 + 12345))
FILL_MANY=many
FILL_MANY_COUNT=300

_HARNESS_PIDS=()		# "PID STARTTIME": a recycled pid is not ours
_HARNESS_MOUNTS=()
_HARNESS_DIRS=()
_HARNESS_ORIGINS=()
_HARNESS_RPCBIND_PID=
_HARNESS_STATD_PID=
_HARNESS_CLEANED=

hlog() { printf '[harness] %s\n' "$*" >&2; }

harness_require_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP: needs root (ganesha, FUSE mounts)" >&2
		exit 77
	fi
	local b
	for b in ganesha.nfsd rpcbind rpcinfo nfs-ls nfs-cat fusermount3; do
		if ! command -v "$b" >/dev/null 2>&1; then
			echo "SKIP: $b not installed" >&2
			exit 77
		fi
	done
}

harness_require_gateway() {
	if [ ! -x "$CACHEGW" ]; then
		echo "SKIP: gateway binary $CACHEGW not built" >&2
		exit 77
	fi
}

# One private temp dir per test process, made when this file is sourced (so
# that $(harness_tmpdir) in a subshell still lands under it); removed by
# harness_cleanup.  HARNESS_NO_TMP=1 (tools/test) skips it: then only the
# pid helpers and harness_reap are usable.
# Everything registered is also written to $_HARNESS_TMP/.registry, so that a
# runner can clean up after a test that was killed (harness_reap).
if [ -z "${HARNESS_NO_TMP:-}" ]; then
	_HARNESS_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cachegw-test.XXXXXX") || return 1
	chmod 0755 "$_HARNESS_TMP"
	_HARNESS_DIRS+=("$_HARNESS_TMP")
	HARNESS_TMP=$_HARNESS_TMP
fi

_harness_base() { printf '%s\n' "$_HARNESS_TMP"; }

# harness_tmpdir [PREFIX]: print a new directory under the harness temp dir.
harness_tmpdir() {
	local d
	d=$(mktemp -d "$_HARNESS_TMP/${1:-tmp}.XXXXXX") || return 1
	chmod 0755 "$d"
	printf '%s\n' "$d"
}

# Start time of a pid (clock ticks since boot): with the pid, an identity
# that survives exec and cannot be confused with a recycled pid.
pid_starttime() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

_harness_record() { # TYPE VALUE
	local extra=
	[ -n "${_HARNESS_TMP:-}" ] || return 0
	case $1 in pid) extra=$(pid_starttime "$2") ;; esac
	printf '%s\t%s\t%s\n' "$1" "$2" "$extra" >>"$_HARNESS_TMP/.registry"
}

harness_register_pid() {
	_HARNESS_PIDS+=("$1 $(pid_starttime "$1")")
	_harness_record pid "$1"
}
harness_register_mount() { _HARNESS_MOUNTS+=("$1"); _harness_record mount "$1"; }
harness_register_dir() { _HARNESS_DIRS+=("$1"); }

# Alive and not a zombie.
pid_alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# Wait up to $2 seconds (default 10) for pid $1 to exit.
pid_wait_exit() {
	local pid=$1 t=$(( ${2:-10} * 10 )) i
	for ((i = 0; i < t; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.1
	done
	! pid_alive "$pid"
}

# TERM, wait, KILL; reap if it is our child.  Only ever by pid.
pid_stop() {
	local pid=$1 grace=${2:-10}
	[ -n "$pid" ] || return 0
	if pid_alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null
		if ! pid_wait_exit "$pid" "$grace"; then
			hlog "pid $pid did not exit on TERM within ${grace}s; KILL"
			kill -KILL "$pid" 2>/dev/null
			pid_wait_exit "$pid" 5
		fi
	fi
	wait "$pid" 2>/dev/null
	return 0
}

# Mount point test without touching the file system behind it (a hung FUSE
# daemon would hang stat()).  mountinfo escapes space, tab, newline, backslash.
_mnt_escape() {
	local p=$1
	p=${p//\\/\\134}
	p=${p// /\\040}
	p=${p//$'\t'/\\011}
	p=${p//$'\n'/\\012}
	printf '%s' "$p"
}

is_mounted() {
	local m
	m=$(realpath -m "$1") || return 1
	m=$(_mnt_escape "$m")
	awk -v m="$m" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# Mounts at or below a directory (used before rm -rf).
_mounts_below() {
	local d
	d=$(_mnt_escape "$(realpath -m "$1")")
	awk -v d="$d" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo
}

_harness_unmount() {
	local m=$1 i
	is_mounted "$m" || return 0
	for i in 1 2 3 4 5; do
		fusermount3 -u -q "$m" 2>/dev/null || umount "$m" 2>/dev/null
		is_mounted "$m" || return 0
		sleep 0.5
	done
	hlog "lazy unmount of $m"
	fusermount3 -u -z -q "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	is_mounted "$m" && { hlog "could not unmount $m"; return 1; }
	return 0
}

harness_cleanup() {
	local rc=$? i m d
	[ -n "$_HARNESS_CLEANED" ] && return $rc
	_HARNESS_CLEANED=1
	trap - INT TERM
	# Mounts first (newest first): this also makes a gateway exit.
	for ((i = ${#_HARNESS_MOUNTS[@]} - 1; i >= 0; i--)); do
		_harness_unmount "${_HARNESS_MOUNTS[i]}"
	done
	# Then processes we registered (gateways, helpers), newest first.
	for ((i = ${#_HARNESS_PIDS[@]} - 1; i >= 0; i--)); do
		set -- ${_HARNESS_PIDS[i]}
		# Gone and its pid given to another process since: not ours.
		[ "$(pid_starttime "$1")" = "${2:-}" ] && pid_stop "$1" 10
	done
	# Origins, then rpcbind if (and only if) we started it.
	for ((i = ${#_HARNESS_ORIGINS[@]} - 1; i >= 0; i--)); do
		origin_stop "${_HARNESS_ORIGINS[i]}"
	done
	if [ -n "$_HARNESS_STATD_PID" ]; then
		pid_stop "$_HARNESS_STATD_PID" 5
		_HARNESS_STATD_PID=
	fi
	if [ -n "$_HARNESS_RPCBIND_PID" ]; then
		pid_stop "$_HARNESS_RPCBIND_PID" 5
		_HARNESS_RPCBIND_PID=
	fi
	for ((i = ${#_HARNESS_DIRS[@]} - 1; i >= 0; i--)); do
		d=${_HARNESS_DIRS[i]}
		[ -e "$d" ] || continue
		m=$(_mounts_below "$d")
		if [ -n "$m" ]; then
			hlog "not removing $d: still mounted: $m"
			continue
		fi
		chmod -R u+rwX "$d" 2>/dev/null
		rm -rf --one-file-system "$d"
	done
	return $rc
}

# harness_reap DIR: clean up after test processes that could not run their
# own cleanup (killed): for every DIR/cachegw-test.*/.registry, unmount its
# mounts, stop its processes (only if pid and start time still match), and
# remove the temp dir.  Prints what it had to clean; returns 1 if anything
# was still mounted or running.
harness_reap() {
	local root=$1 reg base type val extra i left=0
	local -a lines
	for reg in "$root"/cachegw-test.*/.registry; do
		[ -f "$reg" ] || continue
		base=$(dirname "$reg")
		mapfile -t lines <"$reg"
		for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
			IFS=$'\t' read -r type val extra <<<"${lines[i]}"
			[ "$type" = mount ] || continue
			if is_mounted "$val"; then
				echo "reap: unmounting $val"
				left=1
				_harness_unmount "$val"
			fi
		done
		for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
			IFS=$'\t' read -r type val extra <<<"${lines[i]}"
			[ "$type" = pid ] || continue
			if pid_alive "$val" && [ "$(pid_starttime "$val")" = "$extra" ]; then
				echo "reap: stopping pid $val ($(tr '\0' ' ' <"/proc/$val/cmdline" | cut -c1-120))"
				left=1
				pid_stop "$val" 10
			fi
		done
		if [ -n "$(_mounts_below "$base")" ]; then
			echo "reap: not removing $base: still mounted"
		else
			chmod -R u+rwX "$base" 2>/dev/null
			rm -rf --one-file-system "$base"
		fi
	done
	return $left
}

# A signal ends the script through exit, so the EXIT trap runs.
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------------------------
# rpcbind and ganesha

_port_listening() {
	ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

_rpcbind_up() {
	rpcinfo -p 127.0.0.1 >/dev/null 2>&1
}

harness_rpcbind_ensure() {
	local i pid
	_rpcbind_up && return 0
	rpcbind -f -w >/dev/null 2>&1 &
	pid=$!
	for ((i = 0; i < 100; i++)); do
		if _rpcbind_up; then
			# Another harness may have won a race; only own what runs.
			if pid_alive "$pid"; then
				_HARNESS_RPCBIND_PID=$pid
				_harness_record pid "$pid"
			fi
			return 0
		fi
		pid_alive "$pid" || break
		sleep 0.1
	done
	_rpcbind_up && return 0
	pid_stop "$pid" 2
	hlog "rpcbind did not start"
	return 1
}

# rpc.statd (nfs-common), which a ganesha serving NLM asks to monitor its
# clients (SM_MON): one registered with rpcbind is used; else one is
# started with its state in a scratch dir, in the foreground, and stopped
# by pid at cleanup (as rpcbind: only if it is ours and still runs).
_statd_up() {
	rpcinfo -T tcp 127.0.0.1 100024 1 >/dev/null 2>&1
}

harness_statd_ensure() {
	local i pid dir
	_statd_up && return 0
	if ! command -v rpc.statd >/dev/null 2>&1; then
		hlog "rpc.statd not installed (apt-get install nfs-common)"
		return 1
	fi
	dir=$(harness_tmpdir statd) || return 1
	mkdir -p "$dir/sm" "$dir/sm.bak"
	rpc.statd -F -L -P "$dir" >"$dir/log" 2>&1 </dev/null &
	pid=$!
	for ((i = 0; i < 100; i++)); do
		if _statd_up; then
			if pid_alive "$pid"; then
				_HARNESS_STATD_PID=$pid
				_harness_record pid "$pid"
			fi
			return 0
		fi
		pid_alive "$pid" || break
		sleep 0.1
	done
	_statd_up && return 0
	pid_stop "$pid" 2
	hlog "rpc.statd did not start:"
	tail -n 5 "$dir/log" >&2
	return 1
}

_upper() { printf '%s' "${1^^}"; }

# origin_url NAME [PATH]: URL for PATH (relative to the export root).
origin_url() {
	local v p=${2:-} up np mp lp
	p=${p#/}
	up=$(_upper "$1")
	v=${up}_NFS_PORT_USED
	np=${!v:-}
	v=${up}_MNT_PORT_USED
	mp=${!v:-}
	v=${up}_NLM_PORT_USED
	lp=${!v:-}
	if [ -n "$p" ]; then
		printf 'nfs://127.0.0.1/%s/%s?nfsport=%s&mountport=%s%s\n' "$1" "$p" "$np" "$mp" "${lp:+&nlmport=$lp}"
	else
		printf 'nfs://127.0.0.1/%s?nfsport=%s&mountport=%s%s\n' "$1" "$np" "$mp" "${lp:+&nlmport=$lp}"
	fi
}

# origin_start NAME EXPORT_DIR NFS_PORT MNT_PORT [SQUASH]
# Exports EXPORT_DIR as /NAME (NFSv3 mounts by pseudo path). Sets, with
# N=${NAME^^}: N_URL (export URL), N_PID, N_DIR (exported dir), N_LOG,
# N_STATE (per-instance dir holding config, log, recovery state). SQUASH
# is ganesha's Squash of the export: No_Root_Squash (the default) or
# Root_Squash (uid 0 becomes the anonymous uid 65534 at the origin).
# GANESHA_FSAL_OPTS, if set, goes into the export's FSAL block: a fleet's
# re-exporters set "fsid_type = Major64;" (doc/fleet.md: their handles
# then carry no device number, and decode on every gateway host).
origin_start() {
	local name=$1 dir=$2 nport=$3 mport=$4 squash=${5:-No_Root_Squash}
	local up state conf log pid i url nlm=false nlmport= udp=false
	if [ $# -lt 4 ] || [ $# -gt 5 ] ||
		[[ ! $name =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] ||
		[[ ! $squash =~ ^(No_Root_Squash|Root_Squash)$ ]]; then
		hlog "usage: origin_start NAME EXPORT_DIR NFS_PORT MNT_PORT [No_Root_Squash|Root_Squash]"
		return 2
	fi
	up=$(_upper "$name")
	dir=$(realpath "$dir") || return 1
	for i in "$nport" "$mport"; do
		if _port_listening "$i"; then
			hlog "port $i already in use (another test run?): $(ss -Hltnp "sport = :$i" | head -1)"
			return 1
		fi
	done
	harness_rpcbind_ensure || return 1
	if [ -n "${ORIGIN_NLM_PORT:-}" ]; then
		harness_statd_ensure || return 1
		nlm=true
		nlmport="NLM_Port = $ORIGIN_NLM_PORT;"
		# rpc.statd passes a client's reboot notification (SM_NOTIFY)
		# on to the lock manager over UDP only.
		udp=true
	fi
	state=$(harness_tmpdir "ganesha-$name") || return 1
	mkdir -p "$state/recovery"
	conf=$state/ganesha.conf
	log=$state/ganesha.log
	cat >"$conf" <<-EOF
	NFS_CORE_PARAM {
		NFS_Port = $nport;
		MNT_Port = $mport;
		Bind_addr = 127.0.0.1;
		# NLM (byte-range locks) only where a test asks for it
		# (ORIGIN_NLM_PORT): it needs rpc.statd.
		Enable_NLM = $nlm;
		$nlmport
		Enable_RQUOTA = false;
		Enable_UDP = $udp;
		Protocols = 3, 4;
		# NFSv3 MOUNT by the pseudo path (/$name) instead of the real path.
		Mount_Path_Pseudo = true;
	}
	NFSV4 {
		Graceless = true;
		RecoveryBackend = fs;
		RecoveryRoot = "$state/recovery";
	}
	NFS_KRB5 { Active_krb5 = false; }
	EXPORT_DEFAULTS {
		SecType = sys;
		Squash = No_Root_Squash;
	}
	EXPORT {
		Export_Id = 1;
		Path = "$dir";
		Pseudo = "/$name";
		Access_Type = RW;
		Squash = $squash;
		SecType = sys;
		Protocols = 3, 4;
		Transports = TCP;
		# Tests change the exported dir behind ganesha's back: do not
		# cache attributes (default 60 s), so changes are seen at once.
		Attr_Expiration_Time = 0;
		FSAL { Name = VFS;${GANESHA_FSAL_OPTS:+ $GANESHA_FSAL_OPTS} }
	}
	EOF
	_HARNESS_ORIGINS+=("$name")
	printf -v "${up}_DIR" '%s' "$dir"
	printf -v "${up}_LOG" '%s' "$log"
	printf -v "${up}_STATE" '%s' "$state"
	printf -v "${up}_NFS_PORT_USED" '%s' "$nport"
	printf -v "${up}_MNT_PORT_USED" '%s' "$mport"
	printf -v "${up}_NLM_PORT_USED" '%s' "${ORIGIN_NLM_PORT:-}"
	url=$(origin_url "$name")
	printf -v "${up}_URL" '%s' "$url"
	export "${up}_URL" "${up}_DIR"
	# Two ganeshas starting at once on one machine (test runs side by side)
	# race at rpcbind: the loser logs "Cannot register NFS V3 on TCP" and
	# exits. Start it again then, a few times.
	local attempt
	for attempt in 1 2 3 4 5; do
		ganesha.nfsd -F -f "$conf" -L "$log" -p "$state/ganesha.pid" -N NIV_EVENT \
			>"$state/stdout" 2>&1 </dev/null &
		pid=$!
		_harness_record pid "$pid"
		printf -v "${up}_PID" '%s' "$pid"
		for ((i = 0; i < 200; i++)); do
			if ! pid_alive "$pid"; then
				break
			fi
			if _port_listening "$nport" && _port_listening "$mport" &&
				timeout 10 nfs-ls "$url" >/dev/null 2>&1; then
				return 0
			fi
			sleep 0.1
		done
		pid_alive "$pid" && break
		if [ "$attempt" -lt 5 ] && grep -q 'Cannot register' "$log" 2>/dev/null; then
			hlog "ganesha ($name) lost a race at rpcbind (attempt $attempt); starting it again"
			mv -f "$log" "$log.$attempt"
			sleep "0.$((RANDOM % 9 + 1))"
			continue
		fi
		hlog "ganesha ($name) exited during start-up; log:"
		tail -n 20 "$log" "$state/stdout" >&2 2>/dev/null
		return 1
	done
	hlog "ganesha ($name) did not answer on $url within 20 s; log:"
	tail -n 20 "$log" >&2
	return 1
}

# origin_nlm_register NAME: name that origin's lock manager (NLM v4 on
# UDP, its NLM port) to this host's rpcbind again. rpc.statd passes a
# client's reboot notification (SM_NOTIFY) on to the NLM that rpcbind
# names, over UDP: another origin serving NLM on this host (tests side by
# side) may have taken the name, or removed it when it stopped.
# Also asks rpc.statd again to monitor this host (127.0.0.1) for the
# origins' NLM, as ganesha did at the first lock of a client of this host:
# every ganesha serving NLM that starts drops all of them (SM_UNMON_ALL).
origin_nlm_register() {
	local up v port h
	h=$(dirname "${BASH_SOURCE[0]}")
	up=$(_upper "$1")
	v=${up}_NLM_PORT_USED
	port=${!v:-}
	[ -n "$port" ] || return 1
	[ "$(python3 "$h/pmap_set.py" 100021 4 17 "$port" 2>/dev/null)" = 1 ] &&
		[ "$(python3 "$h/statd_mon.py" 127.0.0.1 "$(uname -n)" 2>/dev/null)" = 0 ]
}

origin_stop() {
	local up v pid
	up=$(_upper "$1")
	v=${up}_PID
	pid=${!v:-}
	[ -n "$pid" ] || return 0
	pid_stop "$pid" 15
	printf -v "$v" '%s' ""
	return 0
}

# store_start NAME PORT: a fleet store: Debian's PostgreSQL 15 server, in
# a scratch directory of its own, run as the postgres user on 127.0.0.1:PORT
# (and a socket in that directory), with a database "cachegw". Sets
# ${NAME^^}_CONNINFO (a libpq connection string for fleet=) and
# ${NAME^^}_STORE_PID, _STORE_DIR, _STORE_PORT, _STORE_LOG. store_stop NAME stops it (a fast shutdown: connected
# gateways do not hold it up); store_start NAME again starts it on the
# same data (the port it had).
STORE_PG_BIN=${CACHEGW_PG_BIN:-/usr/lib/postgresql/15/bin}
store_start() {
	local name=$1 port=${2:-} up dir v log pid i
	if [ $# -lt 1 ] || [[ ! $name =~ ^[A-Za-z][A-Za-z0-9_]*$ ]]; then
		hlog "usage: store_start NAME PORT"
		return 2
	fi
	if [ ! -x "$STORE_PG_BIN/postgres" ]; then
		hlog "no PostgreSQL server at $STORE_PG_BIN (apt-get install postgresql-15)"
		return 1
	fi
	up=$(_upper "$name")
	v=${up}_STORE_DIR
	dir=${!v:-}
	if [ -z "$dir" ]; then
		[ -n "$port" ] || { hlog "usage: store_start NAME PORT"; return 2; }
		dir=$(harness_tmpdir "store-$name") || return 1
		chown postgres: "$dir" || return 1
		if ! setpriv --reuid=postgres --regid=postgres --init-groups -- \
			"$STORE_PG_BIN/initdb" -D "$dir/data" -A trust -U postgres \
			-E UTF8 --no-sync >"$dir/initdb.log" 2>&1; then
			hlog "initdb failed:"
			tail -n 20 "$dir/initdb.log" >&2
			return 1
		fi
		printf -v "${up}_STORE_DIR" '%s' "$dir"
		printf -v "${up}_STORE_PORT" '%s' "$port"
	else
		v=${up}_STORE_PORT
		port=${!v}
	fi
	if _port_listening "$port"; then
		hlog "port $port already in use (another test run?)"
		return 1
	fi
	log=$dir/postgres.log
	setpriv --reuid=postgres --regid=postgres --init-groups -- \
		"$STORE_PG_BIN/postgres" -D "$dir/data" -p "$port" -k "$dir" \
		-c listen_addresses=127.0.0.1 -c max_connections=50 \
		-c shared_buffers=16MB -c log_min_messages=warning \
		</dev/null >>"$log" 2>&1 &
	pid=$!
	harness_register_pid "$pid"
	printf -v "${up}_STORE_PID" '%s' "$pid"
	printf -v "${up}_STORE_LOG" '%s' "$log"
	for ((i = 0; i < 200; i++)); do
		pid_alive "$pid" || break
		if "$STORE_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then
			if ! "$STORE_PG_BIN/psql" -qAt -h 127.0.0.1 -p "$port" -U postgres \
				-c "SELECT 1 FROM pg_database WHERE datname = 'cachegw'" |
				grep -q 1; then
				"$STORE_PG_BIN/psql" -q -h 127.0.0.1 -p "$port" -U postgres \
					-c "CREATE DATABASE cachegw" >/dev/null || return 1
			fi
			printf -v "${up}_CONNINFO" '%s' \
				"host=127.0.0.1 port=$port user=postgres dbname=cachegw"
			export "${up}_CONNINFO"
			return 0
		fi
		sleep 0.1
	done
	hlog "PostgreSQL ($name) did not start within 20 s; log:"
	tail -n 20 "$log" >&2
	return 1
}

store_stop() {
	local up v pid
	up=$(_upper "$1")
	v=${up}_STORE_PID
	pid=${!v:-}
	[ -n "$pid" ] || return 0
	# SIGINT: a fast shutdown (SIGTERM would wait for every client).
	kill -INT "$pid" 2>/dev/null
	pid_stop "$pid" 20
	printf -v "$v" '%s' ""
	return 0
}

# store_wipe NAME: the store replaced by an empty one (a database lost and
# made anew, or restored from another): stopped, its data made afresh,
# started again on the same port.
store_wipe() {
	local up v dir
	up=$(_upper "$1")
	v=${up}_STORE_DIR
	dir=${!v:-}
	[ -n "$dir" ] || { hlog "store_wipe: no store $1"; return 1; }
	store_stop "$1"
	rm -rf --one-file-system "$dir/data"
	setpriv --reuid=postgres --regid=postgres --init-groups -- \
		"$STORE_PG_BIN/initdb" -D "$dir/data" -A trust -U postgres \
		-E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || return 1
	store_start "$1"
}

# store_sql NAME SQL: run SQL in NAME's cachegw database; rows on stdout,
# fields separated by '|'.
store_sql() {
	local up v
	up=$(_upper "$1")
	v=${up}_STORE_PORT
	"$STORE_PG_BIN/psql" -qAt -h 127.0.0.1 -p "${!v}" -U postgres -d cachegw -c "$2"
}

# latproxy_start NAME RTT_MS NFS_PORT MNT_PORT [NLM_PORT]: a far origin: the
# project's latency proxy (tools/bench/latproxy.c) listening on NFS_PORT and
# MNT_PORT (and NLM_PORT, for an origin started with ORIGIN_NLM_PORT) in
# front of origin NAME (started), each direction delayed by
# RTT_MS / 2. Sets N_FAR_URL (the export's URL through the proxy) and
# N_FAR_PID (N=${NAME^^}); the proxy binary is $CACHEGW_LATPROXY or the one
# built next to $CACHEGW.
latproxy_start() {
	local name=$1 rtt=$2 nport=$3 mport=$4 lport=${5:-} up v bin out pid i onp omp olp
	up=$(_upper "$name")
	bin=${CACHEGW_LATPROXY:-$(dirname "$CACHEGW")/../tools/bench/cachegw-latproxy}
	[ -x "$bin" ] || bin=$(dirname "$CACHEGW")/../libexec/cachegw/cachegw-latproxy
	[ -x "$bin" ] || { hlog "no cachegw-latproxy next to $CACHEGW"; return 1; }
	v=${up}_NFS_PORT_USED
	onp=${!v:-}
	v=${up}_MNT_PORT_USED
	omp=${!v:-}
	v=${up}_NLM_PORT_USED
	olp=${!v:-}
	[ -n "$onp" ] || { hlog "latproxy_start: origin $name is not started"; return 1; }
	[ -z "$lport" ] || [ -n "$olp" ] || { hlog "latproxy_start: origin $name serves no NLM"; return 1; }
	out=$(harness_tmpdir "latproxy-$name")/out
	"$bin" --rtt "$rtt" "$nport:$onp" "$mport:$omp" ${lport:+"$lport:$olp"} >"$out" 2>&1 </dev/null &
	pid=$!
	harness_register_pid "$pid"
	printf -v "${up}_FAR_PID" '%s' "$pid"
	for ((i = 0; i < 100; i++)); do
		grep -q '^ready$' "$out" 2>/dev/null && break
		pid_alive "$pid" || { hlog "cachegw-latproxy exited: $(cat "$out")"; return 1; }
		sleep 0.05
	done
	grep -q '^ready$' "$out" || { hlog "cachegw-latproxy did not start: $(cat "$out")"; return 1; }
	printf -v "${up}_FAR_URL" '%s' \
		"nfs://127.0.0.1/$name?nfsport=$nport&mountport=$mport${lport:+&nlmport=$lport}"
}

# --------------------------------------------------------------------------
# Gateway

SANITIZER_PATTERN='ERROR: AddressSanitizer|runtime error:|LeakSanitizer|ERROR: ThreadSanitizer|WARNING: ThreadSanitizer|SUMMARY: UndefinedBehaviorSanitizer'

# proxy_start PORT SCRIPT [ARGS...]: run python3 SCRIPT PORT ORIGIN_NFS_PORT
# ARGS (an NFS proxy of tests/lib in front of the origin, its log in
# $HARNESS_TMP/proxy.log), registered for cleanup; wait until PORT listens.
# Sets PROXY_URL (the origin through it, the origin's mount port) and
# PROXY_PID. 1 if it does not listen within 10 s.
proxy_start() {
	local port=$1 script=$2 i
	shift 2
	python3 "$script" "$port" "$ORIGIN_NFS_PORT" "$@" \
		>"$HARNESS_TMP/proxy.log" 2>&1 </dev/null &
	PROXY_PID=$!
	harness_register_pid "$PROXY_PID"
	for ((i = 0; i < 100; i++)); do
		_port_listening "$port" && break
		sleep 0.1
	done
	PROXY_URL="nfs://127.0.0.1/origin?nfsport=$port&mountport=$ORIGIN_MNT_PORT"
	_port_listening "$port"
}

sanitizer_check() {
	if grep -Eq "$SANITIZER_PATTERN" "$1" 2>/dev/null; then
		hlog "sanitizer report in $1:"
		grep -E -A 30 "$SANITIZER_PATTERN" "$1" | head -n 60 >&2
		return 1
	fi
	return 0
}

# mount_gateway URL MNT [OPTS]: run the gateway in the foreground (-f) in the
# background, stderr to GW_LOG; wait up to 20 s for the mount.
mount_gateway() {
	local url=$1 mnt=$2 opts=${3:-} i logdir
	# CACHEGW_TEST_GW_OPTS: options added to every mount (tools/test's
	# write-back pass sets writeback).
	if [ -n "${CACHEGW_TEST_GW_OPTS:-}" ]; then
		opts=${opts:+$opts,}$CACHEGW_TEST_GW_OPTS
	fi
	logdir=$(_harness_base) || return 1
	GW_LOG=$(mktemp "$logdir/gateway.XXXXXX.log")
	GW_MNT=$mnt
	if [ -n "$opts" ]; then
		"$CACHEGW" "$url" "$mnt" -f -o "$opts" </dev/null >>"$GW_LOG" 2>&1 &
	else
		"$CACHEGW" "$url" "$mnt" -f </dev/null >>"$GW_LOG" 2>&1 &
	fi
	GW_PID=$!
	harness_register_mount "$mnt"
	harness_register_pid "$GW_PID"
	for ((i = 0; i < 200; i++)); do
		if is_mounted "$mnt"; then
			return 0
		fi
		if ! pid_alive "$GW_PID"; then
			wait "$GW_PID" 2>/dev/null
			hlog "gateway exited (status $?) before mounting; its log:"
			tail -n 20 "$GW_LOG" >&2
			return 1
		fi
		sleep 0.1
	done
	hlog "gateway did not mount $mnt within 20 s; its log:"
	tail -n 20 "$GW_LOG" >&2
	return 1
}

# unmount_gateway [MNT [PID [LOG]]] (defaults: the last mount_gateway).
# Fails if the unmount fails, the gateway does not exit within 20 s, exits
# non-zero, or its log holds a sanitizer report.
unmount_gateway() {
	local mnt=${1:-$GW_MNT} pid=${2:-$GW_PID} log=${3:-$GW_LOG} st=0 rc=0 i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		fusermount3 -u "$mnt" 2>/dev/null && break
		is_mounted "$mnt" || break
		sleep 0.5
	done
	if is_mounted "$mnt"; then
		hlog "fusermount3 -u $mnt failed"
		fusermount3 -u "$mnt" >&2
		rc=1
	fi
	if ! pid_wait_exit "$pid" 20; then
		hlog "gateway pid $pid still running 20 s after unmount"
		rc=1
		pid_stop "$pid" 5
	fi
	wait "$pid" 2>/dev/null
	st=$?
	if [ "$st" != 0 ] && [ "$st" != 127 ]; then
		hlog "gateway exited with status $st; log tail:"
		tail -n 20 "$log" >&2
		rc=1
	fi
	sanitizer_check "$log" || rc=1
	# The gateway's own leak and consistency checks at exit.
	if grep -q 'BUG:' "$log" 2>/dev/null; then
		hlog "the gateway reported a bug at exit: $(grep -m1 'BUG:' "$log")"
		rc=1
	fi
	return $rc
}

# --------------------------------------------------------------------------
# Test data

_rand() { head -c "$2" /dev/urandom >"$1"; }

fill_tree() {
	local d=$1 i
	mkdir -p "$d" || return 1
	(
		set -e
		cd "$d"
		umask 022
		: >empty
		printf 'x' >one_byte
		_rand edge_64k_minus_1 $((65536 - 1))
		_rand edge_64k $((65536))
		_rand edge_64k_plus_1 $((65536 + 1))
		_rand edge_1m_minus_1 $((1048576 - 1))
		_rand edge_1m $((1048576))
		_rand edge_1m_plus_1 $((1048576 + 1))
		_rand "$FILL_BIG" "$FILL_BIG_SIZE"
		# A sparse file: 3 MiB, data only in the middle.
		truncate -s 3M sparse.bin
		head -c 4096 /dev/urandom | dd of=sparse.bin bs=4096 seek=300 conv=notrunc status=none
		mkdir "$FILL_MANY"
		for ((i = 0; i < FILL_MANY_COUNT; i++)); do
			printf -v n '%s/f%03d' "$FILL_MANY" "$i"
			# sizes 1..300*7 bytes, distinct content
			printf '%0*d\n' $((i * 7)) "$i" >"$n"
		done
		mkdir -p nested/l1/l2/l3/l4
		printf 'level0\n' >nested/file0
		printf 'level1\n' >nested/l1/file1
		printf 'level2\n' >nested/l1/l2/file2
		printf 'level3\n' >nested/l1/l2/l3/file3
		printf 'level4 leaf\n' >nested/l1/l2/l3/l4/leaf
		mkdir nested/empty_dir
		ln -s one_byte link_to_file
		ln -s nested/l1 link_to_dir
		ln -s ../../../edge_64k nested/l1/l2/link_up
		ln -s does/not/exist dangling_link
		ln -s /etc/hostname absolute_link
		printf 'secret\n' >mode_0640
		chmod 0640 mode_0640
		printf '#!/bin/sh\necho hi\n' >mode_0755
		chmod 0755 mode_0755
		mkdir dir_0750
		printf 'inside\n' >dir_0750/file
		chmod 0750 dir_0750
		printf 'spaces\n' >'name with spaces.txt'
		mkdir 'dir with spaces'
		printf 'x\n' >'dir with spaces/file'
		printf 'utf8\n' >'ünïcödé-名前.txt'
	)
}

# tree_manifest DIR [--mtime]: one line per entry, sorted (C locale):
#   path<TAB>type<TAB>mode<TAB>size-or-target<TAB>sha256[<TAB>mtime]
# type f/d/l; size and sha256 for files, target for symlinks, '-' otherwise.
# Owners and atimes are left out; mtime (seconds) only with --mtime.
tree_manifest() {
	local dir=$1 with_mtime=${2:-} p y m s l t sum
	(
		cd "$dir" || exit 1
		find . -mindepth 1 -printf '%P\0%y\0%m\0%s\0%l\0%T@\0' |
			while IFS= read -r -d '' p && IFS= read -r -d '' y &&
				IFS= read -r -d '' m && IFS= read -r -d '' s &&
				IFS= read -r -d '' l && IFS= read -r -d '' t; do
				case $y in
				f)
					sum=$(sha256sum <"./$p") || sum='READ-ERROR  -'
					sum=${sum%% *}
					;;
				l) s=$l sum=- ;;
				*) s=- sum=- ;;
				esac
				if [ "$with_mtime" = --mtime ]; then
					printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$y" "$m" "$s" "$sum" "${t%%.*}"
				else
					printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$y" "$m" "$s" "$sum"
				fi
			done
	) | LC_ALL=C sort
}
# Exported so that it can run under timeout(1):
#   timeout 120 bash -c 'tree_manifest "$1"' _ "$mnt"
export -f tree_manifest

# harness_timeout SECS FUNCTION ARGS...: run an exported function (or any
# command) under timeout(1), which kills its whole process group.
harness_timeout() {
	local t=$1
	shift
	timeout -k 5 "$t" bash -c '"$@"' _ "$@"
}

# --------------------------------------------------------------------------
# Disk cache tests (tests/integration/2*.sh): the inspect tool, live
# counters, dropping the kernel's page cache.
#
#   cache_inspect ARGS...                run cachegw-inspect (found beside
#                                        $CACHEGW's build, or $CACHEGW_INSPECT)
#   gw_metric DIR NAME                   value of cachegw_NAME from the live
#                                        gateway on cache dir DIR ("" if none)
#   gw_wait_metric DIR NAME MIN [SECS]   wait (10 s) until NAME >= MIN
#   gw_serving DIR                       the pid serving DIR's mount now
#   gw_register_serving DIR              the serving process and its
#                                        supervisor (started by a takeover,
#                                        outside the harness) are the
#                                        harness's to stop
#   gw_wait_successor DIR OLD [SECS]     wait (20 s) until a pid other than
#                                        OLD serves DIR, and register it
#   gw_stop_supervised DIR MNT [LOG]     stop as systemctl does (SIGTERM to
#                                        the supervisor): both exit, MNT is
#                                        unmounted, LOG has no sanitizer
#                                        report; each miss said "FAIL: ..."
#                                        on stderr, and status 1
#   drop_caches                          sync; echo 3 > /proc/sys/vm/drop_caches

: "${CACHEGW_INSPECT:=$(dirname "$CACHEGW")/../tools/inspect/cachegw-inspect}"

harness_require_inspect() {
	if [ ! -x "$CACHEGW_INSPECT" ]; then
		echo "SKIP: $CACHEGW_INSPECT not built" >&2
		exit 77
	fi
}

cache_inspect() { timeout 30 "$CACHEGW_INSPECT" "$@"; }

gw_metric() {
	cache_inspect stats --cache-dir "$1" --prometheus 2>/dev/null |
		awk -v n="cachegw_$2" '$1 == n { print $2; exit }'
}

gw_serving() { gw_metric "$1" serving_pid; }

gw_register_serving() {
	local p s
	p=$(gw_serving "$1")
	s=$(gw_metric "$1" supervisor_pid)
	[ -n "$p" ] && harness_register_pid "$p"
	[ -n "$s" ] && [ "$s" != 0 ] && harness_register_pid "$s"
	return 0
}

gw_wait_successor() {
	local i p t=$(( ${3:-20} * 10 ))
	for ((i = 0; i < t; i++)); do
		p=$(gw_serving "$1")
		if [ -n "$p" ] && [ "$p" != "$2" ]; then
			gw_register_serving "$1"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

gw_stop_supervised() {
	local dir=$1 mnt=$2 log=${3:-} p s ok=0
	p=$(gw_serving "$dir")
	s=$(gw_metric "$dir" supervisor_pid)
	if [ -z "$s" ] || [ "$s" = 0 ] || ! kill -TERM "$s" 2>/dev/null; then
		echo "FAIL: no supervisor to stop" >&2
		return 1
	fi
	pid_wait_exit "$p" 30 || { echo "FAIL: the serving process $p did not exit after SIGTERM to its supervisor" >&2; ok=1; }
	pid_wait_exit "$s" 30 || { echo "FAIL: the supervisor $s did not exit after SIGTERM" >&2; ok=1; }
	is_mounted "$mnt" && { echo "FAIL: $mnt still mounted after SIGTERM" >&2; ok=1; }
	if [ -n "$log" ] && ! sanitizer_check "$log"; then
		echo "FAIL: sanitizer report in $log" >&2
		ok=1
	fi
	return $ok
}

gw_wait_metric() {
	local dir=$1 name=$2 min=$3 t=$(( ${4:-10} * 10 )) i v
	for ((i = 0; i < t; i++)); do
		v=$(gw_metric "$dir" "$name")
		[ -n "$v" ] && [ "$v" -ge "$min" ] && return 0
		sleep 0.1
	done
	return 1
}

drop_caches() {
	timeout 30 sync
	echo 3 >/proc/sys/vm/drop_caches
}
