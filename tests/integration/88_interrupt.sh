#!/bin/bash
# A caller waiting on an origin that does not answer stays killable: with the origin stopped (SIGSTOP), `timeout 2` ends an open of a cached file (close-to-open GETATTR/ACCESS), a stat of a name never looked up (LOOKUP), a readlink, a stat after the attribute timeout and a df (FSSTAT) within seconds (the gateway answers the kernel's FUSE_INTERRUPT with EINTR), each caller gone, not in uninterruptible sleep; once the origin runs again the same calls succeed with the origin's bytes, and the gateway exits cleanly (the abandoned calls' answers dropped, no leak under ASan).
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
trap 'kill -CONT "${ORIGIN_PID:-0}" 2>/dev/null; harness_cleanup' EXIT

data=$(harness_tmpdir origin-data)
head -c 300000 /dev/urandom >"$data/cached.bin"
echo never >"$data/never-looked-up"
ln -s cached.bin "$data/link"
test_origin "$data"
work=$(harness_tmpdir work)
test_mount -n actimeo=1
cmp -s "$data/cached.bin" "$mnt/cached.bin" || bad "cold read: bytes differ"
gw_wait_metric "$cdir" cache_fill_bytes_total 300000 20 || bad "the fill did not complete"
readlink "$mnt/link" >/dev/null || bad "readlink before the stop failed"

kill -STOP "$ORIGIN_PID" || { echo "FAIL: cannot stop the origin" >&2; exit 1; }
sleep 1.5	# past actimeo: every call below must ask the origin

# killable NAME CMD...: CMD under `timeout 2` ends (status 124) within 20 s.
killable() {
	local name=$1 t0=$SECONDS pid i st
	shift
	timeout -k 30 2 "$@" >/dev/null 2>"$work/$name.err" &
	pid=$!
	for ((i = 0; i < 200; i++)); do
		pid_alive "$pid" || break
		sleep 0.1
	done
	if pid_alive "$pid"; then
		st=$(ps -o stat= -p "$(pgrep -P "$pid" | head -1)" 2>/dev/null)
		bad "$name: still running 20 s after its 2 s timeout (state '${st:-?}'): not killable"
		return
	fi
	wait "$pid"
	st=$?
	[ $st = 124 ] || bad "$name: exit $st, want 124 (killed by timeout)"
	echo "  $name: ended after $((SECONDS - t0)) s" >&2
}
killable open cat "$mnt/cached.bin"
killable lookup stat "$mnt/never-looked-up"
killable readlink readlink "$mnt/link"
killable getattr stat "$mnt/cached.bin"
killable statfs df "$mnt"

kill -CONT "$ORIGIN_PID"
cmp -s "$data/cached.bin" "$mnt/cached.bin" || bad "after the origin is back: bytes differ"
[ "$(cat "$mnt/never-looked-up" 2>&1)" = never ] || bad "after the origin is back: never-looked-up reads '$(cat "$mnt/never-looked-up" 2>&1)'"
[ "$(readlink "$mnt/link")" = cached.bin ] || bad "after the origin is back: readlink gives '$(readlink "$mnt/link")'"
df "$mnt" >/dev/null || bad "after the origin is back: df failed"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
