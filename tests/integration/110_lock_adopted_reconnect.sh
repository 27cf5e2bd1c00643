#!/bin/bash
# A lock held through a supervised gateway across an upgrade in place (the successor takes its owner over without the owner's ranges) stays held, and its holder keeps working, when the gateway's connection to the origin's lock manager is made again without the origin restarting (the proxy in front of the origin's NLM port restarted: knfsd drops a connection idle for some minutes so): the successor asks the origin whether the owner's lock is still there (NLM TEST), finds it, and marks nothing lost. Before, it took every new connection for a restart, marked a taken-over owner lost, and the holder's next write failed with EIO while the origin still held its lock. A second gateway is refused the lock throughout, and gets it once the holder ends.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
. "$(dirname "$0")/../lib/locks.sh"
FAR_NFS_PORT=${CACHEGW_FAR_NFS_PORT:-$((REEXPORT_NFS_PORT + 20))}
FAR_MNT_PORT=${CACHEGW_FAR_MNT_PORT:-$((REEXPORT_MNT_PORT + 20))}
FAR_NLM_PORT=$((FAR_NFS_PORT + 2))

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
head -c 4096 /dev/urandom >"$data/f"
head -c 4096 /dev/urandom >"$data/g"
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
test_mount
mntB=$mnt
latproxy_start origin 0 "$FAR_NFS_PORT" "$FAR_MNT_PORT" "$FAR_NLM_PORT" ||
	{ echo "FAIL: the proxy did not start" >&2; exit 1; }
TEST_URL=$ORIGIN_FAR_URL test_mount "supervise,logfile=$work/gw.log"
opts="cache_dir=$cdir,supervise,logfile=$work/gw.log"


# The holder: a write lock of [0, 10) through the gateway; at $work/go a
# write into the file through the same descriptor ("wrote" or the errno's
# name); at $work/end it exits.
"$PY" - "$mnt/f" "$work" >"$work/holder" 2>&1 <<'PY' &
import errno, fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
print("locked", flush=True)
while not os.path.exists(sys.argv[2] + "/go"):
    time.sleep(0.05)
try:
    os.pwrite(fd, b"x" * 100, 1000)
    os.fsync(fd)
    print("wrote", flush=True)
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)), flush=True)
while not os.path.exists(sys.argv[2] + "/end"):
    time.sleep(0.05)
PY
holder=$!
harness_register_pid "$holder"
until_in "$work/holder" locked || { bad "no lock taken: $(cat "$work/holder")"; exit 1; }
[ "$(try "$mntB" posix w 0 1 f)" = EAGAIN ] || bad "B: f while A's holder has it: not EAGAIN"

step "upgrade in place: the successor takes the owner over"
gw_register_serving "$cdir"
p=$(gw_serving "$cdir")
"$CACHEGW" "$ORIGIN_FAR_URL" "$mnt" -o "$opts" </dev/null >>"$work/upgrade.err" 2>&1 ||
	bad "upgrade: exit $? ($(tail -n 1 "$work/upgrade.err"))"
gw_wait_successor "$cdir" "$p" || { bad "no successor of $p"; exit 1; }
[ "$(try "$mntB" posix w 0 1 f)" = EAGAIN ] || bad "B: f after A's upgrade: not EAGAIN"

step "the lock manager's connection made again, the origin not restarted"
# A lock call through the successor first: its connection is up (the one
# made after the proxy's restart is then a connection made again).
r=$(try "$mnt" posix w 0 1 g)
[ "$r" = ok ] || bad "A: g after the upgrade: '$r', not ok"
l0=$(gw_metric "$cdir" locks_lost_total)
pid_stop "$ORIGIN_FAR_PID" 5
latproxy_start origin 0 "$FAR_NFS_PORT" "$FAR_MNT_PORT" "$FAR_NLM_PORT" ||
	{ bad "the proxy did not start again"; exit 1; }
# Another owner's lock through A: its call waits for the new connection
# (and for a pass that asks again, which lock calls wait for).
r=$(try "$mnt" posix w 0 1 g)
[ "$r" = ok ] || bad "A: g after the new connection: '$r', not ok"
for ((i = 0; i < 300; i++)); do
	grep -q 'lock manager came back' "$work/gw.log" && break
	sleep 0.1
done
grep -q 'lock manager came back: .* 1 owners taken over still hold theirs' "$work/gw.log" ||
	bad "the successor did not ask whether the taken-over lock is still held: $(grep -a 'lock manager came back' "$work/gw.log" | tail -n 1)"
touch "$work/go"
until_in "$work/holder" wrote ||
	bad "the holder's write after the new connection: $(tail -n 1 "$work/holder"), not wrote (its lock is still at the origin)"
l1=$(gw_metric "$cdir" locks_lost_total)
[ "${l1:-0}" = "${l0:-0}" ] || bad "locks_lost_total moved ${l0:-0} -> ${l1:-0} without an origin restart"
[ "$(try "$mntB" posix w 0 1 f)" = EAGAIN ] || bad "B: f after A's new connection: not EAGAIN (the lock left the origin)"
grep -a 'locks:' "$work/gw.log" | tail -n 3 | sed 's/^/    /' >&2

step "the holder ends: B gets the lock"
touch "$work/end"
wait "$holder" 2>/dev/null
for ((i = 0; i < 60; i++)); do
	r=$(try "$mntB" posix w 0 1 f)
	[ "$r" = ok ] && break
	sleep 0.5
done
[ "$r" = ok ] || bad "B: f after A's holder ended: '$r', not ok"
cmp -s <(head -c 1100 "$data/f" | tail -c 100) <(printf 'x%.0s' $(seq 100)) ||
	bad "the holder's write is not at the origin"
gw_stop_supervised "$cdir" "$mnt" "$work/gw.log" || fail=1
exit $fail
