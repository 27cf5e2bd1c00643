#!/bin/bash
# An upgrade in place from a binary of takeover state version 2 (CACHEGW_OLD_BINARY, e.g. a build of commit 22349c0; skipped without it): a supervised mount made by the old binary, under fio --verify (a writer and a reader), a file held open and a reader looping through the mount, the start command run again with this binary: it is refused for its version, asks again for version 2, converts the state and serves: the loop sees no error, the held file still reads equal to the origin's, the old supervisor is gone; the new serving process killed with SIGKILL, its supervisor starts a successor on the converted state; fio exits 0 with no verify error; fcntl locks through the upgraded mount are taken and conflict (in the host's kernel: the connection was negotiated without lock requests until the next mount); an upgrade from the converted state to this binary again works; the old binary asked to take over from this one is refused (no downgrade, one line naming its older version) and the mount serves on.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
test_require_cmd fio
L=$(dirname "$0")/../lib/locker.py
if ! python3 -c 'import os,sys; v=tuple(int(x) for x in os.uname().release.split(".")[:2]); sys.exit(0 if v >= (6, 9) else 1)'; then
	echo "SKIP: takeover needs FUSE_NOTIFY_RESEND (Linux >= 6.9), this is $(uname -r)" >&2
	exit 77
fi
if [ -z "${CACHEGW_OLD_BINARY:-}" ] || [ ! -x "$CACHEGW_OLD_BINARY" ]; then
	echo "SKIP: CACHEGW_OLD_BINARY (a cachegw of takeover state version 2) not given" >&2
	exit 77
fi
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
mkdir -p "$data/d" "$data/fio"
for i in 1 2 3; do head -c $((i * 300000 + 7)) /dev/urandom >"$data/d/f$i"; done
head -c 4096 /dev/urandom >"$data/lk"
ORIGIN_NLM_PORT=$((ORIGIN_NFS_PORT + 3)) test_origin "$data"
CACHEGW=$CACHEGW_OLD_BINARY test_mount "supervise,logfile=$work/gw.log"
opts="cache_dir=$cdir,supervise,logfile=$work/gw.log${CACHEGW_TEST_GW_OPTS:+,$CACHEGW_TEST_GW_OPTS}"
upgrade() { "$1" "$ORIGIN_URL" "$mnt" -o "$opts" </dev/null 3<&- 4<&- 2>"$work/upgrade.err"; }
gw_register_serving "$cdir"
old=$(gw_serving "$cdir")
oldsup=$(gw_metric "$cdir" supervisor_pid)
[ -n "$old" ] && [ -n "$oldsup" ] && [ "$oldsup" != 0 ] ||
	{ bad "the old binary's mount: no serving pid ($old) or supervisor ($oldsup)"; exit 1; }

# fio writing and reading (verified) across the upgrade and the kill.
fio --name=prep --directory="$mnt/fio" --filename=r.dat --rw=write --bs=64k \
	--size=8M --verify=crc32c --do_verify=0 --verify_state_save=0 >"$work/fio-prep.out" 2>&1 ||
	bad "fio could not write the reader's file: $(tail -3 "$work/fio-prep.out")"
fio --directory="$mnt/fio" --time_based --runtime=8 --bs=64k \
	--name=w --rw=randwrite --size=4M --verify=crc32c --verify_backlog=16 --verify_state_save=0 \
	--name=r --filename=r.dat --rw=randread --size=8M --verify=crc32c \
	>"$work/fio.out" 2>&1 &
fio_pid=$!
# A file held open across the upgrades, and a reader looping.
exec 5<"$mnt/d/f1"
(
	n=0
	while [ ! -e "$work/stop" ]; do
		for i in 1 2 3; do
			cmp -s "$mnt/d/f$i" "$data/d/f$i" || echo "loop $n: d/f$i differs or fails" >>"$work/loop.err"
		done
		ls "$mnt/d" >/dev/null 2>&1 || echo "loop $n: ls fails" >>"$work/loop.err"
		n=$((n + 1))
	done
	echo "$n" >"$work/loops"
) &
loop=$!
harness_register_pid "$loop"
sleep 1

# ---- the upgrade from version 2
upgrade "$CACHEGW" || { bad "the upgrade from the old binary: exit $? ($(tail -2 "$work/upgrade.err"))"; exit 1; }
new=$(gw_serving "$cdir")
[ -n "$new" ] && [ "$new" != "$old" ] || bad "no new serving process after the upgrade (old $old, now '$new')"
gw_register_serving "$cdir"
grep -q "keeps takeover state version 2: taking it over" "$work/gw.log" ||
	bad "the log does not say the version 2 state was taken: $(grep takeover "$work/gw.log" | tail -3)"
