# shellcheck shell=bash
# tests/lib/test.sh - the start every integration test shares:
#
#   set -uo pipefail
#   . "$(dirname "$0")/../lib/test.sh" [inspect|origin]
#
# sources the harness (harness/origin.sh: origins, mounts, ports, temp dirs, the
# registry that cleans up), cleans up at exit (a test with a cleanup of its
# own sets its own EXIT trap and calls harness_cleanup from it), skips
# (exit 77) where the test cannot run (not root, no gateway binary; with
# "inspect", no cachegw-inspect; with "origin", the gateway is not needed),
# and gives the failure counter (bad, from tests/lib/common.sh, which the
# guest tests share) and the shared steps below.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap harness_cleanup EXIT
harness_require_root
[ "${1:-}" = origin ] || harness_require_gateway
[ "${1:-}" != inspect ] || harness_require_inspect

# The python the tests' helper scripts run with.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# test_origin DIR: export DIR as the origin "origin" on the test's ports (sets
# ORIGIN_URL, ORIGIN_PID, ...); the test ends (exit 1) if it does not start.
test_origin() {
	origin_start origin "$1" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" ||
		{ echo "FAIL: the origin did not start" >&2; exit 1; }
}

# test_origin_random NAME SIZE: start the origin (test_origin) on a new data
# dir $data holding one file NAME of SIZE random bytes.
test_origin_random() {
	data=$(harness_tmpdir origin-data)
	head -c "$2" /dev/urandom >"$data/$1"
	test_origin "$data"
}

# test_mount [-n] [OPTS]: mount the gateway on the origin (on $TEST_URL if
# set: see test_proxy) at a new temp dir
# $mnt with a new cache dir $cdir, options cache_dir=$cdir[,OPTS] (with -n,
# $cdir does not exist yet: the gateway makes it); the test ends (exit 1)
# if it does not mount.
test_mount() {
	local sub=
	if [ "${1:-}" = -n ]; then
		sub=/c
		shift
	fi
	mnt=$(harness_tmpdir mnt)
	cdir=$(harness_tmpdir cache)$sub
	mount_gateway "${TEST_URL:-$ORIGIN_URL}" "$mnt" "cache_dir=$cdir${1:+,$1}" ||
		{ echo "FAIL: mount with cache_dir=$cdir${1:+,$1} failed (log: $GW_LOG)" >&2; exit 1; }
}

# test_proxy SCRIPT [ARGS]: start tests/lib/SCRIPT (a proxy that rewrites
# the origin's replies) in front of the origin, on the origin's NFS port + 5;
# test_mount then mounts through it (TEST_URL=$PROXY_URL). The test ends
# (exit 1) if that port is in use or the proxy does not listen.
test_proxy() {
	local pport=$((ORIGIN_NFS_PORT + 5)) script=$1
	shift
	if _port_listening "$pport"; then
		echo "port $pport in use" >&2
		exit 1
	fi
	proxy_start "$pport" "$(dirname "${BASH_SOURCE[0]}")/$script" "$@" ||
		{ echo "FAIL: the proxy did not listen" >&2; exit 1; }
	TEST_URL=$PROXY_URL
}

# test_require_fhclient: skip the test (exit 77) unless the re-export test
# client $FHCLIENT (default: the build's tests/reexport/fhclient) is built.
test_require_fhclient() {
	: "${FHCLIENT:=$(dirname "$CACHEGW")/../tests/reexport/fhclient}"
	[ -x "$FHCLIENT" ] || { echo "SKIP: test client $FHCLIENT not built (tests/reexport)" >&2; exit 77; }
}

# test_reexport_cleanup: the EXIT trap for a test that re-exports the mount:
# the re-exporter holds the FUSE mount busy, so it is stopped before the
# harness unmounts anything.
test_reexport_cleanup() {
	origin_stop reexp
	harness_cleanup
}

# test_reexport: re-export the gateway's mount $mnt through a second ganesha
# "reexp" on the re-export ports (sets REEXP_URL, REEXP_PID, ...; see
# test_reexport_cleanup); the test ends (exit 1) if it does not start.
# The re-export as doc/reexport.md gives it: fsid_type = Major64 keeps the
# FUSE mount's device minor (which another mount can take across a
# restart) out of ganesha's handles.
test_reexport() {
	GANESHA_FSAL_OPTS="fsid_type = Major64;" \
		origin_start reexp "$mnt" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" ||
		{ echo "FAIL: the re-exporter did not start" >&2; exit 1; }
}

# gw_check: end the test (exit 1) if the gateway (GW_PID) died, with its
# log's sanitizer report and tail (everything after would only fail too).
gw_check() {
	pid_alive "$GW_PID" && return 0
	echo "FAIL: the gateway (pid $GW_PID) died; its log ($GW_LOG):" >&2
	sanitizer_check "$GW_LOG" || true
	tail -n 15 "$GW_LOG" >&2
	exit 1
}

# py_script FILE: write to FILE the python script on stdin after a common
# head: `import errno, os, sys` and res(f), which calls f and gives "ok",
# or the name of the errno of the OSError it raised.
py_script() {
	{
		cat <<-'PY'
			import errno, os, sys
			def res(f):
			    try:
			        f()
			        return "ok"
			    except OSError as e:
			        return errno.errorcode[e.errno]
		PY
		cat
	} >"$1"
}
