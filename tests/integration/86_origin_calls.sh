#!/bin/bash
# Origin calls by NFSv3 procedure (what nfsstat/mountstats give a kernel client's admin): `stats` names calls, errors and time for every procedure the gateway sends; a stat of two new names moves LOOKUP by 2, a missing name counts a LOOKUP error, a cold read moves READ by at least size/rsize, a listing moves READDIRPLUS; --prometheus has proc-labelled counters and latency histograms whose _count equals the calls and that promtool accepts; `cachegw-inspect top --once` shows the call rates.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

data=$(harness_tmpdir origin-data)
mkdir -p "$data/d1/d2"
SIZE=$((3 * 1048576 + 5))
head -c "$SIZE" /dev/urandom >"$data/d1/d2/big.bin"
for i in $(seq 1 20); do echo "file $i" >"$data/d1/f$i"; done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { echo "FAIL: the origin did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
work=$(harness_tmpdir work)
cdir=$(harness_tmpdir cache)/c
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || { echo "FAIL: mount" >&2; exit 1; }

# stat NAME: the value of a `stats` line (text form).
st() { awk -v n="$1" '$1 == n { print $2; exit }' "$2"; }
snap() { cache_inspect stats --cache-dir "$cdir" >"$1" || bad "cachegw-inspect stats failed"; }

# ---- 1. every procedure the gateway sends is named, zero or not
snap "$work/s0"
for p in getattr setattr lookup access readlink read write create mkdir symlink mknod remove rmdir rename link readdirplus fsstat fsinfo commit; do
	for k in calls errors microseconds; do
		[ -n "$(st "origin_${p}_${k}_total" "$work/s0")" ] || bad "stats has no origin_${p}_${k}_total"
	done
done
for k in origin_calls_total origin_timeouts_total origin_call_microseconds_total; do
	[ -n "$(st $k "$work/s0")" ] || bad "stats has no $k"
done

# ---- 2. LOOKUP: two names never seen, then one that does not exist
stat "$mnt/d1/d2" >/dev/null || bad "stat d1/d2 failed"
snap "$work/s1"
l0=$(st origin_lookup_calls_total "$work/s0") l1=$(st origin_lookup_calls_total "$work/s1")
[ "$((l1 - l0))" -ge 2 ] || bad "LOOKUP calls moved $l0 -> $l1 over a stat of 2 new names, want >= 2"
e1=$(st origin_lookup_errors_total "$work/s1")
stat "$mnt/d1/no-such-name" >/dev/null 2>&1 && bad "stat of a missing name succeeded"
snap "$work/s2"
e2=$(st origin_lookup_errors_total "$work/s2")
[ "$((e2 - e1))" -ge 1 ] || bad "LOOKUP errors moved $e1 -> $e2 over a missing name, want >= 1"
us=$(st origin_lookup_microseconds_total "$work/s2")
[ "${us:-0}" -gt 0 ] || bad "LOOKUP time is '${us:-}' microseconds after $l1 calls"

# ---- 3. READ: a cold read of SIZE bytes takes at least SIZE / rsize READs
rsize=$(awk '$1 == "rsize" { print $2; exit }' <(cache_inspect stats --cache-dir "$cdir"))
[ -n "$rsize" ] || rsize=1048576
r0=$(st origin_read_calls_total "$work/s2")
cmp -s "$data/d1/d2/big.bin" "$mnt/d1/d2/big.bin" || bad "big.bin: bytes differ from the origin's"
snap "$work/s3"
r1=$(st origin_read_calls_total "$work/s3")
[ "$((r1 - r0))" -ge "$((SIZE / rsize))" ] || bad "READ calls moved $r0 -> $r1 over a cold $SIZE-byte read (rsize $rsize)"

# ---- 4. READDIRPLUS: a listing
d0=$(st origin_readdirplus_calls_total "$work/s3")
[ "$(ls "$mnt/d1" | wc -l)" = 21 ] || bad "ls d1: $(ls "$mnt/d1" | wc -l) entries, want 21"
snap "$work/s4"
d1=$(st origin_readdirplus_calls_total "$work/s4")
[ "$((d1 - d0))" -ge 1 ] || bad "READDIRPLUS calls moved $d0 -> $d1 over a listing"
tot=$(st origin_calls_total "$work/s4")
sum=$(awk '$1 ~ /^origin_[a-z]+_calls_total$/ { s += $2 } END { print s + 0 }' "$work/s4")
[ "$tot" = "$sum" ] || bad "origin_calls_total $tot != sum of the procedures' $sum"

# ---- 5. Prometheus: labelled counters, histograms that match, promtool
sleep 0.5	# let fills and attribute refreshes settle: counts compared below
cache_inspect stats --cache-dir "$cdir" --prometheus >"$work/p" || bad "stats --prometheus failed"
grep -q '^# TYPE cachegw_origin_calls_total counter$' "$work/p" || bad "no TYPE line for cachegw_origin_calls_total"
grep -q '^# TYPE cachegw_origin_call_duration_seconds histogram$' "$work/p" || bad "no histogram cachegw_origin_call_duration_seconds"
for p in lookup read readdirplus; do
	c=$(awk -v n="cachegw_origin_calls_total{proc=\"$p\"}" '$1 == n { print $2 }' "$work/p")
	hc=$(awk -v n="cachegw_origin_call_duration_seconds_count{proc=\"$p\"}" '$1 == n { print $2 }' "$work/p")
	inf=$(awk -v n="cachegw_origin_call_duration_seconds_bucket{proc=\"$p\",le=\"+Inf\"}" '$1 == n { print $2 }' "$work/p")
	[ -n "$c" ] && [ "$c" -gt 0 ] || bad "prometheus: calls{proc=$p} is '${c:-}'"
	[ "${hc:-x}" = "${c:-y}" ] || bad "prometheus: latency _count{proc=$p} ${hc:-none} != calls ${c:-none}"
	[ "${inf:-x}" = "${hc:-y}" ] || bad "prometheus: +Inf bucket{proc=$p} ${inf:-none} != _count ${hc:-none}"
done
# promtool on these families only (it lints older names of ours too).
if command -v promtool >/dev/null; then
	grep -E '^(# (HELP|TYPE) )?cachegw_origin_call' "$work/p" >"$work/p-calls"
	promtool check metrics <"$work/p-calls" >"$work/promtool" 2>&1 ||
		bad "promtool check metrics: $(head -5 "$work/promtool")"
fi

# ---- 6. top: the rates, while a listing loop runs
( for _ in $(seq 1 30); do ls -l "$mnt/d1" >/dev/null; sleep 0.05; done ) &
lp=$!
cache_inspect top --cache-dir "$cdir" --once --interval 1 >"$work/top" 2>&1 || bad "top --once failed: $(cat "$work/top")"
wait "$lp"
grep -q 'lookups' "$work/top" || bad "top: no lookups column: $(head -2 "$work/top")"
nf=$(tail -n 1 "$work/top" | awk '{ print NF }')
[ "$nf" = 14 ] || bad "top: $nf fields on the rate line, want 14: $(tail -n 1 "$work/top")"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
