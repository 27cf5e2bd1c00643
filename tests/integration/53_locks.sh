#!/bin/bash
# Locks hold beyond one gateway: two gateways (A, B) on one origin serving NLM; fcntl locks conflict both ways by range and type, F_GETLK through one reports the other's lock (type, start, length), an explicit unlock frees the range; OFD locks conflict across gateways and between two open files of one process; flock conflicts across gateways; a holder killed with SIGKILL (fcntl and flock) frees its lock at the origin; a blocking F_SETLKW through B waits and gets the lock once A's holder unlocks (then A sees it held); a waiter killed while waiting leaves nothing at the origin; local_lock= keeps the locks it names in the host's kernel (all: neither conflicts with A's; flock: flock does not, fcntl does); a gateway told an NLM port where nothing listens answers ENOLCK at once; a supervised gateway D upgraded in place, and its serving process killed with SIGKILL, while a process holds a lock through it: the lock still holds at the origin, and the holder's close after the takeover lets it go (the successor knows the owner).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
. "$(dirname "$0")/../lib/locks.sh"

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
for f in f g h i k w x y z; do
	head -c 4096 /dev/urandom >"$data/$f"
done
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
test_mount
mntA=$mnt pidA=$GW_PID logA=$GW_LOG cdirA=$cdir
test_mount
mntB=$mnt pidB=$GW_PID logB=$GW_LOG cdirB=$cdir
test_mount local_lock=all
mntC=$mnt pidC=$GW_PID logC=$GW_LOG
test_mount local_lock=flock
mntE=$mnt pidE=$GW_PID logE=$GW_LOG
# F: told a port where no lock manager listens.
TEST_URL=${ORIGIN_URL/nlmport=*/nlmport=$((ORIGIN_NFS_PORT + 4))}
test_mount
unset TEST_URL
mntF=$mnt pidF=$GW_PID logF=$GW_LOG

# hold NAME MODE MNT KIND TYPE START LEN FILE: a process holding (MODE
# hold) or waiting for (MODE wait) a lock, its output in $work/NAME; its
# pid in $held.
hold() {
	local name=$1
	MODE=$2 "$PY" "$L" "$4" "$5" "$6" "$7" "$3/$8" >"$work/$name" 2>&1 &
	held=$!
	harness_register_pid "$held"
	if [ "$2" = hold ]; then
		until_in "$work/$name" locked ||
			{ bad "$name: no lock taken: $(cat "$work/$name")"; lock_logs; }
	else
		until_in "$work/$name" waiting ||
			bad "$name: did not start: $(cat "$work/$name")"
	fi
}
# lock_logs: what the gateways and the origin said of locks (a failure's
# cause: ENOLCK is the origin's "no locks", e.g. its rpc.statd gone).
lock_logs() {
	grep -h 'lock' "$logA" "$logB" >&2
	grep -iE 'nsm|statd' "$ORIGIN_LOG" | tail -n 4 >&2
}
expect() { # WHAT WANT GOT
	[ "$3" = "$2" ] || bad "$1: expected '$2', got '$3'"
}

step "no lock manager at the origin's port: ENOLCK at once"
expect "F: fcntl lock" ENOLCK "$(try "$mntF" posix w 0 1 f)"
expect "F: flock" ENOLCK "$(try "$mntF" flock w 0 0 f)"
grep -q 'cannot reach the lock manager' "$logF" || bad "F did not say why"

step "fcntl: A's write lock [0,100) seen through B"
hold h1 hold "$mntA" posix w 0 100 f
h1=$held
expect "B: write lock inside A's range" EAGAIN "$(try "$mntB" posix w 50 10 f)"
expect "B: read lock inside A's write lock" EAGAIN "$(try "$mntB" posix r 0 10 f)"
expect "B: write lock past A's range" ok "$(try "$mntB" posix w 100 100 f)"
expect "B: F_GETLK inside A's range" "w 0 100" "$(getlk "$mntB" posix w 10 5 f)"
expect "B: F_GETLK past A's range" unlocked "$(getlk "$mntB" posix w 100 5 f)"
expect "A (the holder's mount), another process" EAGAIN "$(try "$mntA" posix w 99 1 f)"
expect "C (local_lock=all): fcntl not forwarded" ok "$(try "$mntC" posix w 50 10 f)"
expect "E (local_lock=flock): fcntl forwarded" EAGAIN "$(try "$mntE" posix w 50 10 f)"

