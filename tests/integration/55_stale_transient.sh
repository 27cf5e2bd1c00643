#!/bin/bash
# An origin that answers NFS3ERR_STALE for a while (failing over, an export whose file system is not mounted yet: tests/lib/hostile_proxy.py --stale-file) costs no file its node-id: with the root and every file stale, and then with only the root answering, a reclaim pass gives nothing back (aborted, counted, logged once) and GETATTRs of held files remove nothing, so afterwards every file handle taken before (name_to_handle_at) opens its file with the origin's bytes; a file really removed at the origin is still given back by the next pass (its handle ESTALE), and a removed tree that is most of the table only once the origin has looked that way for an hour (CACHEGW_INJECT_RECLAIM_PERSIST: 6 s here).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

work=$(harness_tmpdir work)
data=$(harness_tmpdir origin-data)
mkdir -p "$data/d/sub" "$data/tree/a" "$data/tree/b"
for i in $(seq 1 8); do head -c $((100 + i)) /dev/urandom >"$data/t$i"; done
for i in $(seq 1 24); do head -c $((200 + i)) /dev/urandom >"$data/d/f$i"; done
for i in $(seq 1 8); do head -c $((300 + i)) /dev/urandom >"$data/d/sub/g$i"; done
echo "held open" >"$data/d/held"
echo "removed at the origin" >"$data/d/gone"
test_origin "$data"
stale=$work/stale
test_proxy hostile_proxy.py --stale-file "$stale"
CACHEGW_INJECT_RECLAIM_PERSIST=6 test_mount "reclaim_after=0,actimeo=0"
metric() { gw_metric "$cdir" "$1"; }
# reclaim: one pass; its line on stdout.
reclaim() { cache_inspect reclaim --cache-dir "$cdir" 2>&1; }
field() { printf '%s\n' "$2" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }

# handles.py (tests/lib): take handles of a list of paths; check them.
# d/gone is never read (the origin, nfs-ganesha, would keep it open, and
# a removed file still open is not stale).
(cd "$data" && find . -type f ! -name gone -printf '%P\n' | sort) >"$work/files"
echo d/gone >"$work/gone"
nfiles=$(wc -l <"$work/files")
ls -lR "$mnt" >/dev/null || bad "listing through the mount"
"$PY" "$(dirname "$0")/../lib/handles.py" take "$work/files" "$work/handles" "$mnt" || bad "name_to_handle_at through the mount"
"$PY" "$(dirname "$0")/../lib/handles.py" take "$work/gone" "$work/handle-gone" "$mnt" || bad "name_to_handle_at of d/gone"
# check_handles WHEN [HANDLES EXPECT]: every handle opens its file with
# the origin's bytes (or gives EXPECT).
check_handles() {
	local out want=${3:-ok $nfiles}
	drop_caches
	out=$("$PY" "$(dirname "$0")/../lib/handles.py" check "${2:-$work/handles}" "$mnt" "$data" 2>&1)
	[ "$out" = "$want" ] || bad "$1: the handles taken before: $(printf '%s\n' "$out" | head -5 | tr '\n' ';') (want '$want')"
}
check_handles "before anything"
out=$(reclaim)
[ "$(field reclaimed "$out")" = 0 ] && [ -z "$(field aborted: "$out")" ] || bad "a pass with the origin well: '$out'"

# 1. The root and every file stale: a pass, and GETATTRs of a held file.
exec 3<"$mnt/d/held"
drop_caches
a0=$(metric nodes_reclaim_aborted_total)
touch "$stale"
out=$(reclaim)
echo "  root and files stale: $out" >&2
[ "$(field reclaimed "$out")" = 0 ] || bad "(1) the pass with the root stale gave back node-ids: '$out'"
case $out in *"aborted: the origin's root answers"*) ;; *) bad "(1) the pass with the root stale was not aborted: '$out'" ;; esac
for i in 1 2 3; do
	stat -L "/proc/self/fd/3" >/dev/null 2>&1 && bad "(1) a GETATTR of the held file succeeded while the origin said stale"
	stat "$mnt/d/f$i" >/dev/null 2>&1
done
out=$(reclaim)
rm -f "$stale"
exec 3<&-
[ "$(metric nodes_reclaim_aborted_total)" -ge $((${a0:-0} + 2)) ] || bad "(1) nodes_reclaim_aborted_total $a0 -> $(metric nodes_reclaim_aborted_total) over two aborted passes"
[ "$(grep -c 'reclaim pass aborted' "$GW_LOG")" = 1 ] || bad "(1) the aborted passes were logged $(grep -c 'reclaim pass aborted' "$GW_LOG") times, want once"
check_handles "(1) after the root and every file were stale"
out=$(reclaim)
[ "$(field reclaimed "$out")" = 0 ] && [ -z "$(field aborted: "$out")" ] || bad "(1) a pass after the origin is well again: '$out'"
grep -q 'reclaim passes complete again' "$GW_LOG" || bad "(1) no log line that passes complete again"

# 2. Only the root answers (a file system below it lost).
drop_caches
stat -c %i "$data" >"$stale"
out=$(reclaim)
echo "  only the root answers: $out" >&2
[ "$(field reclaimed "$out")" = 0 ] || bad "(2) the pass with only the root answering gave back node-ids: '$out'"
case $out in *"aborted: "*"answer stale and so do their directories"*) ;; *) bad "(2) the pass was not aborted: '$out'" ;; esac
rm -f "$stale"
check_handles "(2) after only the root answered"

# 3. Removed at the origin: given back (after a second answer).
rm "$data/d/gone"
drop_caches
out=$(reclaim)
echo "  one file removed: $out" >&2
[ "$(field reclaimed "$out")" = 1 ] && [ -z "$(field aborted: "$out")" ] || bad "(3) the pass after d/gone was removed at the origin: '$out', want reclaimed 1"
check_handles "(3) after d/gone was given back"
check_handles "(3) d/gone, given back" "$work/handle-gone" "d/gone: the handle taken before: Stale file handle
ok 0"

# 4. A removed tree that is most of what a pass asks about: given back
# only once the origin has looked like that for PERSIST_S (6 s).
for i in $(seq 1 40); do echo "tree a $i" >"$data/tree/a/x$i"; echo "tree b $i" >"$data/tree/b/y$i"; done
ls -lR "$mnt/tree" >/dev/null || bad "(4) listing tree"
e0=$(metric nodes_entries)
i0=$(metric inodes)
rm -rf "$data/tree"
# The kernel's FORGETs for the dropped dentries arrive when it gets to
# them (late on a loaded machine): the pass below must find the tree's
# inodes no longer held, or it does not ask the origin about them.
for i in $(seq 1 40); do
	drop_caches
	[ "$(metric inodes)" -le $((i0 - 83)) ] && break
	sleep 0.5
done
out=$(reclaim)
echo "  a tree of 83 removed: $out" >&2
case $out in *"aborted: "*) ;; *) bad "(4) the first pass after a large removal was not aborted: '$out'" ;; esac
sleep 7
out=$(reclaim)
echo "  again, 7 s later: $out" >&2
[ "$(field reclaimed "$out")" -ge 83 ] && [ -z "$(field aborted: "$out")" ] || bad "(4) the pass after PERSIST_S: '$out', want reclaimed >= 83"
[ "$(metric nodes_entries)" -le $((e0 - 83)) ] || bad "(4) nodes_entries $e0 -> $(metric nodes_entries)"
check_handles "(4) after the tree was given back"
sanitizer_check "$GW_LOG" || bad "sanitizer report in the gateway's log"
exit $fail
