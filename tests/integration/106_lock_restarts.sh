#!/bin/bash
# Locks across restarts without a supervisor (doc/locks.md "Restarts"): a gateway A holding fcntl and flock locks is killed with SIGKILL and started again cold on the same cache_dir: it tells the origin (NSM reboot notification) and the origin drops what A held, so a second gateway B takes those locks (it could not before A came back), and A's new locks hold; the notification names the host, so B's own lock goes too (ganesha tells NLM clients by address). The origin restarted while A holds two locks and sleeps (SIGSTOP), B taking one of them meanwhile: A takes the other again (B is refused it; locks_reclaimed_total), the one B took is lost (locks_lost_total, logged): its holder's next write and lock fail with EIO, the other holder's succeed; every lock is let go at the holders' close. With offline= and the origin lost (SIGSTOP), fcntl, flock and a blocking F_SETLKW fail at once with ENOLCK.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
. "$(dirname "$0")/../lib/locks.sh"
trap 'kill -CONT "${ORIGIN_PID:-0}" 2>/dev/null; harness_cleanup' EXIT

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
for f in f g h k m n; do
	head -c 4096 /dev/urandom >"$data/$f"
done
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
test_mount
mntA=$mnt pidA=$GW_PID logA=$GW_LOG cdirA=$cdir
test_mount
mntB=$mnt pidB=$GW_PID logB=$GW_LOG cdirB=$cdir

# hold NAME MNT KIND TYPE START LEN FILE: a process holding a lock (its
# output in $work/NAME, its pid in $held).
hold() {
	local name=$1
	MODE=hold "$PY" "$L" "$3" "$4" "$5" "$6" "$2/$7" >"$work/$name" 2>&1 &
	held=$!
	harness_register_pid "$held"
	until_in "$work/$name" locked ||
		bad "$name: no lock taken: $(cat "$work/$name")"
}
expect() { # WHAT WANT GOT
	[ "$3" = "$2" ] || bad "$1: expected '$2', got '$3'"
}
# until_try WANT MNT KIND TYPE START LEN FILE: try (at most 30 s) until the
# outcome is WANT; prints the last outcome. (rpc.statd passes a
# notification on at once, and asks again 5 s later when it got no
# answer.)
until_try() {
	local want=$1 got i
	shift
	for ((i = 0; i < 60; i++)); do
		got=$(try "$@")
		[ "$got" = "$want" ] && break
		sleep 0.5
	done
	echo "$got"
}

step "A killed with SIGKILL while holding a lock, started again cold"
hold h1 "$mntA" posix w 0 0 f
h1=$held
hold h2 "$mntA" flock w 0 0 g
h2=$held
hold hk "$mntB" posix w 0 0 k
hk=$held
expect "B: f locked through A" EAGAIN "$(try "$mntB" posix w 0 1 f)"
expect "B: g flocked through A" EAGAIN "$(try "$mntB" flock w 0 0 g)"
kill -KILL "$pidA"
pid_wait_exit "$pidA" 10 || bad "A survived SIGKILL?"
wait "$pidA" 2>/dev/null
kill -KILL "$h1" "$h2"
wait "$h1" "$h2" 2>/dev/null
fusermount3 -u "$mntA" 2>/dev/null || fusermount3 -u -z "$mntA" 2>/dev/null || umount -l "$mntA"
expect "B: f while A is dead (its lock stays at the origin)" EAGAIN "$(try "$mntB" posix w 0 1 f)"
origin_nlm_register origin || bad "cannot name the origin's NLM to rpcbind"
# Every ganesha that starts on this host (other tests') takes the name
# away again: named again and again until A's notification went through.
( while :; do origin_nlm_register origin; sleep 0.2; done ) &
namer=$!
harness_register_pid "$namer"
mount_gateway "$ORIGIN_URL" "$mntA" "cache_dir=$cdirA" || { bad "A did not mount again"; exit 1; }
pidA=$GW_PID logA2=$GW_LOG
t0=$(date +%s%N)
got=$(until_try ok "$mntB" posix w 0 1 f)
expect "B: f after A's cold start" ok "$got"
# rpc.statd passes the notification on to the NLM that rpcbind names for
# UDP on this host: another test's origin serving NLM at the same time
# (tests side by side) may have taken that name again meanwhile.
nlm_udp=$(rpcinfo -p 127.0.0.1 2>/dev/null | awk '$1 == 100021 && $2 == 4 && $3 == "udp" { print $4; exit }')
[ "$got" = ok ] || [ "$nlm_udp" = "$ORIGIN_NLM_PORT_USED" ] ||
	echo "(rpcbind names NLM on UDP port ${nlm_udp:-none}, not this origin's $ORIGIN_NLM_PORT_USED: another origin on this host took it)" >&2
