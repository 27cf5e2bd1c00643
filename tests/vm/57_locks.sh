#!/bin/bash
# Guest test, the users' case for locks: knfsd as the origin (its own network namespace, with lockd and rpc.statd) and a kernel NFSv3 client mounting it directly (with locks); a gateway A on it and a second gateway B. fcntl and flock locks taken through A conflict with the direct client's both ways (the kernel client takes flock as a whole-file NLM lock), F_GETLK through A reports the direct client's range, a holder killed frees its lock at the origin; a lock of a local process of the origin host (knfsd maps NLM onto its own locks) holds against A; the origin's knfsd restarted (lockd forgets every lock, then a grace period) while a process holds a lock through A: A reclaims it in the grace period (locks_reclaimed_total, the log says so, none lost) and the direct client is refused it. knfsd re-exports A: an NFSv4.2 client's fcntl and flock locks conflict with the direct client and with a process on B, and its holder's death frees them; on Linux >= 6.9 (A supervised) such a lock holds at the origin across an upgrade in place of A and a SIGKILL of A's serving process, and is freed after them; an NFSv3 client of the re-export (lockd) is answered what FUSE lets knfsd's lockd have: ENOLCK (doc/locks.md says why); with local_lock=posix a v3 client's lock is taken, holds against processes on that gateway's mount and is not seen at the origin.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start
trap 'vm_cleanup; knfsd_origin_stop' EXIT
L=$(dirname "$0")/../lib/locker.py
PY=${PY:-python3}

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
for f in f g h k w x y; do
	head -c 4096 /dev/urandom >"$data/$f"
