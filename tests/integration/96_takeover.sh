#!/bin/bash
# The mount outlives the process (on the host): a supervised gateway (-o supervise) under fio --verify writers and readers, a shell whose working directory is inside and a file held open, is upgraded in place 10 times (the same command run again: the new process takes the connection over; CACHEGW_TAKEOVER_ROUNDS) and its serving process killed with SIGKILL 10 times (the supervisor starts a successor on the connection), alternating: fio exits 0 with no verify error, every loop of cmp/ls through the mount succeeds, the held file still reads, what fio wrote is at the origin byte for byte; pidfile= names the new supervisor after each upgrade (systemd's PIDFile= on reload); a file unlinked while open keeps its hidden name across an upgrade and a kill and loses it at its last close; SIGTERM to the supervisor stops both processes and the mount; the pauses (median, max) are printed from cachegw_takeover_pause_us. Refusals leave the old process serving: a request of another state version (one line, "refused"), and of the older state version 2 (saying an older binary cannot take over), and the command run on another mount point with the same cache_dir (exit 1, one line); a process that asks and goes away before it is handed the connection leaves it to the supervisor's successor. After a crash the successor commits what the dead process wrote: with the origin restarted between a write and the SIGKILL (a new write verifier), the writer's fsync reports EIO; without a restart, an unsynced write reaches the origin and its fsync returns 0; a file written before an origin restart gets EIO even when another file was written after it (under the new verifier) before the kill, and still after a second kill and an upgrade, while that other file's fsync returns 0 and its bytes are at the origin.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
test_require_cmd fio
if ! python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: takeover needs FUSE_NOTIFY_RESEND (Linux >= 6.9), this is $(uname -r)" >&2
	exit 77
fi
# 10 of each; 6 under ThreadSanitizer (4x slower: the races
# are in the first few as much as in the last).
ROUNDS=${CACHEGW_TAKEOVER_ROUNDS:-10}
ldd "$CACHEGW" 2>/dev/null | grep -q libtsan && ROUNDS=${CACHEGW_TAKEOVER_ROUNDS:-6}

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
mkdir -p "$data/d/sub" "$data/fio"
for i in 1 2 3 4 5; do head -c $((i * 300000 + 7)) /dev/urandom >"$data/d/f$i"; done
echo held >"$data/d/held"
test_origin "$data"
test_mount "supervise,logfile=$work/gw.log,pidfile=$work/gw.pid"
opts="cache_dir=$cdir,supervise,logfile=$work/gw.log,pidfile=$work/gw.pid"

serving() { gw_serving "$cdir"; }
register_serving() { gw_register_serving "$cdir"; }
# wait_successor OLD: a new serving pid within 20 s (registered).
wait_successor() { gw_wait_successor "$cdir" "$1"; }
# ctl_request LINE: send LINE on the control socket, print the first line
# of the answer, hang up.
ctl_request() {
	printf '%s\n' "$1" | timeout 10 "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1] + "/control.sock")
s.sendall(sys.stdin.buffer.read()); print(s.makefile().readline().strip())' "$cdir"
}
upgrade() { "$CACHEGW" "$ORIGIN_URL" "$mnt" -o "$opts" </dev/null 3<&- 4<&- 2>>"$work/upgrade.err"; }

# ---- 1. refusals: the old process serves on
step "refusals"
p0=$(serving)
ans=$(ctl_request "takeover 999 2 $mnt")
case $ans in
refused:*version*) ;;
*) bad "a takeover of another state version was not refused: '$ans'" ;;
esac
# An older binary (state version 2) would not know the lock owners kept.
ans=$(ctl_request "takeover 2 2 $mnt")
case $ans in
refused:*"version 3"*"the new one 2"*"older than this one cannot take it over"*) ;;
*) bad "a takeover by an older state version was not refused as one: '$ans'" ;;
esac
other=$(harness_tmpdir other-mnt)
out=$("$CACHEGW" "$ORIGIN_URL" "$other" -o "cache_dir=$cdir" </dev/null 2>&1)
rc=$?
[ $rc = 1 ] || bad "another mount point with the same cache_dir: exit $rc, not 1 ($out)"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && case $out in *"not $other"*) true ;; *) false ;; esac ||
	bad "another mount point: not one line naming it: $out"
is_mounted "$other" && bad "the refused process mounted $other"
[ "$(serving)" = "$p0" ] || bad "after the refusals the serving process changed"
cmp -s "$data/d/f1" "$mnt/d/f1" || bad "after the refusals the mount does not read right"

