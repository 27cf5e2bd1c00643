#!/bin/bash
# Bad input (URL, export, unreachable server, mountpoint, option, arguments): non-zero exit within 30 s, a one-line stderr message naming the problem, nothing mounted.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

# Messages other than the usage text must be exactly this many lines.
MAX_LINES=1

data=$(harness_tmpdir origin-data)
printf 'x\n' >"$data/file"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
work=$(harness_tmpdir work)
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
harness_register_mount "$mnt"
regular="$work/regular_file"
: >"$regular"

# A port nothing listens on (for the unreachable server).
dead=
for p in 20499 20498 20497 20496 20495; do
	ss -Hltn "sport = :$p" | grep -q . || { dead=$p; break; }
done
[ -n "$dead" ] || { echo "no free port for the unreachable case" >&2; exit 1; }

Q="nfsport=$ORIGIN_NFS_PORT&mountport=$ORIGIN_MNT_PORT"
good_url=$ORIGIN_URL

# check NAME KEYWORD_REGEX ARGS...
check() {
	local name=$1 kw=$2 t0 t1 rc lines
	shift 2
	t0=$(date +%s)
	timeout -k 5 30 "$CACHEGW" "$@" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
	t1=$(date +%s)
	if [ $rc = 0 ]; then
		bad "$name: exit 0 (args: $*)"
	elif [ $rc = 124 ] || [ $rc = 137 ]; then
		bad "$name: no exit within 30 s"
	elif [ $rc -ge 128 ]; then
		bad "$name: killed by signal $((rc - 128))"
	fi
	if ! grep -Eqi -- "$kw" "$work/err"; then
		bad "$name: stderr does not match /$kw/: $(head -c 400 "$work/err")"
	fi
	lines=$(grep -c . "$work/err")
	if [ "$kw" != usage ] && [ "$lines" -gt $MAX_LINES ]; then
		bad "$name: $lines lines on stderr, want $MAX_LINES:"
		head -n 10 "$work/err" >&2
	fi
	sanitizer_check "$work/err" || bad "$name: sanitizer report"
	if is_mounted "$mnt"; then
		bad "$name: $mnt left mounted"
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	m=$(_mounts_below "$HARNESS_TMP")
	[ -z "$m" ] || bad "$name: left mounts: $m"
	printf '  %-28s exit %3s in %2ss: %s\n' "$name" "$rc" "$((t1 - t0))" "$(head -n 1 "$work/err")"
}

for fg in "" "-f"; do
	echo "mode: ${fg:-daemon}"
	# shellcheck disable=SC2086 # $fg is empty or -f
	{
	check "bad URL (http)" 'invalid URL' "http://x/y" "$mnt" $fg -o "cache_dir=$cdir"
	check "bad URL (empty nfs://)" 'invalid URL' "nfs://" "$mnt" $fg -o "cache_dir=$cdir"
	check "bad URL (garbage)" 'invalid URL' "not a url" "$mnt" $fg -o "cache_dir=$cdir"
	check "missing export" 'export' "nfs://127.0.0.1/nonexistent?$Q" "$mnt" $fg -o "cache_dir=$cdir"
	check "unreachable server" 'connect|unreachable' \
		"nfs://127.0.0.1/origin?nfsport=$dead&mountport=$dead" "$mnt" $fg -o "cache_dir=$cdir"
	check "mountpoint missing" 'mount ?point' "$good_url" "$work/no/such/dir" $fg -o "cache_dir=$cdir"
	check "mountpoint is a file" 'not a directory' "$good_url" "$regular" $fg -o "cache_dir=$cdir"
	check "unknown option" 'unknown option' "$good_url" "$mnt" $fg -o "cache_dir=$cdir,bogus=1"
	check "drain_timeout=0" 'drain_timeout' "$good_url" "$mnt" $fg -o "cache_dir=$cdir,drain_timeout=0"
	check "dirty_max=4k" 'dirty_max' "$good_url" "$mnt" $fg -o "cache_dir=$cdir,writeback,dirty_max=4k"
	check "dirty_max without writeback" 'dirty_max.*writeback' "$good_url" "$mnt" $fg -o "cache_dir=$cdir,dirty_max=64M"
	[ -n "$fg" ] && check "logfile in no directory" 'logfile' "$good_url" "$mnt" $fg -o "cache_dir=$cdir,logfile=$work/no/such/dir/log"
	check "no arguments" 'usage' $fg
	check "no mountpoint" 'usage' "$good_url" $fg
	}
done

exit $fail
