#!/bin/bash
# metrics= and the control socket under hostile clients: with 20 idle TCP connections open a curl of /metrics still answers, and the gateway closes the idle ones; out of file descriptors (RLIMIT_NOFILE lowered to 3 on the live gateway, clients pending on both sockets) its threads take < 0.5 s of CPU in 3 s and log the cause a bounded number of times; with the limit restored the pending clients and new ones are answered.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
for c in curl prlimit python3; do
	command -v "$c" >/dev/null 2>&1 || { echo "SKIP: $c not installed" >&2; exit 77; }
done

METRICS_PORT=${CACHEGW_METRICS_PORT:-29480}

data=$(harness_tmpdir origin-data)
printf 'hello\n' >"$data/hello"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { echo "FAIL: the origin did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
work=$(harness_tmpdir work)
cdir=$(harness_tmpdir cache)/c
harness_register_mount "$mnt"
URL=http://127.0.0.1:$METRICS_PORT/metrics
scrape() { timeout 30 curl -sS --max-time "${2:-15}" -o "$1" -w '%{http_code}' "$URL"; }

if ss -Hltn "sport = :$METRICS_PORT" | grep -q .; then
	echo "FAIL: port $METRICS_PORT already in use: $(ss -Hltnp "sport = :$METRICS_PORT" | head -1)" >&2
	exit 1
fi
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,metrics=127.0.0.1:$METRICS_PORT" ||
	{ echo "FAIL: mount failed (log: $GW_LOG)" >&2; exit 1; }
[ "$(timeout 10 cat "$mnt/hello")" = hello ] || bad "reading through the mount failed"
[ "$(scrape "$work/m0")" = 200 ] || bad "GET /metrics (no other client): not 200"

# ---- 1. 20 idle TCP connections, then a scrape. The helper writes
# "ready" once all are connected, then counts those the gateway closes
# (EOF) within 60 s.
python3 - "$METRICS_PORT" "$work/idle" <<-'PY' &
	import socket, sys, time
	port, out = int(sys.argv[1]), sys.argv[2]
	socks = []
	for i in range(20):
	    s = socket.socket()
	    s.settimeout(60)
	    s.connect(("127.0.0.1", port))
	    socks.append(s)
	open(out + ".ready", "w").write("ready\n")
	end = time.time() + 60
	closed = 0
	for s in socks:
	    s.settimeout(max(0.1, end - time.time()))
	    try:
	        if s.recv(1) == b"":
	            closed += 1
	    except socket.timeout:
	        pass
	    except OSError:
	        closed += 1
	open(out + ".closed", "w").write("%d\n" % closed)
PY
idle=$!
harness_register_pid "$idle"
for ((i = 0; i < 600; i++)); do
	[ -e "$work/idle.ready" ] && break
	pid_alive "$idle" || break
	sleep 0.1
done
[ -e "$work/idle.ready" ] || bad "the 20 idle connections were not all made within 60 s"
code=$(timeout 30 curl -sS --max-time 15 -o "$work/m1" -w '%{http_code} %{time_total}' "$URL")
echo "GET /metrics with 20 idle connections open: HTTP ${code% *} in ${code#* } s" >&2
code=${code% *}
[ "$code" = 200 ] || bad "GET /metrics with 20 idle connections open: HTTP '$code' (curl --max-time 15), want 200"
grep -q '^cachegw_origin_read_bytes_total ' "$work/m1" || bad "GET /metrics with 20 idle connections: no cachegw_origin_read_bytes_total"
# The control socket is another thread: answered meanwhile too.
cache_inspect stats --cache-dir "$cdir" >/dev/null || bad "cachegw-inspect stats with 20 idle metrics connections failed"
wait "$idle"
closed=$(cat "$work/idle.closed" 2>/dev/null)
[ "${closed:-0}" = 20 ] || bad "the gateway closed ${closed:-none} of 20 idle connections within 60 s, want 20"

# ---- 2. Out of file descriptors. RLIMIT_NOFILE 3 (0-2 are open): no new
# descriptor can be made, so every accept4() fails with EMFILE while the
# clients below stay pending.
soft=$(prlimit --pid "$GW_PID" --nofile --output=SOFT --noheadings | tr -d " ")
[ -n "$soft" ] || { bad "cannot read the gateway's RLIMIT_NOFILE"; soft=1024; }
prlimit --pid "$GW_PID" --nofile=3: || bad "prlimit --pid $GW_PID --nofile=3: failed"
# Pending clients: a scrape and a control command, each waiting for its
# answer (made before the limit goes back up, answered after).
timeout 90 curl -sS --max-time 80 -o "$work/pend.m" -w '%{http_code}' "$URL" >"$work/pend.mcode" 2>"$work/pend.merr" &
pend_m=$!
harness_register_pid "$pend_m"
timeout 90 "$CACHEGW_INSPECT" stats --cache-dir "$cdir" >"$work/pend.ctl" 2>"$work/pend.ctlerr" &
pend_c=$!
harness_register_pid "$pend_c"
sleep 1
cpu() { sed 's/.*) //' "/proc/$GW_PID/stat" | awk '{ print $12 + $13 }'; }
hz=$(getconf CLK_TCK)
t0=$(cpu)
sleep 3
t1=$(cpu)
ms=$(( (t1 - t0) * 1000 / hz ))
echo "gateway CPU out of fds: $ms ms in 3 s" >&2
[ "$ms" -lt 500 ] || bad "out of file descriptors, the gateway took $ms ms of CPU in 3 s, want < 500 (accept4 spinning on EMFILE)"
pid_alive "$pend_m" || bad "the pending scrape ended while the gateway was out of fds: $(cat "$work/pend.merr")"
pid_alive "$pend_c" || bad "the pending cachegw-inspect stats ended while the gateway was out of fds: $(cat "$work/pend.ctlerr")"
prlimit --pid "$GW_PID" --nofile="$soft": || bad "prlimit --pid $GW_PID --nofile=$soft: failed"
emf=$(grep -c 'Too many open files' "$GW_LOG")
[ "$emf" -ge 1 ] || bad "no log line says the gateway ran out of file descriptors"
[ "$emf" -le 20 ] || bad "$emf log lines about running out of file descriptors in ~4 s, want a few (rate-limited)"
grep 'Too many open files' "$GW_LOG" | head -3 >&2

# ---- 3. Limit restored: the pending clients are answered, and new ones.
wait "$pend_m"
[ "$(cat "$work/pend.mcode" 2>/dev/null)" = 200 ] || bad "the scrape pending while out of fds: HTTP '$(cat "$work/pend.mcode" 2>/dev/null)' $(cat "$work/pend.merr"), want 200"
wait "$pend_c" || bad "cachegw-inspect stats pending while out of fds: exit $? ($(cat "$work/pend.ctlerr"))"
grep -q '^origin_read_bytes_total ' "$work/pend.ctl" || bad "cachegw-inspect stats pending while out of fds: no counters: $(head -c 200 "$work/pend.ctl")"
[ "$(scrape "$work/m2")" = 200 ] || bad "GET /metrics after the limit was restored: not 200"
cache_inspect stats --cache-dir "$cdir" >/dev/null || bad "cachegw-inspect stats after the limit was restored failed"
[ "$(timeout 10 cat "$mnt/hello")" = hello ] || bad "reading through the mount after the limit was restored failed"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
[ $fail = 0 ] || { echo "--- gateway log:" >&2; tail -n 20 "$GW_LOG" >&2; }
exit $fail
