#!/bin/bash
# A fleet: two gateways on one origin with their own cache_dirs and one store (a real PostgreSQL 15) name every file alike, so every file handle taken on A (name_to_handle_at) opens on B (open_by_handle_at) with the origin's bytes, B never having seen the names, and the same through two re-exports (an NFS handle taken through nfs-ganesha re-exporting A reads the origin's bytes through another nfs-ganesha re-exporting B, restarted empty); a file rewritten or made and fsynced through A reads the same through B; 8 writers making files through A at once: their new names reach the store in fewer round trips than names (group commit), and each file's handle opens on B with its bytes; both walked the tree at the same moment and still agree byte for byte on every handle; B restarted on an empty cache_dir still opens them all; a cold walk costs about one store round trip per directory, not per file; with the store stopped, what B knows keeps working, A restarts on what its cache_dir kept, and a new name waits (hard) until the store is back, a caller waiting for it killable, while a soft gateway lists new names and fails a new name with EIO (lost and back logged once each); a third gateway's cold walk started with the store away and the store started again: the walk finishes with the origin's sizes and the same handles; a store replaced by an empty one: a gateway of the old one answers a new name EIO, says why, and keeps its own handles; a fleet's cache_dir without fleet=, and a cache_dir with node-ids of its own with fleet=, are refused with a message.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
test_require_fhclient
H=$(dirname "$0")/../lib/handles.py
# The re-exporters hold the gateways' mounts busy: stopped first.
trap 'origin_stop reexpa; origin_stop reexpb; harness_cleanup' EXIT

ndirs=20
per=${CACHEGW_TEST_FLEET_PER_DIR:-60}
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
"$PY" - "$data" "$ndirs" "$per" <<-'PY'
	import os, random, sys
	top, nd, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
	r = random.Random(7)
	for d in range(nd):
	    p = os.path.join(top, "d%02d" % d)
	    os.makedirs(p)
	    for f in range(per):
	        with open(os.path.join(p, "f%04d" % f), "wb") as o:
	            o.write(os.urandom(r.randrange(1, 3000)))
	os.makedirs(os.path.join(top, "a/b/c"))
	with open(os.path.join(top, "a/b/c/deep"), "wb") as o:
	    o.write(b"deep file\n")
	PY
test_origin "$data"
store_start store "$STORE_PORT" || { echo "FAIL: the store did not start" >&2; exit 1; }
fleet="fleet=$STORE_CONNINFO"

mntA=$(harness_tmpdir mntA)
cA=$(harness_tmpdir cacheA)
mount_gateway "$ORIGIN_URL" "$mntA" "cache_dir=$cA,$fleet,fleet_member=a" ||
	{ echo "FAIL: gateway A did not mount" >&2; exit 1; }
pidA=$GW_PID logA=$GW_LOG
mntB=$(harness_tmpdir mntB)
cB=$(harness_tmpdir cacheB)
mount_gateway "$ORIGIN_URL" "$mntB" "cache_dir=$cB,$fleet,fleet_member=b" ||
	{ echo "FAIL: gateway B did not mount" >&2; exit 1; }
pidB=$GW_PID logB=$GW_LOG

(cd "$data" && find . -type f -printf '%P\n' | sort) >"$work/files"
nfiles=$(wc -l <"$work/files")

echo "  at ${SECONDS}s: step 1" >&2
# 1. Both gateways walk half the tree at the same moment (each names the
# same new files: the store must give each one node-id), then A walks
# the whole tree (a cold walk: one store round trip per listing).
walkers=()
for d in $(seq -f 'd%02g' 0 $((ndirs / 2 - 1))); do
	ls -l "$mntA/$d" >/dev/null &
	walkers+=($!)
	ls -l "$mntB/$d" >/dev/null &
	walkers+=($!)
done
wait "${walkers[@]}"
ls -lR "$mntA" >/dev/null || bad "ls -lR on A"
"$PY" "$H" take "$work/files" "$work/hA" "$mntA" || bad "name_to_handle_at on A"
assign=$(gw_metric "$cA" fleet_assign_calls_total)
[ -n "$assign" ] && [ "$assign" -le $((ndirs * 3 + 20)) ] ||
	bad "A named $nfiles files in $assign store round trips (want about one per directory, at most $((ndirs * 3 + 20)))"
