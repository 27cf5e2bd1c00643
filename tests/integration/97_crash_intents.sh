#!/bin/bash
# A crash between the origin's change and the caller's answer: a supervised gateway whose serving process is killed (SIGKILL) while it holds a change the origin has already done (fault injection CACHEGW_INJECT_CHANGE_HOLD: the window a real crash hits by chance) leaves the kernel to resend that request to the successor (FUSE_NOTIFY_RESEND), which finds the change done and must answer it as done (intent keys, gateway/keep/intent.c). For each of mkdir, an O_EXCL create, symlink, link, rename, unlink, rmdir and mkfifo, one after the other, each in a new serving process: the caller's one call returns 0 (a repeat at the origin alone would fail with EEXIST or ENOENT), and the origin and the mount show the change made once; so does uid 1001's O_EXCL create, but one whose name became another user's 0600 file before the repeat fails with EEXIST (the repeat takes only the file it made: its EXCLUSIVE verifier). Then an O_EXCL create of a name someone else made at the origin still fails with EEXIST; and an upgrade in place of a mount whose cache_dir path is longer than a socket address (108 bytes) takes over (exit 0, a new serving process).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
harness_require_inspect
if ! python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: a successor needs FUSE_NOTIFY_RESEND (Linux >= 6.9), this is $(uname -r)" >&2
	exit 77
fi

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
mkdir -p "$data/t"
echo target >"$data/t/gone"
echo moved >"$data/t/from"
mkdir "$data/t/empty"
mkdir -m 1777 "$data/pub"
test_origin "$data"
# Each serving process holds the first change it has made at the origin
# (the successor's repeat of the dead one's fails there, and is not held)
# until $work/release exists, which it never does while the test kills.
# Four crashes per mount: a fifth within 60 s makes the supervisor give up
# (its crash-loop limit).
n=0
mount_holding() {
	CACHEGW_INJECT_CHANGE_HOLD=1:1 CACHEGW_INJECT_RELEASE=$work/release \
		test_mount supervise,allow_other
	gw_register_serving "$cdir"
	n=0
}
mount_holding

