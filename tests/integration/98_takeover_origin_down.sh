#!/bin/bash
# The mount outlives the process while the origin is away: with the origin unreachable (the proxy in front of it stopped; the origin itself keeps its write verifier, as across a network outage), running the start command again (an upgrade in place) is refused with one line naming the origin, exit 1, and the old process serves on; a gateway started as a daemon is supervised by default; with supervise, SIGKILLs of the serving process (seven on one mount, more than the supervisor's burst of five) leave the mount in place: a hard mount's successor waits for the origin (a reader gets the origin's bytes once it is back), an offline= mount's successors answer from the cache (a file held open across the crashes and a file kept from an earlier run read byte for byte; a file changed through the dead process is not given the attributes kept from before); what writers wrote before the crashes and had not fsync'ed is COMMITted once the origin is back (their fsync returns 0, the bytes are at the origin); and a handover whose COMMIT hangs past drain_timeout= hands the connection over without it (the new process commits: the writer's fsync returns 0, nothing detached); a gateway started with -f serves itself, unsupervised.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
if ! python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: takeover needs FUSE_NOTIFY_RESEND (Linux >= 6.9), this is $(uname -r)" >&2
	exit 77
fi
FAR_NFS_PORT=${CACHEGW_FAR_NFS_PORT:-$((REEXPORT_NFS_PORT + 20))}
FAR_MNT_PORT=${CACHEGW_FAR_MNT_PORT:-$((REEXPORT_MNT_PORT + 20))}

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
mkdir -p "$data/d" "$data/w"
for i in 1 2 3 4; do head -c $((i * 200000 + 11)) /dev/urandom >"$data/d/f$i"; done
test_origin "$data"
latproxy_start origin 0 "$FAR_NFS_PORT" "$FAR_MNT_PORT" || { echo "FAIL: the proxy did not start" >&2; exit 1; }
URL=$ORIGIN_FAR_URL
origin_down() { pid_stop "$ORIGIN_FAR_PID" 5; }
origin_up() { latproxy_start origin 0 "$FAR_NFS_PORT" "$FAR_MNT_PORT" || bad "the proxy did not start again"; }

# wait_successor DIR OLD: another serving pid within 30 s (registered).
wait_successor() { gw_wait_successor "$1" "$2" 30; }
# A writer: writes N random bytes to PATH (a copy in WANT), says "wrote",
# waits for GO to exist, then fsync and close: "ok" or "errno N".
# writer_start NAME PATH N: one in the background, its lines in
# $work/NAME.out, its pid in wpid[NAME]; writer_said NAME LINE: within 90 s.
declare -A wpid
writer_start() {
	"$PY" "$(dirname "$0")/../lib/held_writer.py" "$2" "$work/go" "$3" "$work/$1.want" >"$work/$1.out" 2>&1 4<&- &
	wpid[$1]=$!
}
writer_said() {
	local i
	for ((i = 0; i < 900; i++)); do
		grep -qx -- "$2" "$work/$1.out" 2>/dev/null && return 0
		pid_alive "${wpid[$1]}" || break
		sleep 0.1
	done
	grep -qx -- "$2" "$work/$1.out" 2>/dev/null
}

# ---- the mounts: A hard, supervised (-f); B offline=, a daemon
step "mount A (hard, supervise) and B (offline=2, a daemon: supervised by default)"
mntA=$(harness_tmpdir mnt-a)
cA=$(harness_tmpdir cache-a)
optsA="cache_dir=$cA,supervise,logfile=$work/a.log"
mount_gateway "$URL" "$mntA" "$optsA" || exit 1
supA=$GW_PID
logA=$GW_LOG
gw_register_serving "$cA"
mntB=$(harness_tmpdir mnt-b)
cB=$(harness_tmpdir cache-b)
optsB="cache_dir=$cB,offline=2,logfile=$work/b.log"
harness_register_mount "$mntB"
startB() { "$CACHEGW" "$URL" "$mntB" -o "$optsB" </dev/null 2>>"$work/b.err"; }
startB || { bad "B did not start: $(cat "$work/b.err")"; exit 1; }
gw_register_serving "$cB"
supB=$(gw_metric "$cB" supervisor_pid)
[ -n "$supB" ] && [ "$supB" != 0 ] && [ "$supB" != "$(gw_serving "$cB")" ] ||
	bad "a gateway started as a daemon has no supervisor (supervisor_pid '$supB')"
# B's first run reads the tree and stops cleanly: what it knew is kept
# (md.log), as a gateway that ran before has it.
for i in 1 2 3; do cmp -s "$data/d/f$i" "$mntB/d/f$i" || bad "B: warm read of f$i"; done
ls "$mntB/d" >/dev/null
gw_wait_metric "$cB" cache_fill_bytes_total $((200011 + 400011 + 600011)) 30 || bad "B: fills did not complete"
p=$(gw_serving "$cB")
fusermount3 -u "$mntB" || bad "B: unmount"
for q in $p $supB; do
	[ "$q" = 0 ] || pid_wait_exit "$q" 20 || bad "B: pid $q did not exit after the unmount"