# A takeover asked by a process that goes away before it is handed the
# connection: the old process has closed its cache by then and exits; its
# supervisor takes that for a death and starts a successor on its own
# copy of the connection.
step "a new process that goes away mid-takeover"
p0=$(serving)
# This source's state version (gateway/gw_state.h).
sv=$(awk '$1 == "#define" && $2 == "GW_STATE_VERSION" { print $3 }' "$(dirname "$0")/../../gateway/gw_state.h")
ans=$(ctl_request "takeover ${sv:-none} 2 $mnt")
case $ans in
"ok $p0") ;;
*) bad "a takeover request of this version was not accepted: '$ans' (the test's versions are stale?)" ;;
esac
wait_successor "$p0" || bad "no successor after the asking process went away"
register_serving
cmp -s "$data/d/f3" "$mnt/d/f3" || bad "after the asking process went away the mount does not read right"
grep -q 'cannot hand the connection' "$work/gw.log" || bad "the old process did not log the failed handover"
gen0=$(gw_metric "$cdir" takeover_generation)

# ---- 2. the load
step "fio writers and readers, a cwd inside, a held file; $ROUNDS upgrades and $ROUNDS kills"
# The readers' file, written (with verify headers) before the takeovers.
fio --name=prep --directory="$mnt/fio" --filename=r.dat --rw=write --bs=64k \
	--size=16M --verify=crc32c --do_verify=0 --verify_state_save=0 >"$work/fio-prep.out" 2>&1 ||
	bad "fio could not write the readers' file: $(tail -3 "$work/fio-prep.out")"
runtime=$((ROUNDS * 2 + 10))
fio --directory="$mnt/fio" --time_based --runtime=$runtime --bs=64k \
	--name=w --rw=randwrite --size=8M --numjobs=2 --verify=crc32c --verify_backlog=16 --verify_state_save=0 \
	--name=r --filename=r.dat --rw=randread --size=16M --numjobs=2 --verify=crc32c \
	>"$work/fio.out" 2>&1 &
fio_pid=$!
exec 3<"$mnt/d/held"
(
	cd "$mnt/d/sub" || exit 1
	end=$((SECONDS + runtime))
	n=0 e=0
	while [ $SECONDS -lt $end ]; do
		n=$((n + 1))
		ls .. >/dev/null || e=$((e + 1))
		cmp -s "$data/d/f$((n % 5 + 1))" "../f$((n % 5 + 1))" || { e=$((e + 1)); echo "cmp f$((n % 5 + 1)) failed" >&2; }
		head -c 4096 </dev/urandom >"$work/c.$n" && cp "$work/c.$n" "./c.$n" && cmp -s "$work/c.$n" "./c.$n" ||
			{ e=$((e + 1)); echo "create/copy c.$n failed" >&2; }
	done
	echo "$n $e" >"$work/loop.result"
) 2>"$work/loop.err" 3<&- &
loop_pid=$!
sleep 2
pauses=()
for ((k = 1; k <= ROUNDS; k++)); do
	p=$(serving)
	upgrade || bad "upgrade $k: exit $? ($(tail -1 "$work/upgrade.err"))"
	wait_successor "$p" || bad "upgrade $k: no new serving process"
	register_serving
	# systemd's PIDFile=: the new supervisor once the command returned
	[ "$(cat "$work/gw.pid" 2>/dev/null)" = "$(gw_metric "$cdir" supervisor_pid)" ] ||
		bad "upgrade $k: pidfile= holds $(cat "$work/gw.pid" 2>/dev/null), not the supervisor $(gw_metric "$cdir" supervisor_pid)"
	pauses+=("$(gw_metric "$cdir" takeover_pause_us)")
	sleep 0.5
	p=$(serving)
	kill -KILL "$p" 2>/dev/null || bad "kill $k: no serving process $p"
	wait_successor "$p" || bad "kill $k: the supervisor started no successor"
	register_serving
	pauses+=("$(gw_metric "$cdir" takeover_pause_us)")
	sleep 0.5
done
cache_inspect top --cache-dir "$cdir" --once --interval 0.2 >"$work/top" 2>&1
grep -q "^# serving: pid $(serving), $((gen0 + ROUNDS * 2)) takeovers" "$work/top" ||
	bad "top does not say who serves: $(head -3 "$work/top")"