echo "B got f $(( ($(date +%s%N) - t0) / 1000000 )) ms after A mounted again" >&2
kill "$namer"
wait "$namer" 2>/dev/null
expect "B: g after A's cold start" ok "$(until_try ok "$mntB" flock w 0 0 g)"
grep -E 'lock client|started cold|status monitor' "$logA2" >&2; grep -iE 'nsm|notify|statd' "$ORIGIN_LOG" | tail -5 >&2
# The notification names a host: ganesha (as knfsd) tells NLM clients
# apart by address, so B's lock on k, of the same host, went too
# (doc/locks.md "Limits").
expect "A: k, which B held (dropped with A's by the notification)" ok "$(try "$mntA" posix w 0 1 k)"
hold h3 "$mntA" posix w 0 0 h
h3=$held
expect "B: h locked through A's new instance" EAGAIN "$(try "$mntB" posix w 0 1 h)"
kill -TERM "$h3" "$hk"
wait "$h3" "$hk" 2>/dev/null

step "the origin restarted: A takes its locks again; one another client took meanwhile is lost"
# An op holder: holds a write lock on FILE, and on SIGUSR1 writes a byte
# and asks for a lock again, printing each outcome.
cat >"$work/op.py" <<'PY'
import errno, fcntl, os, signal, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0)
print("locked", flush=True)
def op(sig, frm):
    for name, f in (("write", lambda: os.pwrite(fd, b"x", 0)),
                    ("lock", lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0))):
        try:
            f()
            print(name, "ok", flush=True)
        except OSError as e:
            print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
signal.signal(signal.SIGUSR1, op)
while True:
    time.sleep(1)
PY
ophold() { # NAME FILE
	"$PY" "$work/op.py" "$mntA/$2" >"$work/$1" 2>&1 &
	held=$!
	harness_register_pid "$held"
	until_in "$work/$1" locked || bad "$1: no lock taken: $(cat "$work/$1")"
}
ophold o1 m
o1=$held
ophold o2 n
o2=$held
expect "B: m locked through A" EAGAIN "$(try "$mntB" posix w 0 1 m)"
expect "B: n locked through A" EAGAIN "$(try "$mntB" posix w 0 1 n)"
# A sleeps through the restart, so that B takes n before A can ask for
# it again (the test's origin has no grace period).
kill -STOP "$pidA"
origin_stop origin
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
hold hn "$mntB" posix w 0 0 n
hn=$held
kill -CONT "$pidA"
gw_wait_metric "$cdirA" locks_reclaimed_total 1 30 ||
	bad "A: locks_reclaimed_total $(gw_metric "$cdirA" locks_reclaimed_total), not >= 1 in 30 s"
gw_wait_metric "$cdirA" locks_lost_total 1 30 ||
	bad "A: locks_lost_total $(gw_metric "$cdirA" locks_lost_total), not >= 1 in 30 s"
expect "B: m, reclaimed by A" EAGAIN "$(try "$mntB" posix w 0 1 m)"
kill -USR1 "$o1" "$o2"
until_in "$work/o1" "lock ok" || bad "o1 (reclaimed): $(cat "$work/o1")"
until_in "$work/o2" "lock EIO" || bad "o2 (lost): $(cat "$work/o2")"
grep -x "write .*" "$work/o1" "$work/o2" >&2
grep -E 'taken again|lost' "$logA2" >&2
kill -TERM "$o1" "$o2" "$hn"
wait "$o1" "$o2" "$hn" 2>/dev/null
expect "B: n after the holders closed" ok "$(try "$mntB" posix w 0 1 n)"
expect "B: m after the holders closed" ok "$(try "$mntB" posix w 0 1 m)"
[ "$(gw_metric "$cdirA" lock_owners)" = 0 ] ||
	bad "A: lock_owners $(gw_metric "$cdirA" lock_owners) with every holder gone"

step "offline=: with the origin lost, a lock call fails at once (ENOLCK)"
test_mount offline=2
mntC=$mnt pidC=$GW_PID logC=$GW_LOG cdirC=$cdir
cat "$mntC/h" >/dev/null || bad "C: read of h"
expect "C: a lock with the origin there" ok "$(try "$mntC" posix w 0 1 h)"
kill -STOP "$ORIGIN_PID"
gw_wait_metric "$cdirC" origin_lost 1 30 || bad "C did not call the origin lost within 30 s"
t0=$(date +%s%N)
expect "C: F_SETLK, origin lost" ENOLCK "$(try "$mntC" posix w 0 1 h)"
expect "C: flock, origin lost" ENOLCK "$(try "$mntC" flock w 0 0 h)"
MODE=wait timeout 20 "$PY" "$L" posix w 0 0 "$mntC/h" >"$work/cw" 2>&1
expect "C: F_SETLKW, origin lost" "waiting ENOLCK" "$(tr '\n' ' ' <"$work/cw" | sed 's/ $//')"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "three lock calls with the origin lost: $ms ms" >&2
[ "$ms" -lt 5000 ] || bad "lock calls with the origin lost took $ms ms, not at once"
kill -CONT "$ORIGIN_PID"
GW_PID=$pidC GW_LOG=$logC gw_check
unmount_gateway "$mntC" "$pidC" "$logC" || bad "C: unmount"

GW_PID=$pidA GW_LOG=$logA2 gw_check
GW_PID=$pidB GW_LOG=$logB gw_check
unmount_gateway "$mntB" "$pidB" "$logB" || bad "B: unmount"
unmount_gateway "$mntA" "$pidA" "$logA2" || bad "A: unmount"
exit $fail