done
startB || { bad "B did not start again: $(cat "$work/b.err")"; exit 1; }
gw_register_serving "$cB"
supB=$(gw_metric "$cB" supervisor_pid)
for i in 1 2 3; do cmp -s "$data/d/f$i" "$mntB/d/f$i" || bad "B: read of f$i"; done
cmp -s "$data/d/f1" "$mntA/d/f1" || bad "A: read of f1"
# Changed through B in this run: what the first run kept of it is older.
printf 'appended\n' >>"$mntB/d/f2" || bad "B: append to f2"
exec 4<"$mntB/d/f3"	# held open across the crashes
# The writers write in a directory of their own (made at the origin): a
# directory the dead process changed (a file made in it) is not known to
# an offline successor until the origin is back (doc/takeover.md).
writer_start wA "$mntA/w/wA" 3000000
writer_start wB "$mntB/w/wB" 3000000
writer_said wA wrote || bad "A: the writer did not write ($(cat "$work/wA.out"))"
writer_said wB wrote || bad "B: the writer did not write ($(cat "$work/wB.out"))"

step "the origin goes away"
origin_down
t0=$SECONDS

# ---- (a) an upgrade in place is refused, the old process serves on
for m in A B; do
	if [ $m = A ]; then mnt=$mntA opts=$optsA c=$cA; else mnt=$mntB opts=$optsB c=$cB; fi
	step "$m: the start command again"
	p=$(gw_serving "$c")
	# Into a file, not $(...): a process that took the mount over
	# anyway would hold a pipe open as long as it serves.
	timeout 60 "$CACHEGW" "$URL" "$mnt" -o "$opts" </dev/null >"$work/upgrade.out" 2>&1 4<&-
	rc=$?
	out=$(cat "$work/upgrade.out")
	[ $rc != 0 ] && [ $rc != 124 ] || bad "$m: an upgrade without the origin: exit $rc ($out)"
	[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && case $out in *"cannot reach the origin"*) true ;; *) false ;; esac ||
		bad "$m: an upgrade without the origin does not say why in one line: $out"
	echo "  $m: exit $rc: $out" >&2
	sleep 0.5
	[ "$(gw_serving "$c")" = "$p" ] || bad "$m: the serving process changed ($p -> $(gw_serving "$c"))"
	is_mounted "$mnt" || bad "$m: not mounted after the refused upgrade"
done
out=$(timeout 30 cmp "$data/d/f1" "$mntB/d/f1" 2>&1) || bad "B after the refused upgrade: f1: $out"

# ---- (b) SIGKILLs of the serving process while the origin is away
step "SIGKILL of A's and B's serving processes"
for c in "$cA" "$cB"; do
	p=$(gw_serving "$c")
	kill -KILL "$p" || bad "no serving process $p"
	wait_successor "$c" "$p" || bad "no successor after the SIGKILL of $p ($c)"
done
# A (hard): a new reader waits for the origin.
timeout 120 cat "$mntA/d/f2" >"$work/f2.got" 2>"$work/f2.err" 4<&- &
readerA=$!
# B (offline=): the held file and a kept one read from the cache (the
# held file's pages dropped first: read by the gateway, not the kernel).
"$PY" -c 'import os; os.posix_fadvise(4, 0, 0, os.POSIX_FADV_DONTNEED)' || bad "fadvise of the held file"
out=$(timeout 30 cat <&4 2>&1 >"$work/f3.got") || bad "B: the file held open across the crash: $out"
cmp -s "$data/d/f3" "$work/f3.got" || bad "B: the file held open across the crash read $(stat -c %s "$work/f3.got") bytes, not the origin's"
out=$(timeout 30 cmp "$data/d/f1" "$mntB/d/f1" 2>&1) || bad "B after the crash: f1: $out"
for k in 2 3 4 5 6 7; do
	p=$(gw_serving "$cB")
	kill -KILL "$p" || bad "B: kill $k: no serving process $p"
	wait_successor "$cB" "$p" || { bad "B: kill $k: no successor"; break; }
	is_mounted "$mntB" || { bad "B: kill $k: the mount is gone"; break; }
	out=$(timeout 30 cmp "$data/d/f1" "$mntB/d/f1" 2>&1) || bad "B after kill $k: $out"
done
# f2, changed by a dead process: its size now, or not known (EHOSTDOWN),
# never the size the first run kept (--cached=never: asked of the
# gateway, not answered from the kernel's attributes).
out=$(timeout 30 stat --cached=never -c %s "$mntB/d/f2" 2>&1)
case $out in
"$(stat -c %s "$data/d/f2")" | *"Host is down"*) echo "  B: f2, changed before the crash: $out" >&2 ;;
*) bad "B: f2, changed through B before the crash, stat answers '$out' (the origin has $(stat -c %s "$data/d/f2") bytes)" ;;
esac
exec 4<&-
while [ $((SECONDS - t0)) -lt 10 ]; do sleep 0.5; done
pid_alive "$readerA" || { wait "$readerA"; bad "A: the reader ended while the origin was away (status $?, $(cat "$work/f2.err"))"; }
pid_alive "$supA" && pid_alive "$supB" || bad "a supervisor gave up (A: $(pid_alive "$supA" && echo alive || echo gone), B: $(pid_alive "$supB" && echo alive || echo gone))"
is_mounted "$mntA" && is_mounted "$mntB" || bad "a mount is gone"
grep -q 'deaths of the serving process within' "$work/b.log" || bad "B: the supervisor did not say it delays successors"