gen=$(gw_metric "$cdir" takeover_generation)
[ "$gen" = $((gen0 + ROUNDS * 2)) ] || bad "takeover_generation is $gen, not $((gen0 + ROUNDS * 2))"
# The log (logfile=) says who took over from whom, upgrades included (the
# new process detaches once it serves: its line must land in the log, not
# only on the upgrading command's stderr).
n=$(grep -c 'handed over), generation' "$work/gw.log")
[ "$n" -ge "$ROUNDS" ] || bad "logfile= has $n lines of a successor serving after an upgrade, not $ROUNDS"
n=$(grep -c '(died), generation' "$work/gw.log")
[ "$n" -ge "$ROUNDS" ] || bad "logfile= has $n lines of a successor serving after a crash, not $ROUNDS"
wait "$fio_pid"
rc=$?
[ $rc = 0 ] || bad "fio exit $rc: $(grep -iE 'verify|err=' "$work/fio.out" | head -5)"
grep -qi 'verify: bad' "$work/fio.out" && bad "fio found bad data: $(grep -i -m3 'verify: bad' "$work/fio.out")"
wait "$loop_pid"
read -r n e <"$work/loop.result" 2>/dev/null || { n=0; e=1; }
[ "$e" = 0 ] || bad "the shell in the mount saw $e errors in $n rounds: $(head -5 "$work/loop.err")"
[ "$n" -gt 0 ] || bad "the shell loop did not run"
read -r line <&3 && [ "$line" = held ] || bad "the file held open across the takeovers does not read"
exec 3<&-
for f in "$mnt"/fio/*; do
	cmp -s "$f" "$data/fio/$(basename "$f")" || bad "fio's $(basename "$f") differs at the origin"
done
for f in "$work"/c.*; do
	cmp -s "$f" "$data/d/sub/$(basename "$f")" || { bad "$(basename "$f") differs at the origin"; break; }
done
printf '%s\n' "${pauses[@]}" | sort -n | awk '{ v[NR] = $1 } END {
	printf "  pauses over %d takeovers: median %.1f ms, max %.1f ms\n", NR, v[int((NR + 1) / 2)] / 1000, v[NR] / 1000 }' >&2

# ---- 3. after a crash, what the dead process wrote
step "a crash after unsynced writes: committed by the successor, or EIO after an origin restart"
wb=
case ${CACHEGW_TEST_GW_OPTS:-} in *writeback*) wb=1 ;; esac
for mode in plain restart; do
	rm -f "$work/go"
	coproc WR { "$PY" "$(dirname "$0")/../lib/held_writer.py" "$mnt/d/$mode.bin" "$work/go" 3000000 "$work/$mode.want" 2>&1; }
	read -r -t 30 l <&"${WR[0]}"
	[ "$l" = wrote ] || bad "$mode: the writer did not write ($l)"
	if [ $mode = restart ]; then
		sleep 1.2	# ganesha's verifier is its start time in seconds
		origin_stop origin
		origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { bad "origin restart"; break; }
	fi
	p=$(serving)
	kill -KILL "$p"
	wait_successor "$p" || bad "$mode: no successor"
	register_serving
	touch "$work/go"
	read -r -t 60 l <&"${WR[0]}"
	wait "$WR_PID" 2>/dev/null
	if [ $mode = plain ]; then
		[ "$l" = ok ] || bad "plain: fsync after the crash: $l, not ok"
		cmp -s "$work/plain.want" "$data/d/plain.bin" || bad "plain: the written bytes are not at the origin"
	elif [ -n "$wb" ] && [ "$l" = ok ]; then
		# writeback: the kernel may have sent nothing before the
		# origin restarted (its pages still dirty): then nothing was
		# lost, and fsync sends them now. Ok only with every byte there.
		cmp -s "$work/$mode.want" "$data/d/$mode.bin" || bad "restart (writeback): fsync answered ok but the origin's bytes differ: a loss not reported"
	else
		[ "$l" = "errno 5" ] || bad "restart: the writer's fsync after the crash answered '$l', not EIO (errno 5): a possible loss not reported"
	fi
done
# ---- 3b. a lost write is not taken for committed because another file's
# WRITE came under the origin's new verifier
step "a crash after an origin restart and a write of another file: EIO for the lost one, across two crashes and an upgrade"
cat >"$work/wr2.py" <<-'PY'
	import os, sys, time
	a, b, step, go, n, want_b, want_a = sys.argv[1:8]
	def wait(f):
	    while not os.path.exists(f):
	        time.sleep(0.05)
	def res(fd):
	    try:
	        os.fsync(fd)
	        os.close(fd)
	        return "ok"
	    except OSError as e:
	        return "errno %d" % e.errno
	fa = os.open(a, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	data = os.urandom(int(n))
	open(want_a, "wb").write(data)
	os.write(fa, data)
	print("wrote a", flush=True)
	wait(step)
	data = os.urandom(int(n))
	open(want_b, "wb").write(data)
	fb = os.open(b, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	os.write(fb, data)
	print("wrote b", flush=True)
	wait(go)
	print("a", res(fa), "b", res(fb), flush=True)
PY
rm -f "$work/step" "$work/go"
coproc WR2 { "$PY" "$work/wr2.py" "$mnt/d/a.bin" "$mnt/d/b.bin" "$work/step" "$work/go" 3000000 "$work/b.want" "$work/a.want" 2>&1; }
read -r -t 30 l <&"${WR2[0]}"
[ "$l" = "wrote a" ] || bad "other: the writer did not write a ($l)"
sleep 1.2	# ganesha's verifier is its start time in seconds
origin_stop origin
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || bad "origin restart"
touch "$work/step"
read -r -t 60 l <&"${WR2[0]}"
[ "$l" = "wrote b" ] || bad "other: the writer did not write b ($l)"
for k in 1 2; do
	p=$(serving)
	kill -KILL "$p"
	wait_successor "$p" || bad "other: no successor after kill $k"
	register_serving
done
p=$(serving)
upgrade || bad "other: upgrade: exit $? ($(tail -1 "$work/upgrade.err"))"
wait_successor "$p" || bad "other: no successor after the upgrade"
register_serving
touch "$work/go"
read -r -t 60 l <&"${WR2[0]}"
wait "$WR2_PID" 2>/dev/null
if [ -n "$wb" ] && [ "$l" = "a ok b ok" ]; then
	# writeback: a's pages may not have left the kernel before the
	# origin restarted (see above): ok only with all of a there.
	cmp -s "$work/a.want" "$data/d/a.bin" || bad "other (writeback): a's fsync answered ok but the origin's bytes differ: a loss not reported"
else
	[ "$l" = "a errno 5 b ok" ] ||
		bad "other: the writers' fsyncs answered '$l', not 'a errno 5 b ok': a lost write taken for committed (or a kept one for lost)"
fi
cmp -s "$work/b.want" "$data/d/b.bin" || bad "other: b's bytes are not at the origin"
# (writeback with nothing sent before the restart: nothing to log)
case $l in *errno*) grep -q 'may be lost' "$work/gw.log" || bad "the possible loss was not logged" ;; esac
cmp -s "$data/d/f2" "$mnt/d/f2" || bad "the mount does not read right at the end"

# ---- 4. a file unlinked while open keeps its hidden name across both
# kinds of takeover, and loses it at its last close
step "an open file unlinked, then an upgrade and a kill"
echo "still here" >"$mnt/d/ul"
exec 5<"$mnt/d/ul"
rm "$mnt/d/ul" || bad "unlink of an open file failed"
[ "$(ls -a "$data/d" | grep -c '^\.cachegw-silly')" = 1 ] || bad "no hidden name at the origin for the open unlinked file"
p=$(serving)
upgrade || bad "upgrade with an unlinked open file: exit $?"
wait_successor "$p" || bad "no successor (upgrade, unlinked file)"
register_serving
p=$(serving)
kill -KILL "$p"
wait_successor "$p" || bad "no successor (kill, unlinked file)"
register_serving
read -r line <&5 && [ "$line" = "still here" ] || bad "the unlinked open file does not read after the takeovers: '$line'"
exec 5<&-
for ((i = 0; i < 50; i++)); do
	[ "$(ls -a "$data/d" | grep -c '^\.cachegw-silly')" = 0 ] && break
	sleep 0.1
done
[ "$(ls -a "$data/d" | grep -c '^\.cachegw-silly')" = 0 ] || bad "the hidden name is still at the origin after the last close: $(ls -a "$data/d" | grep silly)"

# ---- 4. the end: SIGTERM to the supervisor (systemctl stop) reaches the
# serving process, which detaches the mount and exits; so does the
# supervisor, with nothing reported at exit
step "SIGTERM to the supervisor"
gw_stop_supervised "$cdir" "$mnt" || fail=1
pid_wait_exit "$GW_PID" 5 || bad "the first supervisor ($GW_PID) is still running"
wait "$GW_PID" 2>/dev/null
st=$?
[ "$st" = 0 ] || bad "the first supervisor (handed over) exited $st, not 0"
[ -e "$work/gw.pid" ] && bad "pidfile= left behind after the last exit"
sanitizer_check "$work/gw.log" || bad "sanitizer report in the gateway's log"
grep -q 'BUG:' "$work/gw.log" && bad "the gateway reported a bug: $(grep -m1 'BUG:' "$work/gw.log")"
exit $fail
