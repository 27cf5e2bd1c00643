#!/bin/bash
# Guest test: takeover on a kernel without FUSE_NOTIFY_RESEND (Debian 12's 6.1): what happens is said exactly, and the safest behaviour chosen. An upgrade in place is refused with one line naming the missing kernel feature, exit 1, and the old process serves on (same pid, the mount reads right); with supervise, a SIGKILL of the serving process while nothing is in flight is survived: the supervisor starts a successor, which says in the log that requests in flight would stay unanswered, and serves new requests byte for byte. Skips (77) on Linux >= 6.9, where test 96 (host) and 90 (guest) cover takeovers.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start inspect
if python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: this kernel ($(uname -r)) has FUSE_NOTIFY_RESEND; tests 96 and 90 cover it" >&2
	exit 77
fi

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
head -c 300001 /dev/urandom >"$data/f" || exit 1
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
opts="cache_dir=$cdir,supervise,logfile=$work/gw.log"
mount_gateway "$ORIGIN_URL" "$mnt" "$opts" || exit 1
cmp -s "$data/f" "$mnt/f" || bad "the mount does not read right"
serving() { gw_metric "$cdir" serving_pid; }

step "an upgrade in place is refused"
p=$(serving)
out=$("$CACHEGW" "$ORIGIN_URL" "$mnt" -o "$opts" </dev/null 2>&1)
rc=$?
[ $rc = 1 ] || bad "upgrade on $(uname -r): exit $rc, not 1 ($out)"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || bad "upgrade refusal: not one line: $out"
case $out in *FUSE_NOTIFY_RESEND*6.9*) ;; *) bad "upgrade refusal does not name the kernel feature: $out" ;; esac
[ "$(serving)" = "$p" ] || bad "after the refusal another process serves ($(serving), was $p)"
cmp -s "$data/f" "$mnt/f" || bad "after the refusal the mount does not read right"

step "a SIGKILL with nothing in flight: a successor serves"
kill -KILL "$p"
for ((i = 0; i < 100; i++)); do
	q=$(serving)
	[ -n "$q" ] && [ "$q" != "$p" ] && break
	sleep 0.2
done
[ -n "$q" ] && [ "$q" != "$p" ] || bad "no successor after the SIGKILL"
harness_register_pid "$q"
echo 3 >/proc/sys/vm/drop_caches
cmp -s "$data/f" "$mnt/f" || bad "the successor does not read right"
grep -q 'no FUSE_NOTIFY_RESEND' "$work/gw.log" || bad "the log does not say what happens to requests in flight: $(grep supervise "$work/gw.log")"
grep -q 'kernel did not take FUSE_NOTIFY_RESEND' "$work/gw.log" || bad "the successor does not say the kernel refused the resend"

step "SIGTERM to the supervisor"
s=$(gw_metric "$cdir" supervisor_pid)
kill -TERM "$s"
pid_wait_exit "$q" 30 || bad "the serving process did not exit"
pid_wait_exit "$s" 30 || bad "the supervisor did not exit"
is_mounted "$mnt" && bad "still mounted"
exit $fail
