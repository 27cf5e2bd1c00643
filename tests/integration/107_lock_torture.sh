#!/bin/bash
# Lock torture: first, through a gateway D whose COMMITs are slow (injected) while another process writes the file, an OFD lock and a flock, taken, their file closed, opened again at once and the lock asked for again without waiting: granted (the gateway's RELEASE, which the kernel does not wait for, commits before it lets the closed file's locks go; the new lock waits for it rather than being refused). Then two gateways (A, B) on one origin serving NLM; 12 processes (fcntl locks; OFD locks on two open file descriptions per file; flock on two open file descriptions per file; half through A, half through B) lock, unlock and convert random overlapping byte ranges of 3 files, without waiting and waiting with timeouts (EINTR), close their files, exit holding locks, and are killed with SIGKILL (holders and waiters) and replaced, for CACHEGW_TORTURE_SECS (default 16) s, with the seed printed (CACHEGW_TORTURE_SEED to repeat one; tests/lib/lock_torture.py says how). Checked as it runs: no two owners ever hold conflicting locks (each owner's granted ranges against every other's believed ones; F_GETLK through A or B of a believed range reports a lock: none lost). Checked at the end, once every worker is gone: a new process through A, through B and through a gateway C mounted afterwards (another NLM client of the origin) takes a write lock of every whole file (fcntl, OFD, flock) without waiting, and so does a direct NLM client of the origin (cachegw-bench-nlm whole): nothing left at the origin; A's and B's lock_owners come back to 0; their counters moved.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
T=$(dirname "$0")/../lib/lock_torture.py

data=$(harness_tmpdir origin-data)
state=$(harness_tmpdir torture)
for f in t0 t1 t2; do
	head -c 4096 /dev/urandom >"$data/$f"
done
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
test_mount
mntA=$mnt pidA=$GW_PID logA=$GW_LOG cdirA=$cdir
test_mount
mntB=$mnt pidB=$GW_PID logB=$GW_LOG cdirB=$cdir

step "right after a last close, the next open file's lock is granted (the release commits slowly)"
head -c 65536 /dev/urandom >"$data/r"
export CACHEGW_INJECT_COMMIT_DELAY=200
test_mount
unset CACHEGW_INJECT_COMMIT_DELAY
mntD=$mnt pidD=$GW_PID logD=$GW_LOG
for k in ofd flock; do
	timeout 60 "$PY" "$T" reopen "$mntD/r" 2 $k ||
		bad "$k: a lock refused right after the last close of the file that held it"
done
unmount_gateway "$mntD" "$pidD" "$logD" || bad "D: unmount"

seed=${CACHEGW_TORTURE_SEED:-$RANDOM$RANDOM}
secs=${CACHEGW_TORTURE_SECS:-16}
step "torture: seed $seed, $secs s (CACHEGW_TORTURE_SEED=$seed to repeat it)"
timeout -k 5 $((secs + 60)) "$PY" "$T" run "$state" "$seed" "$secs" 12 "$mntA" "$mntB" ||
	bad "torture (seed $seed): violations (above)"

step "nothing left at the origin: whole files through A, B and a new gateway C"
test_mount
mntC=$mnt pidC=$GW_PID logC=$GW_LOG
timeout -k 5 60 "$PY" "$T" final "$state" 10 "$mntA" "$mntB" "$mntC" ||
	bad "torture (seed $seed): locks left at the origin (above)"

# And as a direct NLM client of the origin (the bench's helper: libnfs's
# raw LOCK), no gateway between.
NLMC=$(dirname "$CACHEGW")/../tools/bench/cachegw-bench-nlm
if [ -x "$NLMC" ]; then
	for f in t0 t1 t2; do
		r=$(timeout 30 "$NLMC" whole "$ORIGIN_URL" "$f" 2>&1)
		[ "$r" = granted ] ||
			bad "torture (seed $seed): a direct NLM client's write lock of all of $f: $r"
	done
else
	echo "($NLMC not built: no direct check)" >&2
fi

step "the gateways' counters"
m() { gw_metric "$1" "$2"; }
for g in A B; do
	eval "cd_=\$cdir$g"
	for ((i = 0; i < 50; i++)); do
		[ "$(m "$cd_" lock_owners)" = 0 ] && break
		sleep 0.1
	done
	[ "$(m "$cd_" lock_owners)" = 0 ] ||
		bad "$g: lock_owners $(m "$cd_" lock_owners) with every owner gone"
	[ "$(m "$cd_" locks_granted_total)" -ge 40 ] ||
		bad "$g: locks_granted_total $(m "$cd_" locks_granted_total), not >= 40"
	[ "$(m "$cd_" locks_released_total)" -ge 20 ] ||
		bad "$g: locks_released_total $(m "$cd_" locks_released_total), not >= 20"
	[ "$(m "$cd_" locks_waited_total)" -ge 5 ] ||
		bad "$g: locks_waited_total $(m "$cd_" locks_waited_total), not >= 5"
	echo "$g: granted $(m "$cd_" locks_granted_total), denied $(m "$cd_" locks_denied_total)," \
		"waited $(m "$cd_" locks_waited_total), interrupted $(m "$cd_" locks_interrupted_total)," \
		"released $(m "$cd_" locks_released_total), origin lock calls $(m "$cd_" origin_lock_calls_total)" >&2
done
grep -h 'locks:' "$logA" "$logB" >&2

GW_PID=$pidA GW_LOG=$logA gw_check
GW_PID=$pidB GW_LOG=$logB gw_check
unmount_gateway "$mntC" "$pidC" "$logC" || bad "C: unmount"
unmount_gateway "$mntB" "$pidB" "$logB" || bad "B: unmount"
unmount_gateway "$mntA" "$pidA" "$logA" || bad "A: unmount"
exit $fail
