#!/bin/bash
# Guest test: offline= under knfsd. ganesha origin → cachegw (offline=3) → knfsd re-export → kernel NFS clients (v3 and v4.2, hard): the tree read through both clients; the origin stopped (SIGSTOP); once the gateway calls it lost, both clients read every cached file byte for byte and list the directories, and a file never read fails at once (EIO, not a hang); the origin back, that file reads right through both clients.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start inspect
trap 'kill -CONT "${ORIGIN_PID:-0}" 2>/dev/null; vm_cleanup' EXIT

data=$(harness_tmpdir origin-data)
(
	set -e
	mkdir -p "$data/d/sub" "$data/e"
	for i in 1 2 3 4 5 6; do head -c $((i * 7000 + 1)) /dev/urandom >"$data/d/f$i"; done
	head -c $((2 * 1048576 + 77)) /dev/urandom >"$data/e/big"
	head -c 9000 /dev/urandom >"$data/d/sub/deep"
	head -c 5000 /dev/urandom >"$data/never"
) || { echo "cannot make the origin's files" >&2; exit 1; }
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,actimeo=1,offline=3" || exit 1

vm_reexport_clients "$mnt" 7381 || exit 1	# hard mounts, actimeo=0

files="d/f1 d/f2 d/f3 d/f4 d/f5 d/f6 d/sub/deep e/big"
step "warm: the tree read through both clients"
for c in "$c3" "$c4"; do
	ls -R "$c/d" "$c/e" >/dev/null || bad "warm: listing through $c"
	for f in $files; do
		cmp -s "$data/$f" "$c/$f" || bad "warm: $f through $c differs"
	done
done
ls "$c3" >/dev/null

step "the origin stops"
kill -STOP "$ORIGIN_PID" || { echo "FAIL: cannot stop the origin" >&2; exit 1; }
gw_wait_metric "$cdir" origin_lost 1 60 || bad "the gateway did not call the origin lost"
sleep 1.5	# past actimeo=1: the gateway's attributes are all old now
echo 3 >/proc/sys/vm/drop_caches	# the clients' page caches too

for c in "$c3" "$c4"; do
	v=$(basename "$c" | cut -d. -f1)
	step "$v: offline reads"
	for f in $files; do
		timeout -k 5 60 cmp -s "$data/$f" "$c/$f" || bad "$v offline: $f differs or failed"
	done
	[ "$(cd "$c/d" && timeout 60 ls | sort | tr '\n' ' ')" = "$(cd "$data/d" && ls | sort | tr '\n' ' ')" ] ||
		bad "$v offline: the listing of d differs: $(timeout 60 ls "$c/d" 2>&1 | tr '\n' ' ')"
	t0=$SECONDS
	if timeout -k 5 60 cat "$c/never" >/dev/null 2>"$HARNESS_TMP/never.$v"; then
		bad "$v offline: a file never read was read with the origin stopped"
	fi
	[ $((SECONDS - t0)) -lt 30 ] || bad "$v offline: the file never read took $((SECONDS - t0)) s to fail"
	echo "  $v: never read: $(head -c 200 "$HARNESS_TMP/never.$v")" >&2
done
[ "$(gw_metric "$cdir" offline_answers_total)" -gt 0 ] || bad "offline_answers_total did not move"

step "the origin is back"
kill -CONT "$ORIGIN_PID"
gw_wait_metric "$cdir" origin_back_total 1 60 || bad "the origin was not seen back"
for c in "$c3" "$c4"; do
	timeout 120 cmp -s "$data/never" "$c/never" || bad "after the origin is back: never through $c"
done
step "done"
exit $fail
