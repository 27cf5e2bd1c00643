#!/bin/bash
# An upgrade connects to the origin before the serving process stops: with every connection's set-up 3 s long (the proxy holds each FSINFO reply, which a mount asks once per connection), running the start command again leaves the clients paused (cachegw_takeover_pause_us) for less than that set-up, not for it; the new process serves the same bytes over the connections it made, and its supervisor keeps none of them (its descriptors are the /dev/fuse and state ones only).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
if ! python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: takeover needs FUSE_NOTIFY_RESEND (Linux >= 6.9), this is $(uname -r)" >&2
	exit 77
fi
SLOW_MS=3000
data=$(harness_tmpdir origin-data)
mkdir -p "$data/d"
for i in 1 2 3; do head -c $((i * 100000 + 7)) /dev/urandom >"$data/d/f$i"; done
test_origin "$data"
test_proxy hostile_proxy.py --slow-connect "$SLOW_MS"
work=$(harness_tmpdir work)
test_mount "supervise,logfile=$work/gw.log"
opts="cache_dir=$cdir,supervise,logfile=$work/gw.log${CACHEGW_TEST_GW_OPTS:+,$CACHEGW_TEST_GW_OPTS}"
cmp -s "$mnt/d/f1" "$data/d/f1" || bad "reading through the gateway"
old=$(gw_serving "$cdir")
"$CACHEGW" "$TEST_URL" "$mnt" -o "$opts" </dev/null 3<&- 4<&- 2>"$work/upgrade.err" ||
	{ bad "the upgrade: exit $? ($(tail -1 "$work/upgrade.err"))"; exit 1; }
new=$(gw_serving "$cdir")
[ -n "$new" ] && [ "$new" != "$old" ] || bad "no new serving process after the upgrade (old $old, now '$new')"
gw_register_serving "$cdir"
pause=$(gw_metric "$cdir" takeover_pause_us)
echo "  the upgrade's pause: ${pause:-?} us (each connection's set-up: ${SLOW_MS} ms)" >&2
[ -n "$pause" ] && [ "$pause" -lt $((SLOW_MS * 1000)) ] ||
	bad "the upgrade paused the clients ${pause:-?} us: the new process set up its origin connections inside the pause"
for i in 1 2 3; do
	cmp -s "$mnt/d/f$i" "$data/d/f$i" || bad "d/f$i through the new process differs from the origin's"
done
# The new supervisor (the upgrade's process) passed the connections it
# made to its child: it holds no socket to the origin itself.
sup=$(gw_metric "$cdir" supervisor_pid)
if [ -n "$sup" ] && [ "$sup" != 0 ]; then
	n=$(ls -l "/proc/$sup/fd" 2>/dev/null | grep -c 'socket:')
	ss -tnp 2>/dev/null | grep "pid=$sup," | grep -q ":$((ORIGIN_NFS_PORT + 5)) " &&
		bad "the supervisor $sup keeps a connection to the origin: $(ss -tnp | grep "pid=$sup," | head -2)"
	echo "  supervisor $sup: $n sockets" >&2
else
	bad "no supervisor after the upgrade"
fi
# The end as systemctl stop does it: SIGTERM to the supervisor.
gw_stop_supervised "$cdir" "$mnt" "$work/gw.log" || fail=1
exit $fail
