#!/bin/bash
# The node-id table does not only grow: files removed at the origin behind the gateway's back give their node-ids back (`cachegw-inspect reclaim`, and by itself after reclaim_after= new entries), so a tree whose files come and go keeps a bounded table; files that still exist keep theirs, so the handles a re-export client holds for them still read their bytes (also after a restart), and a handle of a removed file answers NFS3ERR_STALE.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

: "${FHCLIENT:=$(dirname "$CACHEGW")/../tests/reexport/fhclient}"
[ -x "$FHCLIENT" ] || { echo "SKIP: test client $FHCLIENT not built (tests/reexport)" >&2; exit 77; }
cleanup() {
	origin_stop reexp
	harness_cleanup
}
trap cleanup EXIT

data=$(harness_tmpdir origin-data)
mkdir "$data/keep" "$data/churn"
for i in $(seq 1 20); do echo "kept file $i" >"$data/keep/k$i"; done
for i in $(seq 1 300); do echo "churn $i" >"$data/churn/c$i"; done
test_origin "$data"
test_mount allow_other,reclaim_after=0
metric() { gw_metric "$cdir" "$1"; }

ls -l "$mnt/keep" "$mnt/churn" >/dev/null || bad "listing through the mount"
cat "$mnt/keep/k1" "$mnt/churn/c1" >/dev/null
GANESHA_FSAL_OPTS="fsid_type = Major64;" origin_start reexp "$mnt" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" || exit 1
R=$(origin_url reexp)
hk1=$("$FHCLIENT" gethandle "$R" keep/k1) || bad "gethandle keep/k1"
hk2=$("$FHCLIENT" gethandle "$R" keep/k2) || bad "gethandle keep/k2"
hc=$("$FHCLIENT" gethandle "$R" churn/c2) || bad "gethandle churn/c2"
readfh() { "$FHCLIENT" readfh "$R" "$1" 2>&1; }
[ "$(readfh "$hk2")" = "kept file 2" ] || bad "keep/k2 by handle before: '$(readfh "$hk2")'"

before=$(metric nodes_entries)
echo "  entries after the listings: $before" >&2
[ "${before:-0}" -ge 320 ] || bad "nodes_entries $before after listing 320 files"

# 1. Removed at the origin, not through the gateway; the kernel lets go of
# its inodes (as it does under memory pressure).
rm -f "$data"/churn/c*
drop_caches
out=$(cache_inspect reclaim --cache-dir "$cdir") || bad "cachegw-inspect reclaim failed: $out"
echo "  reclaim: $out" >&2
after=$(metric nodes_entries)
echo "  entries after reclaim: $after" >&2
reclaimed=$(printf '%s\n' "$out" | awk '{ for (i = 1; i < NF; i++) if ($i == "reclaimed") print $(i + 1) }')
[ "${reclaimed:-0}" -ge 290 ] || bad "reclaimed ${reclaimed:-none} of 300 removed files' node-ids ($out)"
[ "${after:-999999}" -le $((before - 290)) ] || bad "nodes_entries $before -> $after: the removed files' entries stay"
[ "$(metric nodes_reclaimed_total)" = "${reclaimed:-x}" ] || bad "nodes_reclaimed_total $(metric nodes_reclaimed_total), pass said ${reclaimed:-none}"

# 2. Live files keep their node-ids: held (k1) or not (k2, dropped from
# the kernel's caches), their handles still read their bytes; the removed
# file's handle is stale, never another file.
check_handles() { # WHEN
	[ "$(readfh "$hk1")" = "kept file 1" ] || bad "$1: keep/k1 by handle reads '$(readfh "$hk1")'"
	[ "$(readfh "$hk2")" = "kept file 2" ] || bad "$1: keep/k2 by handle reads '$(readfh "$hk2")'"
	local o rc
	o=$(readfh "$hc")
	rc=$?
	[ $rc = 3 ] || bad "$1: the removed churn/c2's handle: exit $rc ('$o'), want 3 (NFS3ERR_STALE)"
}
check_handles "after reclaim"
for i in 1 7 20; do
	[ "$(cat "$mnt/keep/k$i")" = "kept file $i" ] || bad "keep/k$i through the mount after reclaim"
done
# A second pass finds nothing more to give back.
out2=$(cache_inspect reclaim --cache-dir "$cdir")
case $out2 in *"reclaimed 0 "*) ;; *) bad "a second pass: '$out2', want reclaimed 0" ;; esac

# 3. A restart on the same cache_dir: what was given back stays given back.
origin_stop reexp
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,reclaim_after=100" || exit 1
GANESHA_FSAL_OPTS="fsid_type = Major64;" origin_start reexp "$mnt" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" || exit 1
restarted=$(metric nodes_entries)
[ "${restarted:-999999}" -le "$after" ] || bad "after a restart nodes_entries is $restarted, was $after"
check_handles "after a restart"

# 4. By itself: files come and go at the origin (a build farm's tree);
# with reclaim_after=100 the table stays near what exists, where it would
# grow by 200 per round.
for r in 1 2 3 4 5 6; do
	mkdir -p "$data/churn"
	for i in $(seq 1 200); do echo "round $r file $i" >"$data/churn/r$r-$i"; done
	ls -l "$mnt/churn" >/dev/null || bad "round $r: listing"
	[ "$(cat "$mnt/churn/r$r-7")" = "round $r file 7" ] || bad "round $r: r$r-7 through the mount"
	rm -f "$data"/churn/r*
	drop_caches
done
# Passes started by the 100th new entry of the last rounds may still run
# (each waits a second for its second answers): until the table is as
# small as wanted, or 30 s.
gw_wait_metric "$cdir" nodes_reclaim_runs_total 1 10 || bad "no reclaim pass ran by itself (nodes_reclaim_runs_total $(metric nodes_reclaim_runs_total))"
for ((i = 0; i < 300; i++)); do
	final=$(metric nodes_entries)
	[ "${final:-999999}" -le $((restarted + 500)) ] && break
	sleep 0.1
done
echo "  entries after 6 rounds of 200 files made and removed: $final (runs $(metric nodes_reclaim_runs_total), reclaimed $(metric nodes_reclaimed_total))" >&2
[ "${final:-999999}" -le $((restarted + 500)) ] || bad "nodes_entries grew from $restarted to $final over 1200 files made and removed"
check_handles "after the rounds"
bytes=$(stat -c %s "$cdir/nodes.log")
echo "  nodes.log: $bytes bytes" >&2
exit $fail