echo "  A: $nfiles files named in $assign assign round trips" >&2
# Every file's NFS handle through nfs-ganesha re-exporting A, with the
# fleet's FSAL setting (doc/fleet.md: no device number in the handle).
GANESHA_FSAL_OPTS="fsid_type = Major64;" \
	origin_start reexpa "$mntA" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" ||
	{ echo "FAIL: the re-exporter of A did not start" >&2; exit 1; }
"$FHCLIENT" gethandles "$REEXPA_URL" <"$work/files" >"$work/nA" ||
	bad "NFS handles through A's re-export"
origin_stop reexpa

echo "  at ${SECONDS}s: step 2" >&2
# 2. Every handle of A opens on B with the origin's bytes; B never looked
# up the other half's names.
drop_caches
out=$("$PY" "$H" check "$work/hA" "$mntB" "$data" 2>&1)
[ "$out" = "ok $nfiles" ] || bad "A's handles on B: $(printf '%s\n' "$out" | head -3 | tr '\n' ';') (want ok $nfiles)"
resolve=$(gw_metric "$cB" fleet_resolve_calls_total)
[ "${resolve:-0}" -gt 0 ] || bad "B opened handles it never named without asking the store (resolve calls: '$resolve')"
"$PY" "$H" take "$work/files" "$work/hB" "$mntB" || bad "name_to_handle_at on B"
cmp -s "$work/hA" "$work/hB" || bad "A and B give different handles for the same file: $(diff "$work/hA" "$work/hB" | head -2 | tr '\n' ';')"
# ".." of a directory B never saw, from a handle: a deep directory's
# parent chain (open_by_handle_at of a directory reconnects it).
echo a/b/c >"$work/dir"
"$PY" "$H" take "$work/dir" "$work/hdir" "$mntA" || bad "handle of a directory on A"

# Written and fsynced through A (a file B has cached, and a new one):
# read through B, it is what was written (close-to-open on each gateway).
cat "$mntB/d00/f0000" >/dev/null
head -c 300000 /dev/urandom >"$work/w1"
"$PY" -c 'import os, sys
for dst in sys.argv[2:]:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, open(sys.argv[1], "rb").read()); os.fsync(fd); os.close(fd)' \
	"$work/w1" "$mntA/d00/f0000" "$mntA/d00/written-on-a" || bad "writing through A"
cmp -s "$work/w1" "$mntB/d00/f0000" || bad "a file rewritten and fsynced through A reads otherwise through B"
cmp -s "$work/w1" "$mntB/d00/written-on-a" || bad "a file made and fsynced through A reads otherwise through B"

# 8 writers making files through A at once, each file its own bytes: the
# new names that wait while an assign is in flight go to the store
# together (group commit: fewer round trips than names), and every one
# of their handles opens on B with the bytes written.
a0=$(gw_metric "$cA" fleet_assign_calls_total)
n0=$(gw_metric "$cA" fleet_names_total)
"$PY" - "$mntA/made" <<-'PY' || bad "8 writers making files through A"
	import os, sys, threading
	top, errs = sys.argv[1], []
	os.mkdir(top)
	def writer(k):
	    try:
	        d = os.path.join(top, "w%d" % k)
	        os.mkdir(d)
	        for i in range(24):
	            fd = os.open(os.path.join(d, "f%02d" % i),
	                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
	            os.write(fd, b"%d/%d\n" % (k, i) * (i + 1))
	            os.close(fd)
	    except OSError as e:
	        errs.append(e)
	ts = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
	for t in ts:
	    t.start()
	for t in ts:
	    t.join()
	for e in errs:
	    print(e)
	sys.exit(1 if errs else 0)
	PY
a1=$(gw_metric "$cA" fleet_assign_calls_total)
n1=$(gw_metric "$cA" fleet_names_total)
[ $((a1 - a0)) -lt $((n1 - n0)) ] ||
	bad "A named $((n1 - n0)) names made by 8 writers at once in $((a1 - a0)) store round trips (want fewer: names waiting together go in one)"
echo "  A: $((n1 - n0)) names made by 8 writers in $((a1 - a0)) assign round trips" >&2
(cd "$data" && find made -type f | sort) >"$work/made"
"$PY" "$H" take "$work/made" "$work/hmade" "$mntA" || bad "handles of the files made through A"
out=$("$PY" "$H" check "$work/hmade" "$mntB" "$data" 2>&1)
[ "$out" = "ok 192" ] || bad "handles of files made through A on B: $(printf '%s\n' "$out" | head -3 | tr '\n' ';') (want ok 192)"

# The fleet as an operator sees it: both members, the store connected.
out=$(cache_inspect fleet --cache-dir "$cA" 2>&1)
case $out in *"store: connected"*"members: 2"*" a "*" b "*) ;; *) bad "cachegw-inspect fleet on A: '$out'" ;; esac