step "fcntl: B's read lock [200,300) seen through A"
hold h2 hold "$mntB" posix r 200 100 f
h2=$held
expect "A: write lock inside B's read lock" EAGAIN "$(try "$mntA" posix w 250 10 f)"
expect "A: read lock inside B's read lock" ok "$(try "$mntA" posix r 250 10 f)"
expect "A: F_GETLK inside B's range" "r 200 100" "$(getlk "$mntA" posix w 299 1 f)"

step "fcntl: an unlock frees the range"
kill -USR1 "$h1"
until_in "$work/h1" unlocked || bad "h1 did not unlock"
expect "B: write lock after A's unlock" ok "$(try "$mntB" posix w 50 10 f)"
kill -TERM "$h1" "$h2"
wait "$h1" "$h2" 2>/dev/null
expect "A: the whole file after both holders ended" ok "$(try "$mntA" posix w 0 0 f)"

step "OFD locks"
hold h3 hold "$mntA" ofd w 0 0 g
h3=$held
expect "B: OFD lock on A's OFD-locked file" EAGAIN "$(try "$mntB" ofd w 10 10 g)"
expect "B: fcntl lock on A's OFD-locked file" EAGAIN "$(try "$mntB" posix r 10 10 g)"
expect "B: F_OFD_GETLK" "w 0 0" "$(getlk "$mntB" ofd r 100 1 g)"
expect "A: a second open file of one process" EAGAIN \
	"$(MODE=two timeout 60 "$PY" "$L" ofd w 0 10 "$mntA/i" 2>&1)"
kill -TERM "$h3"
wait "$h3" 2>/dev/null
expect "B: OFD lock after A's holder closed" ok "$(try "$mntB" ofd w 10 10 g)"

step "flock, and a holder killed with SIGKILL"
hold h4 hold "$mntA" flock w 0 0 h
h4=$held
expect "B: flock LOCK_EX|LOCK_NB" EAGAIN "$(try "$mntB" flock w 0 0 h)"
expect "B: flock LOCK_SH|LOCK_NB" EAGAIN "$(try "$mntB" flock r 0 0 h)"
expect "C (local_lock=all): flock not forwarded" ok "$(try "$mntC" flock w 0 0 h)"
expect "E (local_lock=flock): flock not forwarded" ok "$(try "$mntE" flock w 0 0 h)"
kill -KILL "$h4"
wait "$h4" 2>/dev/null
expect "B: flock after A's holder was killed" ok "$(try "$mntB" flock w 0 0 h)"
hold h5 hold "$mntA" posix w 0 0 k
h5=$held
expect "B: fcntl lock while A's holder lives" EAGAIN "$(try "$mntB" posix w 0 1 k)"
kill -KILL "$h5"
wait "$h5" 2>/dev/null
expect "B: fcntl lock after A's holder was killed" ok "$(try "$mntB" posix w 0 1 k)"

step "a blocking F_SETLKW waits and gets the lock"
hold h6 hold "$mntA" posix w 0 0 w
h6=$held
hold w1 wait "$mntB" posix w 0 0 w
w1=$held
sleep 1
grep -qx got "$work/w1" && bad "B's waiter got a lock A holds"
kill -USR1 "$h6"
until_in "$work/h6" unlocked || bad "h6 did not unlock"
until_in "$work/w1" got ||
	bad "B's waiter never got the lock: $(cat "$work/w1"); B's log: $(tail -n 5 "$logB")"
expect "A: while B's waiter holds it" EAGAIN "$(try "$mntA" posix w 0 1 w)"
kill -TERM "$w1" "$h6"
wait "$w1" "$h6" 2>/dev/null
expect "A: after B's waiter ended" ok "$(try "$mntA" posix w 0 1 w)"

