#!/bin/bash
# walk_probe.sh: where a cold fleet walk's time goes (a helper for the
# figures in doc/fleet.md "Walking ahead"; run like an integration test:
# /tmp/runit.sh BUILD tools/bench/walk_probe.sh). One origin (ganesha)
# and one store (PostgreSQL 15) for every walk; each walk: a fresh
# gateway (cache_dir), the kernel's caches dropped, the store emptied;
# the kinds alternate round by round. Prints per walk: kind, seconds,
# assign round trips and their mean ms, READDIRPLUS calls, listings used
# from walk-ahead. KINDS (space-separated "name:options"), ROUNDS, DIRS,
# FILES, DEPTH (DEPTH levels of DIRS subdirectories, FILES files in each
# leaf; default one level), OLD_CACHEGW (a binary for kinds named old*), RTT (ms: the origin
# that far, through cachegw-latproxy).
set -uo pipefail
. "$(dirname "$0")/../../tests/lib/test.sh" inspect
DIRS=${DIRS:-100} FILES=${FILES:-100} ROUNDS=${ROUNDS:-3}
KINDS=${KINDS:-"alone:walk_ahead=0 alone4:walk_ahead=4 fleet0:F,walk_ahead=0 fleet4:F,walk_ahead=4 fleet8:F,walk_ahead=8"}
data=$(harness_tmpdir origin-data)
if [ -n "${DEPTH:-}" ]; then
	# DEPTH levels of DIRS subdirectories, FILES files in each leaf.
	"$PY" - "$data/tree" "$DEPTH" "$DIRS" "$FILES" <<'PY'
import os, sys
top, depth, dirs, files = sys.argv[1], *map(int, sys.argv[2:])
def make(p, level):
    os.makedirs(p, exist_ok=True)
    if level == depth:
        for f in range(files):
            open(os.path.join(p, "f%d" % f), "w").close()
        return
    for d in range(dirs):
        make(os.path.join(p, "d%d" % d), level + 1)
make(top, 0)
PY
else
	for ((d = 0; d < DIRS; d++)); do
		mkdir -p "$data/tree/d$d"
		(cd "$data/tree/d$d" && seq -f "f%g" 1 "$FILES" | xargs touch)
	done
fi
test_origin "$data"
store_start store "$STORE_PORT" || { echo "FAIL: the store did not start" >&2; exit 1; }
url=$ORIGIN_URL
FAR_NFS_PORT=${CACHEGW_FAR_NFS_PORT:-$((REEXPORT_NFS_PORT + 20))}
FAR_MNT_PORT=${CACHEGW_FAR_MNT_PORT:-$((REEXPORT_MNT_PORT + 20))}
[ -z "${RTT:-}" ] || { latproxy_start origin "$RTT" "$FAR_NFS_PORT" "$FAR_MNT_PORT" || exit 1; url=$ORIGIN_FAR_URL; }
# CPU seconds (user + system) of process $1 and all below it.
treecpu() {
	"$PY" - "$1" <<'PY'
import os, sys
root, par, t = int(sys.argv[1]), {}, {}
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            f = open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        par[int(d)], t[int(d)] = int(f[1]), int(f[11]) + int(f[12])
tot = 0
for p in par:
    q = p
    while q in par and q != root and q > 1:
        q = par[q]
    if q == root:
        tot += t[p]
print(tot)
PY
}
st() { cache_inspect stats --cache-dir "$1" | awk -v n="$2" '$1 == n { print $2; exit }'; }
bin=$CACHEGW
for ((r = 1; r <= ROUNDS; r++)); do
	for kv in $KINDS; do
		k=${kv%%:*} o=${kv#*:}
		o=${o/F/fleet=$STORE_CONNINFO}
		store_sql store "DROP TABLE IF EXISTS cachegw_member, cachegw_node, cachegw_export, cachegw_schema CASCADE; DROP SEQUENCE IF EXISTS cachegw_nodeid" >/dev/null
		c=$(harness_tmpdir cache) m=$(harness_tmpdir mnt)
		case $k in old*) CACHEGW=${OLD_CACHEGW:?} ;; *) CACHEGW=$bin ;; esac
		mount_gateway "$url" "$m" "cache_dir=$c${o:+,$o}" || exit 1
		drop_caches
		p0=$(treecpu "$STORE_STORE_PID") g0=$(treecpu "$GW_PID")
		t0=$(date +%s.%N)
		find "$m/tree" -printf '%s %m\n' >/dev/null
		t1=$(date +%s.%N)
		p1=$(treecpu "$STORE_STORE_PID") g1=$(treecpu "$GW_PID")
		a=$(st "$c" fleet_assign_calls_total)
		am=$(cache_inspect stats --cache-dir "$c" --prometheus | awk '$1 == "cachegw_fleet_call_duration_seconds_sum{call=\"assign\"}" { printf "%d", $2 * 1e6 }')
		printf '%s round %d %-8s %6.3f s  assign %s (%s us)  readdirplus %s  getattr %s  ahead %s used %s stale %s  load %s  store cpu %s s gw cpu %s s\n' \
			"$(date -u +%T)" "$r" "$k" "$(echo "$t1 - $t0" | bc)" "${a:-0}" "${am:--}" \
			"$(st "$c" origin_readdirplus_calls_total)" "$(st "$c" origin_getattr_calls_total)" \
			"$(st "$c" dir_walk_ahead_listings_total)" "$(st "$c" dir_walk_ahead_used_total)" \
			"$(st "$c" dir_walk_ahead_stale_total)" "$(cut -d' ' -f1 /proc/loadavg)" \
			"$(echo "scale=2; ($p1 - $p0) / 100" | bc)" "$(echo "scale=2; ($g1 - $g0) / 100" | bc)"
		cache_inspect stats --cache-dir "$c" >"$HARNESS_TMP/last-stats"
		unmount_gateway "$m" || exit 1
	done
done