echo "  at ${SECONDS}s: step 3" >&2
# 3. B restarted on an empty cache_dir: A's handles still open on B.
unmount_gateway "$mntB" "$pidB" "$logB" || bad "unmount B (log: $logB)"
cB2=$(harness_tmpdir cacheB2)
mount_gateway "$ORIGIN_URL" "$mntB" "cache_dir=$cB2,$fleet,fleet_member=b" ||
	{ echo "FAIL: gateway B did not mount again" >&2; exit 1; }
pidB=$GW_PID logB=$GW_LOG
# The NFS handles of A's re-export, sent to another nfs-ganesha
# re-exporting B (which knows no name yet): every one reads the origin's
# bytes, and B's re-export gives the same handles.
GANESHA_FSAL_OPTS="fsid_type = Major64;" \
	origin_start reexpb "$mntB" "$((REEXPORT_NFS_PORT + 2))" "$((REEXPORT_MNT_PORT + 2))" ||
	{ echo "FAIL: the re-exporter of B did not start" >&2; exit 1; }
out=$("$FHCLIENT" checkfhs "$REEXPB_URL" "$data" <"$work/nA" 2>&1)
[ "$(printf '%s\n' "$out" | tail -1)" = "ok $nfiles" ] ||
	bad "A's re-export handles through B's re-export: $(printf '%s\n' "$out" | head -3 | tr '\n' ';') (want ok $nfiles)"
"$FHCLIENT" gethandles "$REEXPB_URL" <"$work/files" >"$work/nB" ||
	bad "NFS handles through B's re-export"
cmp -s "$work/nA" "$work/nB" || bad "A's and B's re-exports give different handles: $(diff "$work/nA" "$work/nB" | head -2 | tr '\n' ';')"
origin_stop reexpb
drop_caches
out=$("$PY" "$H" check "$work/hA" "$mntB" "$data" 2>&1)
[ "$out" = "ok $nfiles" ] || bad "A's handles on B restarted empty: $(printf '%s\n' "$out" | head -3 | tr '\n' ';')"

# D: soft (timeo=10,retrans=1: a 3 s timeout for the store too).
mntD=$(harness_tmpdir mntD)
cD=$(harness_tmpdir cacheD)
mount_gateway "$ORIGIN_URL" "$mntD" "cache_dir=$cD,$fleet,fleet_member=d,soft,timeo=10,retrans=1,actimeo=0" ||
	{ echo "FAIL: gateway D did not mount" >&2; exit 1; }
pidD=$GW_PID logD=$GW_LOG
mkdir "$data/newdir"
ls "$mntD/newdir" >/dev/null || bad "soft D listing newdir"