# op.py OP ARGS: one system call; prints "ok" or the errno's name.
cat >"$work/op.py" <<'PY'
import errno, os, sys
op, a = sys.argv[1], sys.argv[2:]
try:
    if op == "mkdir": os.mkdir(a[0])
    elif op == "creat_excl": os.close(os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif op == "symlink": os.symlink(a[0], a[1])
    elif op == "link": os.link(a[0], a[1])
    elif op == "rename": os.rename(a[0], a[1])
    elif op == "unlink": os.unlink(a[0])
    elif op == "rmdir": os.rmdir(a[0])
    elif op == "mkfifo": os.mkfifo(a[0])
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY

# wait_successor OLD: a new serving pid within 20 s (registered).
wait_successor() { gw_wait_successor "$cdir" "$1"; }

# crash_during OP ARGS...: run OP through the mount (as AS=(setpriv ...),
# if set); once its change is done at the origin and held, run the
# function between (if set), SIGKILL the serving process; OP must return
# $want (0: "ok", the default).
AS=() want=ok between=
crash_during() {
	local op=$1 pid p out
	shift
	n=$((n + 1))
	timeout 60 "${AS[@]}" "$PY" "$work/op.py" "$op" "$@" >"$work/op.$n" 2>&1 &
	pid=$!
	if ! log_wait "$GW_LOG" 'done at the origin, held' "$n"; then
		bad "$op: the gateway held no change ($(tail -n 3 "$GW_LOG" | tr '\n' ' '))"
		wait "$pid"
		return 1
	fi
	[ -z "$between" ] || "$between"
	p=$(gw_serving "$cdir")
	kill -KILL "$p" 2>/dev/null || bad "$op: no serving process '$p' to kill"
	wait_successor "$p" || bad "$op: the supervisor started no successor"
	gw_register_serving "$cdir"
	wait "$pid"
	out=$(cat "$work/op.$n")
	[ "$out" = "$want" ] || bad "$op $*: the caller got '$out' after the crash, not '$want'"
}

step "mkdir"
crash_during mkdir "$mnt/t/d1"
[ -d "$data/t/d1" ] || bad "mkdir: no t/d1 at the origin"
[ -d "$mnt/t/d1" ] || bad "mkdir: no t/d1 through the mount"

step "O_EXCL create"
crash_during creat_excl "$mnt/t/f1"
[ -f "$data/t/f1" ] || bad "create: no t/f1 at the origin"
[ -f "$mnt/t/f1" ] || bad "create: no t/f1 through the mount"

step "symlink"
crash_during symlink gone "$mnt/t/l1"
[ "$(readlink "$data/t/l1")" = gone ] || bad "symlink: t/l1 at the origin is '$(readlink "$data/t/l1")'"
[ "$(cat "$mnt/t/l1" 2>&1)" = target ] || bad "symlink: t/l1 through the mount does not read as its target"

step "link"
crash_during link "$mnt/t/f1" "$mnt/t/h1"
[ "$(stat -c %i "$data/t/f1")" = "$(stat -c %i "$data/t/h1" 2>/dev/null)" ] || bad "link: t/h1 is not t/f1 at the origin"
[ "$(stat -c %h "$mnt/t/f1")" = 2 ] || bad "link: t/f1 through the mount has $(stat -c %h "$mnt/t/f1") links, not 2"

step "a new mount (the supervisor's limit of deaths)"
unmount_gateway || bad "the first mount did not stop cleanly"
mount_holding

step "rename"
crash_during rename "$mnt/t/from" "$mnt/t/to"
[ ! -e "$data/t/from" ] && [ "$(cat "$data/t/to" 2>&1)" = moved ] || bad "rename: the origin has from/to wrong"
[ ! -e "$mnt/t/from" ] && [ "$(cat "$mnt/t/to" 2>&1)" = moved ] || bad "rename: the mount has from/to wrong"

step "unlink"
crash_during unlink "$mnt/t/h1"
[ ! -e "$data/t/h1" ] || bad "unlink: t/h1 still at the origin"
[ ! -e "$mnt/t/h1" ] || bad "unlink: t/h1 still through the mount"
[ "$(stat -c %h "$mnt/t/f1")" = 1 ] || bad "unlink: t/f1 has $(stat -c %h "$mnt/t/f1") links, not 1"

step "rmdir"
crash_during rmdir "$mnt/t/empty"
[ ! -e "$data/t/empty" ] || bad "rmdir: t/empty still at the origin"
[ ! -e "$mnt/t/empty" ] || bad "rmdir: t/empty still through the mount"

step "mkfifo"
crash_during mkfifo "$mnt/t/p1"
[ -p "$data/t/p1" ] || bad "mkfifo: no fifo t/p1 at the origin"
[ -p "$mnt/t/p1" ] || bad "mkfifo: no fifo t/p1 through the mount"

# A repeated O_EXCL create opens only the file it made: not one that took
# the name meanwhile (EEXIST, as a local file system answers), and that
# one only as any open would.
step "a new mount (the supervisor's limit of deaths)"
unmount_gateway || bad "the second mount did not stop cleanly"
mount_holding
test_require_cmd setpriv
AS=(setpriv --reuid 1001 --regid 1001 --clear-groups --)

step "O_EXCL create as uid 1001"
crash_during creat_excl "$mnt/pub/mine"
[ "$(stat -c '%u %a' "$data/pub/mine" 2>&1)" = "1001 644" ] || bad "O_EXCL create as 1001: pub/mine at the origin is '$(stat -c '%u %a' "$data/pub/mine" 2>&1)', want '1001 644'"

step "O_EXCL create whose name is someone else's 0600 file by the repeat"
theirs() {
	rm -f "$data/pub/x1"
	echo "uid 1000's secret" >"$data/pub/x1"
	chown 1000:1000 "$data/pub/x1"
	chmod 0600 "$data/pub/x1"
}
between=theirs want=EEXIST crash_during creat_excl "$mnt/pub/x1"
[ "$(stat -c '%u %a' "$data/pub/x1")" = "1000 600" ] && [ "$(cat "$data/pub/x1")" = "uid 1000's secret" ] ||
	bad "pub/x1 at the origin changed: $(stat -c '%u %a' "$data/pub/x1") '$(cat "$data/pub/x1")'"
AS=()

# A key is for the request that was cut off, not for the name: someone
# else's file under a name still fails an O_EXCL create.
step "an O_EXCL create of a name made at the origin"
touch "$work/release"
echo other >"$data/t/theirs"
out=$("$PY" "$work/op.py" creat_excl "$mnt/t/theirs")
[ "$out" = EEXIST ] || bad "an O_EXCL create of an existing name got '$out', not EEXIST"
out=$("$PY" "$work/op.py" creat_excl "$mnt/t/f1")
[ "$out" = EEXIST ] || bad "an O_EXCL create of t/f1 (made before the crash) got '$out', not EEXIST"

sanitizer_check "$GW_LOG" || bad "sanitizer report in the gateway's log"

# The control socket of a cache_dir whose path is longer than a socket
# address holds (108 bytes) is reached through /proc/self/fd: so must the
# upgrading process's probe, or it takes the cache for another gateway's
# and exits 1 ("in use").
step "an upgrade in place with a cache_dir path of more than 108 bytes"
long=$(harness_tmpdir long)/$(printf '%060d' 0)/$(printf '%060d' 1)
mkdir -p "$long"
lmnt=$(harness_tmpdir long-mnt)
mount_gateway "$ORIGIN_URL" "$lmnt" "cache_dir=$long,supervise" || bad "mount with cache_dir=$long"
gw_register_serving "$long"
p=$(gw_serving "$long")
[ -n "$p" ] || bad "cachegw-inspect does not reach the gateway of the long cache_dir"
out=$("$CACHEGW" "$ORIGIN_URL" "$lmnt" -o "cache_dir=$long,supervise" </dev/null 2>&1)
rc=$?
[ $rc = 0 ] || bad "the upgrade with a ${#long}-byte cache_dir path: exit $rc: $out"
wait_successor "$p" || bad "no process took over the mount of the long cache_dir"
gw_register_serving "$long"
[ "$(cat "$lmnt/t/to" 2>&1)" = moved ] || bad "the mount of the long cache_dir does not read after the upgrade"
unmount_gateway "$lmnt" || bad "the mount of the long cache_dir did not stop cleanly"
exit $fail
