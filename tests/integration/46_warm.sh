#!/bin/bash
# cachegw-inspect warm and top, and the control socket serving clients side by side (stats answered while a cached waits on a stopped origin): --dry-run on a cold tree lists every file and fetches nothing; warm of a tree makes every byte cached (and says how many), after which reading the tree gives the origin's bytes with 0 bytes from the origin; a second warm skips everything; paths outside the mount are refused; top --once shows a non-zero origin read rate while a reader runs.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
trap '[ -n "${ORIGIN_PID:-}" ] && kill -CONT "$ORIGIN_PID" 2>/dev/null; harness_cleanup' EXIT

data=$(harness_tmpdir origin-data)
fill_tree "$data/tree" || exit 1
mkdir "$data/cold"
for ((i = 0; i < 400; i++)); do head -c 32768 /dev/urandom >"$data/cold/c$i"; done
test_origin "$data"
work=$(harness_tmpdir work)
# actimeo=0: step 6 changes a file at the origin and warms it at once; the
# kernel reads a file only up to the size it holds, which (with the
# default attribute cache) may still be the old one for a few seconds.
test_mount -n actimeo=0
warm() { timeout 300 "$CACHEGW_INSPECT" warm --cache-dir "$cdir" "$@"; }

# What warm should find: the tree's regular files, and the non-empty ones
# (an empty file has nothing to cache).
nfiles=$(find "$data/tree" -type f | wc -l)
nonempty=$(find "$data/tree" -type f -size +0 | wc -l)
bytes=$(find "$data/tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')

# ---- 1. --dry-run on a cold tree: lists each non-empty file, reads nothing.
warm --dry-run "$mnt/tree" >"$work/dry" 2>"$work/dry.err" || bad "warm --dry-run: exit $? ($(head -c 300 "$work/dry.err"))"
n=$(grep -c '^missing ' "$work/dry")
[ "$n" = "$nonempty" ] || bad "warm --dry-run listed $n files, want the $nonempty non-empty files of the tree"
grep -q "^missing [0-9]* of [0-9]* bytes: tree/$FILL_BIG\$" "$work/dry" || bad "warm --dry-run does not list tree/$FILL_BIG"
grep -q "^missing [0-9]* of [0-9]* bytes: tree/name with spaces.txt\$" "$work/dry" || bad "warm --dry-run does not list 'tree/name with spaces.txt'"
grep -q "bytes: tree/link_to_file\$" "$work/dry" && bad "warm --dry-run follows symlinks"
grep -q "^$nonempty of $nfiles files not fully cached, $bytes bytes missing\$" "$work/dry" ||
	bad "warm --dry-run summary: '$(tail -1 "$work/dry")', want '$nonempty of $nfiles files not fully cached, $bytes bytes missing'"
o=$(gw_metric "$cdir" origin_read_bytes_total)
[ "$o" = 0 ] || bad "warm --dry-run fetched $o bytes from the origin, want 0"
objs=$(cache_inspect ls --cache-dir "$cdir" | grep -c '^[0-9a-f]\{16\} ')
[ "$objs" = 0 ] || bad "warm --dry-run made $objs cache objects, want 0"

# ---- 2. Paths outside the mount are refused (exit 2), nothing is read.
warm "$data/tree" >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 2 ] || bad "warm of a path outside the mount: exit $rc, want 2"
grep -q "is not inside $mnt" "$work/err" || bad "warm of a path outside the mount: stderr '$(head -c 300 "$work/err")'"
warm "$mnt/does-not-exist" >"$work/out" 2>"$work/err" && bad "warm of a missing path: exit 0"

# ---- 3. top --once while a reader reads cold files: a non-zero origin
# read rate. The reader paces itself so that it spans the sample.
(
	for ((i = 0; i < 400; i++)); do
		cat "$mnt/cold/c$i" >/dev/null
		sleep 0.01
	done
) &
rd=$!
harness_register_pid "$rd"
gw_wait_metric "$cdir" origin_read_bytes_total 1 20 || bad "the reader of cold files fetched nothing"
timeout 30 "$CACHEGW_INSPECT" top --cache-dir "$cdir" --once >"$work/top" 2>"$work/top.err" || bad "top --once: exit $? ($(head -c 300 "$work/top.err"))"
pid_alive "$rd" || echo "note: the reader finished before top --once did; its rate may be 0" >&2
pid_stop "$rd" 5
[ "$(head -1 "$work/top" | awk '{ print $1, $2 }')" = "time orig_rdMB" ] || bad "top --once: no header: $(head -2 "$work/top")"
[ "$(grep -c '^[0-9][0-9]:[0-9][0-9]:[0-9][0-9] ' "$work/top")" = 1 ] || bad "top --once: not exactly one sample line: $(cat "$work/top")"
r=$(awk '/^[0-9][0-9]:[0-9][0-9]:[0-9][0-9] / { print $2 }' "$work/top")
awk -v r="${r:-0}" 'BEGIN { exit !(r > 0) }' || bad "top --once while reading: origin read rate '${r:-none}' MB/s, want > 0: $(cat "$work/top")"