echo "  at ${SECONDS}s: step 4" >&2
# 4. The store stopped: what B knows keeps working; a new name waits for
# the store (hard) and gets the right answer once it is back.
store_stop store
drop_caches
out=$("$PY" "$H" check "$work/hA" "$mntB" "$data" 2>&1)
[ "$out" = "ok $nfiles" ] || bad "with the store away, handles B knows: $(printf '%s\n' "$out" | head -3 | tr '\n' ';')"
# Soft D with the store away: a directory it knows, with new files, is
# listed (names only), and a new name fails with EIO after the timeout.
touch "$data/newdir/x" "$data/newdir/y"
ls "$mntD/newdir" >"$work/ls-D" 2>&1 || bad "soft D listing a new directory with the store away: $(cat "$work/ls-D")"
[ "$(tr '\n' ' ' <"$work/ls-D")" = "x y " ] || bad "soft D's listing with the store away: '$(cat "$work/ls-D")'"
out=$(stat -c %s "$mntD/newdir/x" 2>&1) && bad "soft D stat of a new name with the store away succeeded: $out"
case $out in *"Input/output error"*) ;; *) bad "soft D stat with the store away: '$out' (want EIO)" ;; esac
# A restarted while the store is away starts on what its cache_dir kept,
# and every handle it knew opens.
unmount_gateway "$mntA" "$pidA" "$logA" || bad "unmount A (log: $logA)"
mount_gateway "$ORIGIN_URL" "$mntA" "cache_dir=$cA,$fleet,fleet_member=a" ||
	{ echo "FAIL: A did not start again with the store away" >&2; exit 1; }
pidA=$GW_PID logA=$GW_LOG
out=$("$PY" "$H" check "$work/hA" "$mntA" "$data" 2>&1)
[ "$out" = "ok $nfiles" ] || bad "A restarted with the store away, its own handles: $(printf '%s\n' "$out" | head -3 | tr '\n' ';')"
# A caller waiting for the store stays killable (knfsd stopping its
# threads in a failover waits for them): its request interrupted, the
# wait ends.
echo "another made while the store was away" >"$data/new-file2"
timeout -k 30 2 stat "$mntB/new-file2" >/dev/null 2>"$work/new2-err" &
statpid=$!
for ((i = 0; i < 100; i++)); do
	pid_alive "$statpid" || break
	sleep 0.1
done
if pid_alive "$statpid"; then
	bad "a caller waiting for the store is not killable: there 10 s after timeout 2 ended it"
else
	wait "$statpid"
	st=$?
	[ "$st" = 124 ] || bad "a caller waiting for the store: status $st (want 124, ended by timeout): $(cat "$work/new2-err")"
fi
echo "made while the store was away" >"$data/new-file"
cat "$mntB/new-file" >"$work/new-out" 2>"$work/new-err" &
catpid=$!
sleep 2
pid_alive "$catpid" || bad "a new name with the store away did not wait (hard): $(cat "$work/new-err")"
# Soft D keeps asking while the store starts (each failed try puts the
# next one off): once the store answers, D's next call reaches it, not an
# EIO because a retry was not yet due.
mkdir "$data/pester"
touch "$data/newdir/z" "$data/pester/"{1..300}
(for i in {1..300}; do stat "$mntD/pester/$i" >/dev/null 2>&1; sleep 0.05; done) &
pester=$!
store_start store || { echo "FAIL: the store did not start again" >&2; exit 1; }
kill "$pester"; wait "$pester" 2>/dev/null
out=$(stat -c %s "$mntD/newdir/z" 2>&1) || bad "soft D's first call once the store answers again: $out"
wait "$catpid" || bad "reading a new name after the store came back: $(cat "$work/new-err")"
cmp -s "$work/new-out" "$data/new-file" || bad "the new file's bytes after the store came back"
for l in "fleet store lost" "fleet store back"; do
	n=$(grep -c "$l" "$logB")
	[ "$n" = 1 ] || bad "B logged '$l' $n times (want once)"
done
# A, idle through it, still names new files.
ls -l "$mntA/" >/dev/null || bad "A listing after the store's restart"
"$PY" "$H" take <(echo new-file) "$work/hnew" "$mntA" || bad "handle of new-file on A"
out=$("$PY" "$H" check "$work/hnew" "$mntB" "$data" 2>&1)
[ "$out" = "ok 1" ] || bad "new-file's handle from A on B: $out"

