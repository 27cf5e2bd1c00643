#!/bin/bash
# 16 concurrent libnfs clients (nfs-cat loops) read a mixed set of files through a ganesha re-export of the gateway for CACHEGW_SOAK_SECONDS (20): no errors, exact bytes, gateway RSS flat.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

SOAK=${CACHEGW_SOAK_SECONDS:-20}
CLIENTS=16
WARMUP=5		# seconds of load before the RSS baseline
SAMPLE_EVERY=3		# seconds between RSS samples
RSS_SLACK_KB=$((32 * 1024))
# ASan's quarantine of freed memory (256 MiB by default) would read as
# growth; keep it small so that RSS reflects what the gateway holds.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"

trap test_reexport_cleanup EXIT

rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status" 2>/dev/null; }

# Mixed set: 24 small files (0 B .. ~200 KiB) and 4 of a few MiB.
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
(
	set -e
	cd "$data"
	for i in $(seq 0 23); do
		head -c $(( (i * i * 397) % 204800 + i )) /dev/urandom >"small_$i"
	done
	mkdir sub
	head -c $((2 * 1048576 + 1)) /dev/urandom >big_a
	head -c $((3 * 1048576 - 7)) /dev/urandom >sub/big_b
	head -c $((5 * 1048576)) /dev/urandom >big_c
	head -c $((4 * 1048576 + 65537)) /dev/urandom >sub/big_d
) || { echo "cannot make test data" >&2; exit 1; }
mapfile -t files < <(cd "$data" && find . -type f -printf '%P\n' | LC_ALL=C sort)
declare -A want
for f in "${files[@]}"; do
	want[$f]=$(sha256sum <"$data/$f" | cut -d' ' -f1)
done

test_origin "$data"
test_mount allow_other
test_reexport

# One pass first: every file once (fills the cache).
for f in "${files[@]}"; do
	got=$(timeout 60 nfs-cat "$(origin_url reexp "$f")" | sha256sum | cut -d' ' -f1)
	[ "$got" = "${want[$f]}" ] || bad "first read of $f through the re-export: wrong bytes"
done
[ $fail = 0 ] || exit 1

# Client loop: read files in an order of its own until the deadline; one
# line per read in its log ("ok FILE" or "ERR FILE: why").
client() { # ID DEADLINE
	local id=$1 deadline=$2 n=${#files[@]} i=0 f got err
	while [ "$(date +%s)" -lt "$deadline" ]; do
		f=${files[(id * 7 + i * (id % 5 + 1)) % n]}
		i=$((i + 1))
		got=$(timeout 60 nfs-cat "$(origin_url reexp "$f")" 2>"$work/c$id.err" |
			sha256sum | cut -d' ' -f1)
		if [ "$got" = "${want[$f]}" ]; then
			echo "ok $f"
		else
			err=$(head -c 200 "$work/c$id.err" | tr '\n' ' ')
			echo "ERR $f: ${err:-wrong bytes}"
		fi
	done >"$work/c$id.log"
}

start=$(date +%s)
deadline=$((start + SOAK))
pids=()
for ((c = 0; c < CLIENTS; c++)); do
	client "$c" "$deadline" &
	pids+=($!)
done

# Sample the gateway's RSS; drop the kernel's caches now and then, so that
# the re-exporter's handles are turned back into inodes (LOOKUP ".") under
# load.
samples=()
baseline=
next_drop=$((start + 7))
while [ "$(date +%s)" -lt "$deadline" ]; do
	sleep "$SAMPLE_EVERY"
	pid_alive "$GW_PID" || { bad "gateway died during the run"; break; }
	r=$(rss_kb "$GW_PID")
	t=$(($(date +%s) - start))
	samples+=("${t}s:${r}kB")
	if [ -z "$baseline" ] && [ "$t" -ge "$WARMUP" ]; then
		baseline=$r
	fi
	if [ "$(date +%s)" -ge "$next_drop" ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches
		next_drop=$(($(date +%s) + 7))
	fi
done
for p in "${pids[@]}"; do
	wait "$p"
done
last=$(rss_kb "$GW_PID")
samples+=("end:${last}kB")
echo "gateway RSS samples: ${samples[*]}" >&2

reads=0 errs=0
for ((c = 0; c < CLIENTS; c++)); do
	n=$(grep -c '^ok ' "$work/c$c.log")
	e=$(grep -c '^ERR ' "$work/c$c.log")
	reads=$((reads + n))
	errs=$((errs + e))
	[ "$n" -gt 0 ] || bad "client $c completed no reads"
	if [ "$e" -gt 0 ]; then
		bad "client $c: $e failed reads, first: $(grep -m1 '^ERR ' "$work/c$c.log")"
	fi
done
echo "$CLIENTS clients, ${SOAK}s: $reads good reads, $errs errors" >&2

if [ -z "$baseline" ] || [ -z "$last" ]; then
	bad "no RSS baseline (run too short?)"
elif [ "$last" -ge $((baseline + RSS_SLACK_KB)) ]; then
	bad "gateway RSS grew from ${baseline} kB (after ${WARMUP}s) to ${last} kB (limit +${RSS_SLACK_KB} kB)"
else
	echo "gateway RSS: ${baseline} kB after warm-up, ${last} kB at the end ($(( (last - baseline) / 1024 )) MiB)" >&2
fi

origin_stop reexp
unmount_gateway "$mnt" || bad "gateway did not stop cleanly (log: $GW_LOG)"
exit $fail
