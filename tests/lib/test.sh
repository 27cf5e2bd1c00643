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

# ---- the watchdog ----
# A test that hangs is killed by its runner's timeout(1) (tools/test: 300
# s), and a process waiting in a FUSE request the gateway never answers
# cannot even be killed before: the test said nothing of where it hung
# (35_concurrency under TSan, once in CI: "no output at all"). Shortly
# before that timeout, test_hang_report writes into the test's own log
# what its processes wait in.

# test_hang_report WHY: to stderr, for this test's processes (its
# children's tree and every pid the harness registered): ps with wait
# channels, the requests waiting in each of its FUSE mounts' connections,
# the kernel stacks of those in D state, the gateways' threads (kernel
# stacks by count, gdb's backtraces if gdb is installed) and the last
# lines of the gateways' logs.
test_hang_report() {
	local p t m x dev list pids=() mounts=() seen=" " exe
	_thr_tree() {
		local c
		case $seen in *" $1 "*) return ;; esac
		[ -d "/proc/$1" ] || return
		seen+="$1 "
		pids+=("$1")
		for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
			_thr_tree "$c"
		done
	}
	_thr_tree "$_TEST_PID"
	# The registry, not the arrays: the watchdog is a copy of the test
	# from before its first mount.
	if [ -f "$_HARNESS_TMP/.registry" ]; then
		while IFS=$'\t' read -r t p x; do
			case $t in
			pid) [ "$(pid_starttime "$p")" = "$x" ] && _thr_tree "$p" ;;
			mount) mounts+=("$p") ;;
			esac
		done <"$_HARNESS_TMP/.registry"
	fi
	{
		echo "=== watchdog: $1"
		list=$(IFS=,; echo "${pids[*]}")
		ps -o pid,ppid,stat,wchan:28,etime,args --forest -p "$list" 2>&1 | cut -c1-240
		for m in "${mounts[@]}"; do
			dev=$(awk -v m="$(_mnt_escape "$(realpath -m "$m")")" '$5 == m { print $3 }' /proc/self/mountinfo)
			[ -n "$dev" ] || continue
			# fusectl, where mounted: requests sent and not answered.
			[ -r "/sys/fs/fuse/connections/${dev#*:}/waiting" ] || continue
			echo "--- FUSE connection ${dev#*:} ($m): $(cat "/sys/fs/fuse/connections/${dev#*:}/waiting") requests waiting"
		done
		for p in "${pids[@]}"; do
			exe=$(readlink "/proc/$p/exe" 2>/dev/null)
			case ${exe##*/} in
			cachegw* | ganesha*)
				echo "--- ${exe##*/} $p: kernel stacks of its threads, by count"
				for t in /proc/"$p"/task/*; do
					awk '{ print $2 }' "$t/stack" 2>/dev/null | head -n 8 | paste -sd' '
				done | sort | uniq -c | sort -rn | sed 's/^/    /'
				;;
			*)
				for t in /proc/"$p"/task/*; do
					[ "$(awk '{ print $3 }' "$t/stat" 2>/dev/null)" = D ] || continue
					echo "--- $p (D): $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-160)"
					sed 's/^/    /' "$t/stack" 2>/dev/null | head -n 16
				done
				;;
			esac
		done
		for p in "${pids[@]}"; do
			exe=$(readlink "/proc/$p/exe" 2>/dev/null)
			case ${exe##*/} in cachegw*) ;; *) continue ;; esac
			if ! command -v gdb >/dev/null; then
				echo "--- gateway $p: no gdb for its backtraces (apt-get install gdb)"
				continue
			fi
			echo "--- gateway $p: gdb backtraces"
			timeout 60 gdb -p "$p" -batch -nx -ex 'set pagination off' \
				-ex 'thread apply all bt 16' 2>/dev/null |
				grep -E '^(Thread|#)' | cut -c1-200 | sed 's/^/    /'
		done
		for p in "$_HARNESS_TMP"/gateway.*.log; do
			[ -f "$p" ] || continue
			echo "--- last lines of $p"
			tail -n 15 "$p" | sed 's/^/    /'
		done
		echo "=== watchdog: end"
	} >&2
}

# The runner's timeout: the DURATION of the timeout(1) that runs this test
# (tools/test and /tmp/runit.sh run `timeout [-k N] SECS env ... bash
# TEST`), in whole seconds; nothing if there is none.
_test_runner_timeout() {
	local -a a
	local i d
	[ "$(cat "/proc/$PPID/comm" 2>/dev/null)" = timeout ] || return 0
	mapfile -d '' -t a <"/proc/$PPID/cmdline" 2>/dev/null || return 0
	for ((i = 1; i < ${#a[@]}; i++)); do
		case ${a[i]} in
		-k | -s | --kill-after | --signal) i=$((i + 1)) ;;
		-*) ;;
		*)
			d=${a[i]}
			case $d in
			*m) d=$(( ${d%m} * 60 )) ;;
			*h) d=$(( ${d%h} * 3600 )) ;;
			*d) d=$(( ${d%d} * 86400 )) ;;
			*) d=${d%s}; d=${d%%.*} ;;
			esac
			[[ $d =~ ^[0-9]+$ ]] && [ "$d" -gt 0 ] && echo "$d"
			return 0
			;;
		esac
	done
}

# CACHEGW_TEST_WATCHDOG=SECS reports after SECS (0: never); by default a
# sixth of the runner's timeout before it (at least 20 s, at most 60:
# gdb needs the time), none without a runner's timeout.
_test_watchdog_start() {
	local secs=${CACHEGW_TEST_WATCHDOG:-} t m
	if [ -z "$secs" ]; then
		t=$(_test_runner_timeout)
		[ -n "$t" ] || return 0
		m=$((t / 6))
		[ "$m" -ge 20 ] || m=20
		[ "$m" -le 60 ] || m=60
		secs=$((t - m))
	fi
	[ "$secs" -gt 0 ] 2>/dev/null || return 0
	(
		trap - EXIT INT TERM
		end=$((SECONDS + secs))
		while [ "$SECONDS" -lt "$end" ]; do
			sleep 2
			kill -0 "$_TEST_PID" 2>/dev/null || exit 0
		done
		test_hang_report "the test has run ${secs} s, its runner's timeout is near"
	) </dev/null &
	harness_register_pid "$!"
}
_TEST_PID=$$
_test_watchdog_start