step "a waiter killed while waiting leaves nothing behind"
hold h7 hold "$mntA" posix w 0 0 x
h7=$held
hold w2 wait "$mntB" posix w 0 0 x
w2=$held
sleep 0.5
kill -KILL "$w2"
wait "$w2" 2>/dev/null
grep -qx got "$work/w2" && bad "the killed waiter got the lock"
kill -USR1 "$h7"
until_in "$work/h7" unlocked || bad "h7 did not unlock"
# Longer than the waiters' pause, in case a dead waiter were still asked.
sleep 2
expect "A: after the killed waiter and the unlock" ok "$(try "$mntA" posix w 0 0 x)"
expect "B: after the killed waiter and the unlock" ok "$(try "$mntB" posix w 0 0 x)"
kill -TERM "$h7"
wait "$h7" 2>/dev/null

step "the counters"
m() { gw_metric "$1" "$2"; }
[ "$(m "$cdirB" locks_waited_total)" -ge 2 ] ||
	bad "B: locks_waited_total $(m "$cdirB" locks_waited_total), not >= 2"
[ "$(m "$cdirB" locks_interrupted_total)" -ge 1 ] ||
	bad "B: locks_interrupted_total $(m "$cdirB" locks_interrupted_total), not >= 1"
[ "$(m "$cdirB" locks_denied_total)" -ge 5 ] ||
	bad "B: locks_denied_total $(m "$cdirB" locks_denied_total), not >= 5"
[ "$(m "$cdirA" locks_released_total)" -ge 5 ] ||
	bad "A: locks_released_total $(m "$cdirA" locks_released_total), not >= 5"
[ "$(m "$cdirA" origin_lock_calls_total)" -gt "$(m "$cdirA" locks_granted_total)" ] ||
	bad "A: origin_lock_calls_total $(m "$cdirA" origin_lock_calls_total) not above locks_granted_total"
[ "$(m "$cdirA" lock_owners)" = 0 ] ||
	bad "A: lock_owners $(m "$cdirA" lock_owners) with every holder gone"

step "a takeover keeps the owners: an upgrade, then a SIGKILL"
if python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	test_mount "supervise,logfile=$work/gwD.log"
	mntD=$mnt cdirD=$cdir
	gw_register_serving "$cdirD"
	for f in y z; do
		hold "h$f" hold "$mntD" posix w 0 0 $f
		hf=$held
		expect "B: $f locked through D" EAGAIN "$(try "$mntB" posix w 0 1 $f)"
		p=$(gw_serving "$cdirD")
		if [ $f = y ]; then
			"$CACHEGW" "$ORIGIN_URL" "$mntD" -o "cache_dir=$cdirD,supervise,logfile=$work/gwD.log" \
				</dev/null 2>>"$work/upgrade.err" || bad "upgrade of D: $(tail -1 "$work/upgrade.err")"
		else
			kill -KILL "$p"
		fi
		gw_wait_successor "$cdirD" "$p" || bad "D ($f): no successor"
		expect "B: $f after D's takeover" EAGAIN "$(try "$mntB" posix w 0 1 $f)"
		kill -TERM "$hf"
		wait "$hf" 2>/dev/null
		expect "B: $f once its holder closed on D's successor" ok \
			"$(try "$mntB" posix w 0 1 $f)"
	done
	grep -q 'lock owners at the origin taken over' "$work/gwD.log" ||
		bad "D's successor did not say it took lock owners over"
	sup=$(gw_metric "$cdirD" supervisor_pid)
	unmount_gateway "$mntD" "$sup" "$work/gwD.log" || bad "D: unmount"
else
	echo "(no takeover before Linux 6.9: skipped)" >&2
fi

GW_PID=$pidA GW_LOG=$logA gw_check
GW_PID=$pidB GW_LOG=$logB gw_check
unmount_gateway "$mntF" "$pidF" "$logF" || bad "F: unmount"
unmount_gateway "$mntE" "$pidE" "$logE" || bad "E: unmount"
unmount_gateway "$mntC" "$pidC" "$logC" || bad "C: unmount"
unmount_gateway "$mntB" "$pidB" "$logB" || bad "B: unmount"
unmount_gateway "$mntA" "$pidA" "$logA" || bad "A: unmount"
exit $fail