grep -q "its takeover state converted" "$work/gw.log" || bad "the log does not say the state was converted"
grep -q "without fcntl and flock lock requests" "$work/gw.log" ||
	bad "the log does not say locks stay in the host's kernel"
pid_wait_exit "$old" 30 || bad "the old serving process $old still runs"
pid_wait_exit "$oldsup" 30 || bad "the old supervisor $oldsup still runs"
cmp -s <(cat <&5) "$data/d/f1" || bad "the file held open across the upgrade does not read as the origin's"
exec 5<&-

# ---- a crash: the new supervisor's successor opens the converted state
p=$(gw_serving "$cdir")
kill -KILL "$p" 2>/dev/null || bad "no serving process $p to kill"
gw_wait_successor "$cdir" "$p" || bad "no successor after the kill of $p"
wait "$fio_pid"
rc=$?
[ $rc = 0 ] || bad "fio exit $rc: $(grep -iE 'verify|err=' "$work/fio.out" | head -5)"
grep -qi 'verify: bad' "$work/fio.out" && bad "fio found bad data: $(grep -i -m3 'verify: bad' "$work/fio.out")"

# ---- locks through the upgraded mount: taken, and they conflict
MODE=hold "$PY" "$L" posix w 0 100 "$mnt/lk" >"$work/holder" 2>&1 &
holder=$!
harness_register_pid "$holder"
for ((i = 0; i < 300; i++)); do grep -qx locked "$work/holder" && break; sleep 0.1; done
grep -qx locked "$work/holder" || bad "no lock taken through the upgraded mount: $(cat "$work/holder")"
r=$(MODE=try timeout 60 "$PY" "$L" posix w 50 10 "$mnt/lk" 2>&1)
[ "$r" = EAGAIN ] || bad "a lock over a held one through the upgraded mount: '$r', not EAGAIN"
r=$(MODE=try timeout 60 "$PY" "$L" posix w 200 10 "$mnt/lk" 2>&1)
[ "$r" = ok ] || bad "a lock beside a held one through the upgraded mount: '$r', not ok"

# ---- again with this binary, from the converted state
p=$(gw_serving "$cdir")
upgrade "$CACHEGW" || bad "the second upgrade: exit $? ($(tail -2 "$work/upgrade.err"))"
q=$(gw_serving "$cdir")
[ -n "$q" ] && [ "$q" != "$p" ] || bad "no new serving process after the second upgrade (was $p, now '$q')"
gw_register_serving "$cdir"
r=$(MODE=try timeout 60 "$PY" "$L" posix w 50 10 "$mnt/lk" 2>&1)
[ "$r" = EAGAIN ] || bad "after the second upgrade, a lock over the held one: '$r', not EAGAIN"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
r=$(MODE=try timeout 60 "$PY" "$L" posix w 50 10 "$mnt/lk" 2>&1)
[ "$r" = ok ] || bad "the holder gone, a lock: '$r', not ok"

# ---- no downgrade: the old binary is refused, the mount serves on
out=$("$CACHEGW_OLD_BINARY" "$ORIGIN_URL" "$mnt" -o "$opts" </dev/null 3<&- 4<&- 2>&1)
rc=$?
[ $rc = 1 ] || bad "the old binary taking over from this one: exit $rc, not 1 ($out)"
case $out in
*"refused: "*"state version 3"*"the new one 2"*"older"*) ;;
*) bad "the old binary's refusal does not say why: '$out'" ;;
esac
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || bad "the refusal is not one line: $out"
[ "$(gw_serving "$cdir")" = "$q" ] || bad "after the refused downgrade the serving process changed"

touch "$work/stop"
wait "$loop"
[ -s "$work/loop.err" ] && bad "the reader loop saw errors: $(head -3 "$work/loop.err")"
echo "  reader loops: $(cat "$work/loops" 2>/dev/null)" >&2
for i in 1 2 3; do
	cmp -s "$mnt/d/f$i" "$data/d/f$i" || bad "d/f$i after the upgrades differs from the origin's"
done
gw_stop_supervised "$cdir" "$mnt" "$work/gw.log" || fail=1
exit $fail