step "the origin is back after $((SECONDS - t0)) s"
origin_up
wait "$readerA" || bad "A: the reader failed: $(cat "$work/f2.err")"
cmp -s "$data/d/f2" "$work/f2.got" || bad "A: the reader's bytes differ from the origin's"
touch "$work/go"
for m in A B; do
	writer_said "w$m" ok || bad "$m: the writer's fsync once the origin is back: '$(tail -n 1 "$work/w$m.out")', not ok"
	wait "${wpid[w$m]}" 2>/dev/null
	cmp -s "$work/w$m.want" "$data/w/w$m" || bad "$m: what the writer wrote is not at the origin"
done
grep -q "COMMITs owed for what the last process wrote are done: it is stable" "$work/a.log" ||
	bad "A: the owed COMMITs were not logged done"
gw_wait_metric_le() { # DIR NAME MAX: the metric at most MAX within 30 s
	local i v
	for ((i = 0; i < 300; i++)); do
		v=$(gw_metric "$1" "$2")
		[ -n "$v" ] && [ "$v" -le "$3" ] && return 0
		sleep 0.1
	done
	return 1
}
gw_wait_metric_le "$cB" origin_lost 0 || bad "B: the origin is not seen back within 30 s"
out=$(timeout 30 cmp "$data/d/f4" "$mntB/d/f4" 2>&1) || bad "B: a file never read, once the origin is back: $out"
out=$(timeout 30 cmp "$data/d/f3" "$mntA/d/f3" 2>&1) || bad "A: f3 once the origin is back: $out"

# ---- a handover whose COMMIT hangs: handed over without it
step "a handover whose COMMIT does not finish"
unmount_gateway "$mntA" "$supA" "$logA" || bad "A: unmount"
sanitizer_check "$work/a.log" || bad "A: sanitizer report in its log"
mntC=$(harness_tmpdir mnt-c)
cC=$(harness_tmpdir cache-c)
optsC="cache_dir=$cC,drain_timeout=2,logfile=$work/c.log"
CACHEGW_INJECT_COMMIT_DELAY=1 CACHEGW_INJECT_RELEASE=$work/never \
	mount_gateway "$URL" "$mntC" "$optsC" || exit 1
oldC=$GW_PID
gw_register_serving "$cC"
# In the foreground the process started is the one that serves.
[ "$(gw_metric "$cC" supervisor_pid)" = 0 ] && [ "$(gw_serving "$cC")" = "$oldC" ] ||
	bad "C: a gateway started with -f has a supervisor ($(gw_metric "$cC" supervisor_pid)) or does not serve itself"
rm -f "$work/go"
writer_start wC "$mntC/w/wC" 2000000
writer_said wC wrote || bad "C: the writer did not write ($(cat "$work/wC.out"))"
p=$(gw_serving "$cC")
timeout 60 "$CACHEGW" "$URL" "$mntC" -o "${optsC/drain_timeout=2,/}" </dev/null >"$work/upgrade.out" 2>&1
rc=$?
out=$(cat "$work/upgrade.out")
[ $rc = 0 ] || bad "C: the upgrade while the COMMIT hangs: exit $rc ($out)"
wait_successor "$cC" "$p" || bad "C: no successor"
is_mounted "$mntC" || bad "C: the mount is gone"
grep -q 'commits of the handover did not finish' "$work/c.log" || bad "C: the old process did not say it handed over without its commits"
touch "$work/go"
writer_said wC ok || bad "C: the writer's fsync after the handover: '$(tail -n 1 "$work/wC.out")', not ok"
wait "${wpid[wC]}" 2>/dev/null
cmp -s "$work/wC.want" "$data/w/wC" || bad "C: what the writer wrote is not at the origin"
cmp -s "$data/d/f1" "$mntC/d/f1" || bad "C: the mount does not read right after the handover"
pid_wait_exit "$oldC" 10 || bad "C: the old process did not exit after the handover"
wait "$oldC" 2>/dev/null
st=$?
[ $st = 0 ] || bad "C: the old process (handed over) exited $st, not 0"

step "unmount"
for m in B C; do
	if [ $m = B ]; then mnt=$mntB c=$cB; else mnt=$mntC c=$cC; fi
	s=$(gw_metric "$c" supervisor_pid)
	fusermount3 -u "$mnt" || bad "$m: unmount"
	[ -z "$s" ] || pid_wait_exit "$s" 30 || bad "$m: the supervisor $s did not exit after the unmount"
done
for l in b c; do sanitizer_check "$work/$l.log" || bad "$l: sanitizer report in its log"; done
exit $fail
