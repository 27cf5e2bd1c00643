#!/bin/bash
# Locks across restarts without a supervisor (doc/locks.md "Restarts"): a gateway A holding fcntl and flock locks is killed with SIGKILL and started again cold on the same cache_dir: it tells the origin (NSM reboot notification) and the origin drops what A held, so a second gateway B takes those locks (it could not before A came back), and A's new locks hold; the notification names the host, so B's own lock goes too (ganesha tells NLM clients by address).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
L=$(dirname "$0")/../lib/locker.py

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
for f in f g h k; do
	head -c 4096 /dev/urandom >"$data/$f"
done
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
test_mount
mntA=$mnt pidA=$GW_PID logA=$GW_LOG cdirA=$cdir
test_mount
mntB=$mnt pidB=$GW_PID logB=$GW_LOG cdirB=$cdir

try() {
	MODE=try timeout 60 "$PY" "$L" "$2" "$3" "$4" "$5" "$1/$6" 2>&1
}
until_in() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -qx "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
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
# until_try WANT MNT KIND TYPE START LEN FILE: try (at most 15 s) until the
# outcome is WANT; prints the last outcome.
until_try() {
	local want=$1 got i
	shift
	for ((i = 0; i < 30; i++)); do
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
mount_gateway "$ORIGIN_URL" "$mntA" "cache_dir=$cdirA" || { bad "A did not mount again"; exit 1; }
pidA=$GW_PID logA2=$GW_LOG
t0=$(date +%s%N)
got=$(until_try ok "$mntB" posix w 0 1 f)
expect "B: f after A's cold start" ok "$got"
# rpc.statd passes the notification on to the NLM that rpcbind names for
# UDP on this host: another test's origin serving NLM at the same time
# (tests side by side) may have taken that name.
nlm_udp=$(rpcinfo -p 127.0.0.1 2>/dev/null | awk '$1 == 100021 && $2 == 4 && $3 == "udp" { print $4; exit }')
[ "$got" = ok ] || [ "$nlm_udp" = "$ORIGIN_NLM_PORT_USED" ] ||
	echo "(rpcbind names NLM on UDP port ${nlm_udp:-none}, not this origin's $ORIGIN_NLM_PORT_USED: another origin on this host took it)" >&2
echo "B got f $(( ($(date +%s%N) - t0) / 1000000 )) ms after A mounted again" >&2
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

GW_PID=$pidA GW_LOG=$logA2 gw_check
GW_PID=$pidB GW_LOG=$logB gw_check
unmount_gateway "$mntB" "$pidB" "$logB" || bad "B: unmount"
unmount_gateway "$mntA" "$pidA" "$logA2" || bad "A: unmount"
exit $fail