# ---- 4. warm the tree: exit 0, plain lines (not a tty), every byte cached.
warm -j 4 "$mnt/tree" >"$work/warm1" 2>"$work/warm1.err" || bad "warm: exit $? ($(head -c 300 "$work/warm1.err"))"
grep -q $'\r' "$work/warm1" && bad "warm to a file wrote carriage returns (progress is for terminals)"
n=$(grep -c '^read ' "$work/warm1")
[ "$n" = "$nonempty" ] || bad "warm read $n files, want $nonempty"
sum=$(tail -1 "$work/warm1")
made=$(sed -n 's/.* \([0-9]*\) bytes made cached.*/\1/p' <<<"$sum")
[ "$made" = "$bytes" ] || bad "warm reports '${made:-?}' bytes made cached, want $bytes (summary: $sum)"
# The empty files have nothing to fetch: they count as cached already.
case $sum in "warmed $nonempty files ($((nfiles - nonempty)) already cached, 0 failed): "*) ;; *) bad "warm summary: '$sum'" ;; esac
o1=$(gw_metric "$cdir" origin_read_bytes_total)

# Reading the tree now fetches nothing, and gives the origin's bytes.
drop_caches
harness_timeout 300 tree_manifest "$mnt/tree" >"$work/m.mnt"
tree_manifest "$data/tree" >"$work/m.origin"
diff "$work/m.origin" "$work/m.mnt" >"$work/m.diff" || bad "tree through the mount differs from the origin's: $(head -5 "$work/m.diff")"
o2=$(gw_metric "$cdir" origin_read_bytes_total)
[ "$o2" = "$o1" ] || bad "reading the warmed tree fetched $((o2 - o1)) bytes from the origin, want 0"
h=$(gw_metric "$cdir" cache_hit_bytes_total)
[ "${h:-0}" -gt 0 ] || bad "reading the warmed tree: no cache hits"

# ---- 5. A second warm skips everything and makes nothing cached.
warm "$mnt/tree" >"$work/warm2" 2>"$work/warm2.err" || bad "second warm: exit $?"
grep -q '^read ' "$work/warm2" && bad "second warm read files again: $(grep -m3 '^read ' "$work/warm2")"
sum=$(tail -1 "$work/warm2")
case $sum in "warmed 0 files ($nfiles already cached, 0 failed): 0 bytes read, 0 bytes made cached"*) ;;
*) bad "second warm summary: '$sum'" ;; esac
o3=$(gw_metric "$cdir" origin_read_bytes_total)
[ "$o3" = "$o2" ] || bad "second warm fetched $((o3 - o2)) bytes from the origin"
warm --dry-run "$mnt/tree" >"$work/dry2" || bad "warm --dry-run on a warm tree: exit $?"
grep -q '^missing ' "$work/dry2" && bad "warm --dry-run on a warm tree lists: $(grep -m3 '^missing ' "$work/dry2")"

# ---- 6. A file changed at the origin is missing again; warm fetches it.
head -c 100000 /dev/urandom >"$data/tree/edge_64k"
warm --dry-run "$mnt/tree/edge_64k" >"$work/dry3"
grep -q '^missing 100000 of 100000 bytes: tree/edge_64k$' "$work/dry3" || bad "a file changed at the origin is not missing: $(cat "$work/dry3")"
warm "$mnt/tree/edge_64k" >"$work/warm3" || bad "warm of one changed file: exit $?"
grep -q ' 100000 bytes made cached' "$work/warm3" || bad "warm of one changed file: $(tail -1 "$work/warm3")"
[ "$(sha256sum <"$mnt/tree/edge_64k")" = "$(sha256sum <"$data/tree/edge_64k")" ] || bad "changed file: bytes differ"

# ---- 7. Control commands do not wait for each other: with the origin
# stopped, a `cached` of a name never looked up waits for its LOOKUP, and
# `stats` is still answered; once the origin runs again, so is `cached`.
# (One control thread served one client at a time: stats waited behind it.)
mkdir "$data/late" && echo late >"$data/late/f"
cached_q() { # REL: send "cached REL", print the reply line
	python3 - "$cdir/control.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(("cached %s\n" % sys.argv[2]).encode())
print(s.makefile().read().strip())
PY
}
kill -STOP "$ORIGIN_PID"
cached_q late/f >"$work/cached7" 2>&1 &
qpid=$!
sleep 1
t0=$(date +%s)
timeout 10 "$CACHEGW_INSPECT" stats --cache-dir "$cdir" >"$work/stats7" 2>&1 ||
	bad "(7) stats not answered within 10 s while a cached waits on a stopped origin (exit $?)"
grep -q '^origin_read_bytes_total' "$work/stats7" || bad "(7) stats output: $(head -c 200 "$work/stats7")"
echo "  (7) stats answered in $(( $(date +%s) - t0 )) s with the origin stopped" >&2
kill -0 "$qpid" 2>/dev/null || bad "(7) cached answered while the origin was stopped: $(cat "$work/cached7")"
kill -CONT "$ORIGIN_PID"
for ((i = 0; i < 300; i++)); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
wait "$qpid" || bad "(7) cached client exit $?"
grep -q '^file 5 0 0$' "$work/cached7" || bad "(7) cached late/f after the origin came back: '$(cat "$work/cached7")'"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
[ $fail = 0 ] || { echo "--- gateway log:" >&2; tail -n 20 "$GW_LOG" >&2; }
exit $fail