echo "  at ${SECONDS}s: step 5" >&2
# 5. The store stopped, a cold walk of a new gateway C started, the store
# started again: the walk finishes, every file's size is the origin's,
# and C's handles open on B.
mntC=$(harness_tmpdir mntC)
cC=$(harness_tmpdir cacheC)
mount_gateway "$ORIGIN_URL" "$mntC" "cache_dir=$cC,$fleet,fleet_member=c" ||
	{ echo "FAIL: gateway C did not mount" >&2; exit 1; }
pidC=$GW_PID logC=$GW_LOG
store_stop store
(cd "$mntC" && find . -type f -printf '%P %s\n' | sort) >"$work/walkC" 2>"$work/walkC.err" &
walk=$!
sleep 1
pid_alive "$walk" || bad "C's walk ended with the store away: it did not wait (hard)"
store_start store || { echo "FAIL: the store did not start again" >&2; exit 1; }
wait "$walk" || bad "C's walk across the store's restart: $(head -3 "$work/walkC.err")"
(cd "$data" && find . -type f -printf '%P %s\n' | sort) >"$work/walkO"
cmp -s "$work/walkC" "$work/walkO" || bad "C's walk across the store's restart differs from the origin: $(diff "$work/walkO" "$work/walkC" | head -3 | tr '\n' ';')"
"$PY" "$H" take "$work/files" "$work/hC" "$mntC" || bad "name_to_handle_at on C"
cmp -s "$work/hA" "$work/hC" || bad "C's handles differ from A's"
unmount_gateway "$mntC" "$pidC" "$logC" || bad "unmount C (log: $logC)"
out=$(stat -c %s "$mntD/newdir/x" 2>&1) || bad "soft D once the store is back: $out"
unmount_gateway "$mntD" "$pidD" "$logD" || bad "unmount D (log: $logD)"

# The store replaced by an empty one (lost, restored from another): A's
# node-ids are not its; A never asks it again (a new name: EIO at once,
# even hard, never another file's node-id), says why, and every handle
# it knew still opens.
store_wipe store || { echo "FAIL: the store did not start empty" >&2; exit 1; }
echo "made after the store was replaced" >"$data/after-wipe"
out=$(timeout 60 stat -c %s "$mntA/after-wipe" 2>&1) && bad "A named a file from a replaced store: $out"
case $out in *"Input/output error"*) ;; *) bad "a new name on A after the store was replaced: '$out' (want EIO)" ;; esac
grep -q "not the one this cache_dir's node-ids belong to" "$logA" || bad "A did not say why it stopped asking the replaced store"
drop_caches
out=$("$PY" "$H" check "$work/hA" "$mntA" "$data" 2>&1)
[ "$out" = "ok $nfiles" ] || bad "A's own handles after the store was replaced: $(printf '%s\n' "$out" | head -3 | tr '\n' ';')"
unmount_gateway "$mntA" "$pidA" "$logA" || bad "unmount A (log: $logA)"
unmount_gateway "$mntB" "$pidB" "$logB" || bad "unmount B (log: $logB)"

echo "  at ${SECONDS}s: step 6" >&2
# 6. A fleet's cache_dir without fleet=, and a cache_dir of a gateway that
# served without it (node-ids of its own) with fleet=: refused, clearly.
out=$("$CACHEGW" "$ORIGIN_URL" "$mntC" -f -o "cache_dir=$cA" 2>&1 </dev/null)
rc=$?
[ $rc -ne 0 ] && [[ $out == *"belongs to a fleet"* ]] ||
	bad "a fleet's cache_dir without fleet=: rc $rc, '$out'"
cL=$(harness_tmpdir cacheL)
mount_gateway "$ORIGIN_URL" "$mntC" "cache_dir=$cL" || bad "a plain gateway"
ls -l "$mntC/d00" >/dev/null
unmount_gateway "$mntC" || bad "unmount the plain gateway"
out=$("$CACHEGW" "$ORIGIN_URL" "$mntC" -f -o "cache_dir=$cL,$fleet" 2>&1 </dev/null)
rc=$?
[ $rc -ne 0 ] && [[ $out == *"node-ids of its"* ]] ||
	bad "a plain cache_dir with fleet=: rc $rc, '$out'"
is_mounted "$mntC" && bad "a refused gateway left a mount"
exit $fail
