#!/bin/bash
# Origin errors surface as errors, never hangs or crashes: a file deleted at the origin while open through the gateway fails to read; a deleted file fails to open (actimeo=0); the gateway keeps serving.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
head -c $((1048576 + 4097)) /dev/urandom >"$data/victim_open"
head -c 65536 /dev/urandom >"$data/victim_gone"
head -c $((3 * 1048576)) /dev/urandom >"$data/survivor"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
work=$(harness_tmpdir work)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,actimeo=0" || exit 1

# expect_error NAME CMD...: CMD must fail, within 20 s, not by a signal.
expect_error() {
	local name=$1 rc
	shift
	timeout -k 5 20 "$@" >"$work/out" 2>"$work/err"
	rc=$?
	case $rc in
	0) bad "$name: succeeded ($(stat -c %s "$work/out") bytes)" ;;
	124 | 137) bad "$name: hung (no answer within 20 s)" ;;
	*)
		if [ $rc -ge 128 ]; then
			bad "$name: killed by signal $((rc - 128))"
		else
			echo "  $name: failed as expected: $(head -n 1 "$work/err")"
		fi
		;;
	esac
}

# 1. Open through the mount (no data read yet: ganesha holds no fd for it),
#    delete at the origin, read through the open descriptor.  Ganesha then
#    cannot open the handle (stale) and the READ must fail.
exec 3<"$mnt/victim_open" || { bad "open victim_open"; exit 1; }
rm -f "$data/victim_open"
expect_error "read of a file deleted at the origin while open" cat <&3
exec 3<&-

# 2. A fresh open of a file deleted at the origin (attributes not cached).
timeout 20 stat "$mnt/victim_gone" >/dev/null || bad "stat victim_gone before deletion"
rm -f "$data/victim_gone"
expect_error "open of a file deleted at the origin" cat "$mnt/victim_gone"

# 3. The gateway is alive and still serves the right bytes.
timeout 60 cmp "$mnt/survivor" "$data/survivor" || bad "survivor differs or unreadable after the errors"
pid_alive "$GW_PID" || bad "gateway died"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