done
chmod 0666 "$data"/*
step "knfsd origin (lockd, rpc.statd) in network namespace $KNFSD_ORIGIN_NS"
knfsd_origin_start "$data" 7501 || exit 1
# The guest's own knfsd, lockd and rpc.statd: the direct client's lockd
# (GRANTED callbacks) and later the re-export, without delegations as
# doc/reexport.md says (6.12's knfsd gives write delegations, and a
# client holding one keeps its locks to itself: none reach the server).
echo 0 >/proc/sys/fs/leases-enable
knfsd_start || exit 1
mntA=$(harness_tmpdir mntA)
mntB=$(harness_tmpdir mntB)
cdirA=$(harness_tmpdir cacheA)
# A takeover (upgrade in place, a crash under the supervisor) needs
# FUSE_NOTIFY_RESEND (Linux >= 6.9): on such a kernel A is supervised and
# a lock is held across both.
TAKEOVER=
python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)' && TAKEOVER=1
optsA="cache_dir=$cdirA,allow_other${TAKEOVER:+,supervise}"
mount_gateway "$KNFSD_ORIGIN_URL" "$mntA" "$optsA" || exit 1
logA=$GW_LOG
mount_gateway "$KNFSD_ORIGIN_URL" "$mntB" "cache_dir=$(harness_tmpdir cacheB),allow_other" || exit 1
direct=$(harness_tmpdir direct)
nfs_mount "$KNFSD_ORIGIN_ADDR:$data" "$direct" "vers=3,mountport=$KNFSD_ORIGIN_MNT_PORT,actimeo=0" || exit 1

# try PATH KIND TYPE START LEN: a lock taken without waiting, then let go:
# ok or the errno's name.
try() { MODE=try timeout 120 "$PY" "$L" "$2" "$3" "$4" "$5" "$1" 2>&1; }
getlk() { MODE=getlk timeout 120 "$PY" "$L" "$2" "$3" "$4" "$5" "$1" 2>&1; }
expect() { # WHAT WANT GOT
	[ "$3" = "$2" ] || bad "$1: '$3', want '$2'"
}
# hold NAME PATH KIND TYPE START LEN: a process holding the lock ($held),
# its lines in $work/NAME.
hold() {
	local i
	MODE=hold "$PY" "$L" "$3" "$4" "$5" "$6" "$2" >"$work/$1" 2>&1 &
	held=$!
	harness_register_pid "$held"
	for ((i = 0; i < 1200; i++)); do
		grep -qx locked "$work/$1" 2>/dev/null && return 0
		pid_alive "$held" || break
		sleep 0.1
	done
	bad "$1: no lock on $2: $(cat "$work/$1")"
	return 1
}
release() { # PID: kill the holder, wait for it
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
# until_try WANT PATH KIND TYPE START LEN: within 30 s (a lock let go by a
# killed holder reaches the origin after its close).
until_try() {
	local i r
	for ((i = 0; i < 60; i++)); do
		r=$(try "$2" "$3" "$4" "$5" "$6")
		[ "$r" = "$1" ] && { echo "$r"; return 0; }
		sleep 0.5
	done
	echo "$r"
}

# lockd's grace period after its start (nlm_grace_period=3, lib.sh).
sleep 4

step "fcntl: gateway A against the direct client"
hold a1 "$mntA/f" posix w 0 10 || exit 1
expect "direct: f [5,15) while A holds [0,10)" EAGAIN "$(try "$direct/f" posix w 5 10)"
expect "direct: f [100,110) beside A's" ok "$(try "$direct/f" posix w 100 10)"
expect "direct: F_GETLK of f" "w 0 10" "$(getlk "$direct/f" posix w 0 0)"
release "$held"
expect "direct: f after A's holder was killed" ok "$(until_try ok "$direct/f" posix w 0 10)"
hold d1 "$direct/g" posix w 10 20 || exit 1
expect "A: g [0,15) while the direct client holds [10,30)" EAGAIN "$(try "$mntA/g" posix w 0 15)"
expect "A: a read lock of g [30,40)" ok "$(try "$mntA/g" posix r 30 10)"
expect "A: F_GETLK of g" "w 10 20" "$(getlk "$mntA/g" posix w 0 0)"
release "$held"
expect "A: g after the direct holder was killed" ok "$(until_try ok "$mntA/g" posix w 0 15)"

step "flock: gateway A against the direct client"
hold a2 "$mntA/h" flock w 0 0 || exit 1
expect "direct: flock of h while A holds one" EAGAIN "$(try "$direct/h" flock w 0 0)"
expect "direct: fcntl of h while A holds a flock" EAGAIN "$(try "$direct/h" posix w 0 1)"
release "$held"
expect "direct: flock of h after A's holder was killed" ok "$(until_try ok "$direct/h" flock w 0 0)"
hold d2 "$direct/h" flock w 0 0 || exit 1
expect "A: flock of h while the direct client holds one" EAGAIN "$(try "$mntA/h" flock w 0 0)"
release "$held"

step "a local process of the origin host"
hold o1 "$data/k" posix w 0 0 || exit 1
expect "A: k while a process at the origin holds it" EAGAIN "$(try "$mntA/k" posix w 0 1)"
release "$held"
expect "A: k after it let go" ok "$(until_try ok "$mntA/k" posix w 0 1)"

step "the origin's knfsd restarted while a process holds a lock through A"
# lockd forgets every lock when nfsd stops, and starts a grace period
# (nlm_grace_period=3) when it starts again: A reclaims its lock then.
hold r1 "$mntA/k" posix w 0 10 || exit 1
hr=$held
r0=$(gw_metric "$cdirA" locks_reclaimed_total)
l0=$(gw_metric "$cdirA" locks_lost_total)
knfsd_origin_exec timeout 60 rpc.nfsd 0 || bad "rpc.nfsd 0 at the origin"
knfsd_origin_exec timeout 60 rpc.nfsd -N 4 "$KNFSD_ORIGIN_THREADS" || bad "rpc.nfsd at the origin"
gw_wait_metric "$cdirA" locks_reclaimed_total $((${r0:-0} + 1)) 60 ||
	bad "A reclaimed no lock after the origin's restart (locks_reclaimed_total ${r0:-0} -> $(gw_metric "$cdirA" locks_reclaimed_total))"
info "A's log: $(grep -a "lock manager came back" "$logA" | tail -n 1)"
grep -aq "lock manager came back: [0-9]* locks taken again ([1-9][0-9]* reclaimed in its grace period)" "$logA" ||
	bad "A's lock was not reclaimed in the origin's grace period: $(grep -a "lock manager came back" "$logA" | tail -n 1)"
expect "direct: k after the origin's restart (A's lock reclaimed)" EAGAIN "$(try "$direct/k" posix w 5 1)"
[ "$(gw_metric "$cdirA" locks_lost_total)" = "${l0:-0}" ] || bad "A lost locks in the origin's restart: locks_lost_total ${l0:-0} -> $(gw_metric "$cdirA" locks_lost_total)"
release "$hr"
expect "direct: k after A's holder was killed" ok "$(until_try ok "$direct/k" posix w 0 10)"

step "knfsd re-exports gateway A: NFSv4.2 and NFSv3 clients"
knfsd_reexport "$mntA" 7502 || exit 1
c4=$(harness_tmpdir client-v42)
c3=$(harness_tmpdir client-v3)
nfs_mount "127.0.0.1:/export" "$c4" vers=4.2,actimeo=0 || exit 1
nfs_mount "127.0.0.1:$mntA" "$c3" vers=3,actimeo=0 || exit 1
hold v1 "$c4/w" posix w 0 100 || exit 1
expect "direct: w while the v4.2 client holds [0,100)" EAGAIN "$(try "$direct/w" posix w 50 1)"
expect "B: w while the v4.2 client of A's re-export holds [0,100)" EAGAIN "$(try "$mntB/w" posix w 0 1)"
expect "B: w [100,110)" ok "$(try "$mntB/w" posix w 100 10)"
release "$held"
expect "direct: w after the v4.2 holder was killed" ok "$(until_try ok "$direct/w" posix w 0 100)"
hold v2 "$c4/x" flock w 0 0 || exit 1
expect "direct: flock of x while the v4.2 client holds one" EAGAIN "$(try "$direct/x" flock w 0 0)"
expect "B: flock of x while the v4.2 client holds one" EAGAIN "$(try "$mntB/x" flock w 0 0)"
release "$held"
expect "B: flock of x after the v4.2 holder was killed" ok "$(until_try ok "$mntB/x" flock w 0 0)"
if [ -n "$TAKEOVER" ]; then
	step "a v4.2 client's lock held across an upgrade and a SIGKILL of gateway A"
	gw_register_serving "$cdirA"
	hold v3 "$c4/w" posix w 0 100 || exit 1
	hv=$held
	p=$(gw_serving "$cdirA")
	"$CACHEGW" "$KNFSD_ORIGIN_URL" "$mntA" -o "$optsA" </dev/null >>"$work/upgrade.err" 2>&1 ||
		bad "upgrade of A: exit $? ($(tail -n 1 "$work/upgrade.err"))"
	gw_wait_successor "$cdirA" "$p" 60 || bad "upgrade of A: no successor of $p"
	expect "direct: w after A's upgrade" EAGAIN "$(try "$direct/w" posix w 50 1)"
	p=$(gw_serving "$cdirA")
	kill -KILL "$p" || bad "no serving process $p of A"
	gw_wait_successor "$cdirA" "$p" 60 || bad "kill of A: no successor of $p"
	expect "direct: w after A's serving process was killed" EAGAIN "$(try "$direct/w" posix w 50 1)"
	expect "B: w after A's takeovers" EAGAIN "$(try "$mntB/w" posix w 0 1)"
	release "$hv"
	expect "direct: w after the v4.2 holder (across the takeovers) was killed" ok "$(until_try ok "$direct/w" posix w 0 100)"
else
	info "Linux $(uname -r): no takeover (needs >= 6.9), the lock across an upgrade is tested on 6.12"
fi
hold b1 "$mntB/y" posix w 0 0 || exit 1
expect "v4.2 client: y while B holds it" EAGAIN "$(try "$c4/y" posix w 0 1)"
release "$held"
# lockd's locks carry lm_grant (they may be granted later), which FUSE
# refuses with ENOLCK before asking the gateway (fs/fuse/file.c): an
# NFSv3 client of a knfsd re-export of any FUSE file system gets no lock.
r=$(try "$c3/y" posix w 0 1)
info "NFSv3 client of the re-export: fcntl lock: $r"
expect "v3 client (lockd) of the re-export: a lock" ENOLCK "$r"


step "local_lock=posix: an NFSv3 client's locks kept on the gateway's host"
# What doc/locks.md tells NFSv3 re-export users: the kernel then keeps
# fcntl locks itself (lockd's too), for the clients of this gateway only.
mntC=$(harness_tmpdir mntC)
mount_gateway "$KNFSD_ORIGIN_URL" "$mntC" "cache_dir=$(harness_tmpdir cacheC),allow_other,local_lock=posix" || exit 1
knfsd_export "$mntC" 7504 no_root_squash || exit 1
c3c=$(harness_tmpdir client-v3-local)
nfs_mount "127.0.0.1:$mntC" "$c3c" vers=3,actimeo=0 || exit 1
hold l1 "$c3c/y" posix w 0 10 || exit 1
expect "C: y while C's v3 client holds it" EAGAIN "$(try "$mntC/y" posix w 0 1)"
expect "direct: y while C's v3 client holds it (not at the origin)" ok "$(try "$direct/y" posix w 0 1)"
release "$held"
expect "C: y after C's v3 client let go" ok "$(until_try ok "$mntC/y" posix w 0 1)"
exit $fail
