#!/bin/bash
# offline= never takes a change as done while the origin is away: with the origin stopped and called lost, on a hard mount a new file written with fsync and an fsync'ed append to a cached file both wait (neither has returned after 4 s, nothing reached the origin) and, once the origin is back, complete with their bytes at the origin; on a soft mount (timeo=10,retrans=1) a create while the origin is away fails with an error instead of being taken.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
trap 'kill -CONT "${ORIGIN_PID:-0}" 2>/dev/null; harness_cleanup' EXIT

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
mkdir "$data/d"
head -c 100000 /dev/urandom >"$data/d/old"
head -c 300000 /dev/urandom >"$work/new"
test_origin "$data"

# wait_done PID SECONDS: 0 once PID (a child) has exited, 1 at the timeout.
wait_done() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		pid_alive "$1" || return 0
		sleep 0.1
	done
	return 1
}
lose_origin() {
	cmp -s "$data/d/old" "$mnt/d/old" || bad "$1: warm read"
	ls "$mnt/d" >/dev/null
	kill -STOP "$ORIGIN_PID" || { echo "FAIL: cannot stop the origin" >&2; exit 1; }
	gw_wait_metric "$cdir" origin_lost 1 30 || bad "$1: the origin was not called lost"
}

# hard (the default)
test_mount "actimeo=1,offline=2"
lose_origin hard
(dd if="$work/new" of="$mnt/d/new" bs=64k conv=fsync status=none; echo $? >"$work/new.rc") &
w1=$!
(python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"tail\n"); os.fsync(fd); os.close(fd)' "$mnt/d/old"; echo $? >"$work/append.rc") &
w2=$!
sleep 4
[ -e "$work/new.rc" ] && bad "hard: a new file's write+fsync returned ($(cat "$work/new.rc")) while the origin was away"
[ -e "$work/append.rc" ] && bad "hard: an append's fsync returned ($(cat "$work/append.rc")) while the origin was away"
[ -e "$data/d/new" ] && bad "hard: the new file is at the origin, which is stopped?"
kill -CONT "$ORIGIN_PID"
wait_done "$w1" 60 || bad "hard: the new file's write did not complete within 60 s of the origin's return"
wait_done "$w2" 60 || bad "hard: the append did not complete within 60 s of the origin's return"
[ "$(cat "$work/new.rc" 2>/dev/null)" = 0 ] || bad "hard: the new file's write ended with $(cat "$work/new.rc" 2>/dev/null)"
[ "$(cat "$work/append.rc" 2>/dev/null)" = 0 ] || bad "hard: the append ended with $(cat "$work/append.rc" 2>/dev/null)"
cmp -s "$work/new" "$data/d/new" || bad "hard: the new file at the origin differs from what was written"
[ "$(tail -c 5 "$data/d/old")" = tail ] || bad "hard: the append is not at the origin"
[ "$(stat -c %s "$data/d/old")" = 100005 ] || bad "hard: the cached file at the origin is $(stat -c %s "$data/d/old") bytes, want 100005"
unmount_gateway "$mnt" || bad "hard: unmount / gateway exit (log: $GW_LOG)"

# soft
test_mount "actimeo=1,offline=2,soft,timeo=10,retrans=1"
lose_origin soft
t0=$SECONDS
if timeout -k 5 60 sh -c 'echo x >"$1"' sh "$mnt/d/soft" 2>"$work/soft.err"; then
	bad "soft: a create while the origin was away was taken"
fi
echo "  soft: the create failed after $((SECONDS - t0)) s: $(head -c 200 "$work/soft.err")" >&2
[ -e "$data/d/soft" ] && bad "soft: the file is at the origin, which is stopped?"
kill -CONT "$ORIGIN_PID"
gw_wait_metric "$cdir" origin_back_total 1 30 || bad "soft: the origin was not seen back"
unmount_gateway "$mnt" || bad "soft: unmount / gateway exit (log: $GW_LOG)"
exit $fail
