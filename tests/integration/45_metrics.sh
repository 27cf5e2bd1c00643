#!/bin/bash
# metrics=: bad values refused at start (exit 2, one line, nothing mounted); GET /metrics serves the control socket's Prometheus series plus origin/cache read latency histograms, on loopback unless an address is named; counters move with reads; other paths 404; Debian's prometheus scrapes it and gives a counter back through its HTTP API.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
if ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: curl not installed" >&2
	exit 77
fi

METRICS_PORT=${CACHEGW_METRICS_PORT:-29480}
PROM_PORT=${CACHEGW_PROM_PORT:-29490}

SIZE=$((6 * 1048576 + 777))
data=$(harness_tmpdir origin-data)
head -c "$SIZE" /dev/urandom >"$data/a.bin"
want=$(sha256sum <"$data/a.bin" | cut -d' ' -f1)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { echo "FAIL: the origin did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
work=$(harness_tmpdir work)
cdir=$(harness_tmpdir cache)/c
harness_register_mount "$mnt"
URL=http://127.0.0.1:$METRICS_PORT

# Value of series NAME (first sample, labels included in NAME) in a file.
series() { awk -v n="$2" '$1 == n { print $2; exit }' "$1"; }
scrape() { timeout 20 curl -sS --max-time 10 -o "$1" -w '%{http_code}' "$2"; }

for p in "$METRICS_PORT" "$PROM_PORT"; do
	if ss -Hltn "sport = :$p" | grep -q .; then
		echo "FAIL: port $p already in use: $(ss -Hltnp "sport = :$p" | head -1)" >&2
		exit 1
	fi
done

# ---- 1. Bad values: one line naming the option, exit 2, nothing mounted.
for v in nope 70000 0 10.0.0.1 host:9100 '[::1]' 127.0.0.1: ''; do
	timeout -k 5 30 "$CACHEGW" "$ORIGIN_URL" "$mnt" -f \
		-o "cache_dir=$cdir,metrics=$v" </dev/null >"$work/out" 2>"$work/err"
	rc=$?
	[ $rc = 2 ] || bad "metrics=$v: exit $rc, want 2"
	grep -q "metrics=" "$work/err" || bad "metrics=$v: stderr does not name the option: $(head -c 300 "$work/err")"
	[ "$(grep -c . "$work/err")" = 1 ] || bad "metrics=$v: $(grep -c . "$work/err") lines on stderr, want 1"
	is_mounted "$mnt" && { bad "metrics=$v: left mounted"; fusermount3 -u "$mnt"; }
done

# ---- 2. A bare port binds loopback only.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,metrics=$METRICS_PORT" || { echo "FAIL: mount with cache_dir=$cdir,metrics=$METRICS_PORT failed (log: $GW_LOG)" >&2; tail -5 "$GW_LOG" >&2; exit 1; }
l=$(ss -Hltn "sport = :$METRICS_PORT" | awk '{ print $4 }')
[ "$l" = "127.0.0.1:$METRICS_PORT" ] || bad "metrics=$METRICS_PORT listens on '$l', want 127.0.0.1:$METRICS_PORT only"
# A second gateway cannot take the port: a start-up error, not a mount.
mnt2=$(harness_tmpdir mnt2)
harness_register_mount "$mnt2"
timeout -k 5 30 "$CACHEGW" "$ORIGIN_URL" "$mnt2" -f \
	-o "cache_dir=$(harness_tmpdir cache2)/c,metrics=127.0.0.1:$METRICS_PORT" </dev/null >"$work/out" 2>"$work/err"
rc=$?
[ $rc != 0 ] || bad "a second gateway on a taken metrics port: exit 0"
grep -q "metrics=.*$METRICS_PORT" "$work/err" || bad "taken metrics port: stderr does not say so: $(head -c 300 "$work/err")"
is_mounted "$mnt2" && bad "taken metrics port: $mnt2 left mounted"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"

# ---- 3. metrics=127.0.0.1:PORT: the endpoint, its counters and histograms.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,metrics=127.0.0.1:$METRICS_PORT" || { echo "FAIL: mount with cache_dir=$cdir,metrics=127.0.0.1:$METRICS_PORT failed (log: $GW_LOG)" >&2; tail -5 "$GW_LOG" >&2; exit 1; }
code=$(scrape "$work/m0" "$URL/metrics")
[ "$code" = 200 ] || bad "GET /metrics: HTTP $code, want 200"
grep -q '^# TYPE cachegw_origin_read_bytes_total counter$' "$work/m0" || bad "GET /metrics: no TYPE line for cachegw_origin_read_bytes_total"
o0=$(series "$work/m0" cachegw_origin_read_bytes_total)
[ -n "$o0" ] || { bad "GET /metrics: no cachegw_origin_read_bytes_total"; o0=0; }
c0=$(series "$work/m0" cachegw_origin_read_duration_seconds_count)
[ "$c0" = 0 ] || bad "origin READ latency _count '$c0' before any read, want 0"
# The same series as the control socket's prometheus command.
cache_inspect stats --cache-dir "$cdir" --prometheus >"$work/ctl" || bad "cachegw-inspect stats --prometheus failed"
diff <(awk '!/^#/ { print $1 }' "$work/ctl") <(awk '!/^#/ { print $1 }' "$work/m0") >"$work/diff" ||
	bad "GET /metrics and the control socket give different series: $(head -5 "$work/diff")"

[ "$(timeout 60 sha256sum <"$mnt/a.bin" | cut -d' ' -f1)" = "$want" ] || bad "cold read: bytes differ from the origin's"
gw_wait_metric "$cdir" cache_fill_bytes_total "$SIZE" 20 || bad "fills did not complete"
code=$(scrape "$work/m1" "$URL/metrics")
[ "$code" = 200 ] || bad "GET /metrics after a read: HTTP $code"
o1=$(series "$work/m1" cachegw_origin_read_bytes_total)
[ "${o1:-0}" -ge $((o0 + SIZE)) ] || bad "origin_read_bytes_total moved $o0 -> ${o1:-none} over a $SIZE-byte cold read"
[ "$o1" = "$(gw_metric "$cdir" origin_read_bytes_total)" ] || bad "origin_read_bytes_total: /metrics $o1, control socket $(gw_metric "$cdir" origin_read_bytes_total)"
c1=$(series "$work/m1" cachegw_origin_read_duration_seconds_count)
inf1=$(series "$work/m1" 'cachegw_origin_read_duration_seconds_bucket{le="+Inf"}')
s1=$(series "$work/m1" cachegw_origin_read_duration_seconds_sum)
[ "${c1:-0}" -gt 0 ] || bad "origin READ latency _count '${c1:-none}' after a cold read, want > 0"
[ "${inf1:-x}" = "${c1:-y}" ] || bad "origin READ latency: +Inf bucket ${inf1:-none} != _count ${c1:-none}"
awk -v s="${s1:-0}" 'BEGIN { exit !(s > 0) }' || bad "origin READ latency _sum '${s1:-none}', want > 0"
# Buckets are cumulative: never decreasing with le.
grep '^cachegw_origin_read_duration_seconds_bucket' "$work/m1" | awk '{ if ($2 < prev) bad = 1; prev = $2 } END { exit bad }' ||
	bad "origin READ latency buckets are not cumulative"
[ "$(grep -c '^cachegw_origin_read_duration_seconds_bucket' "$work/m1")" -ge 10 ] || bad "origin READ latency: fewer than 10 buckets"
hc=$(series "$work/m1" cachegw_cache_read_duration_seconds_count)
drop_caches
[ "$(timeout 60 sha256sum <"$mnt/a.bin" | cut -d' ' -f1)" = "$want" ] || bad "warm read: bytes differ"
scrape "$work/m2" "$URL/metrics" >/dev/null
hc2=$(series "$work/m2" cachegw_cache_read_duration_seconds_count)
[ "${hc2:-0}" -gt "${hc:-0}" ] || bad "cache read latency _count ${hc:-none} -> ${hc2:-none} over a warm read, want it to grow"
[ "$(series "$work/m2" 'cachegw_cache_read_duration_seconds_bucket{le="+Inf"}')" = "$hc2" ] || bad "cache read latency: +Inf bucket != _count"

# Other paths and methods.
code=$(scrape "$work/nope" "$URL/nope")
[ "$code" = 404 ] || bad "GET /nope: HTTP $code, want 404"
code=$(timeout 20 curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X POST "$URL/metrics")
[ "$code" = 405 ] || bad "POST /metrics: HTTP $code, want 405"
# A client that connects and never speaks does not stop the next scrape.
python3 -c 'import socket,time,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); time.sleep(30)' "$METRICS_PORT" &
idle=$!
harness_register_pid "$idle"
code=$(scrape "$work/m3" "$URL/metrics")
[ "$code" = 200 ] || bad "GET /metrics while an idle client is connected: HTTP $code"
# An oversized request head is refused, the endpoint goes on.
code=$(timeout 20 curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 6000 /dev/zero | tr '\0' a)" "$URL/metrics")
[ "$code" = 431 ] || bad "GET with a 6 KB header: HTTP $code, want 431"
pid_stop "$idle" 2

# ---- 4. Debian's prometheus scrapes the gateway; a counter comes back
# through its HTTP API.
if ! command -v prometheus >/dev/null 2>&1; then
	echo "SKIP: prometheus not installed (apt-get install prometheus): the scrape by a real Prometheus server was not tested" >&2
else
	pdir=$(harness_tmpdir prometheus)
	cat >"$pdir/prometheus.yml" <<-YML
	global:
	  scrape_interval: 1s
	  evaluation_interval: 1s
	scrape_configs:
	  - job_name: cachegw
	    static_configs:
	      - targets: ['127.0.0.1:$METRICS_PORT']
	YML
	prometheus --config.file="$pdir/prometheus.yml" --storage.tsdb.path="$pdir/tsdb" \
		--web.listen-address="127.0.0.1:$PROM_PORT" >"$pdir/log" 2>&1 </dev/null &
	ppid_=$!
	harness_register_pid "$ppid_"
	want_o=$(gw_metric "$cdir" origin_read_bytes_total)
	got=
	for ((i = 0; i < 120; i++)); do
		got=$(timeout 10 curl -sS --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query?query=cachegw_origin_read_bytes_total" 2>/dev/null |
			python3 -c 'import json,sys
try:
    r = json.load(sys.stdin)["data"]["result"]
    print(r[0]["value"][1] if r else "")
except Exception:
    print("")' 2>/dev/null)
		[ -n "$got" ] && break
		pid_alive "$ppid_" || break
		sleep 0.5
	done
	if [ -z "$got" ]; then
		bad "prometheus never returned cachegw_origin_read_bytes_total; its log: $(tail -5 "$pdir/log")"
	elif [ "$got" != "$want_o" ]; then
		bad "prometheus says cachegw_origin_read_bytes_total $got, the gateway $want_o"
	fi
	up=$(timeout 10 curl -sS --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query?query=up" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null)
	[ "$up" = 1 ] || bad "prometheus: up{job=cachegw} is '$up', want 1"
	pid_stop "$ppid_" 10
fi

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
[ $fail = 0 ] || { echo "--- gateway log:" >&2; tail -n 20 "$GW_LOG" >&2; }
exit $fail
