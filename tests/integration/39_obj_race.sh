#!/bin/bash
# Cache objects used without a reference: stat (actimeo=0, so every GETATTR reaches the gateway), truncate, write and open/close (the last close keeps happening, dropping the object) race on a few files while a small cache_size= culls closed objects; the gateway survives (no ASan report), the bytes equal the origin's and objects were culled.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
PY=$(command -v python3) || { echo "SKIP: no python3" >&2; exit 77; }

SECS=${CACHEGW_OBJ_RACE_SECS:-25}
NHOT=3			# files every racer works on
NCOLD=12		# files a streamer reads so that culling keeps running
KiB=1024
HOT=$((256 * KiB + 333))
COLD=$((512 * KiB))
data=$(harness_tmpdir origin-data)
for ((i = 0; i < NHOT; i++)); do head -c $HOT /dev/urandom >"$data/hot$i"; done
for ((i = 0; i < NCOLD; i++)); do head -c $COLD /dev/urandom >"$data/cold$i"; done
test_origin "$data"
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
work=$(harness_tmpdir work)
# 2 MiB holds a few of the 7.5 MiB read: fills keep culling what is closed.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,cache_size=2M,actimeo=0" || exit 1

# race.py ROLE FILE... : loop ROLE on the files for SECS seconds. Every
# write puts back bytes the file already holds and every truncate is
# undone by the same racer, so once all have stopped the files must equal
# the origin's copies (the truncator restores last).
cat >"$work/race.py" <<-'PY'
	import os, random, sys, time
	role, secs, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
	orig = {f: open(f, "rb").read() for f in files} if role in ("write", "truncate") else {}
	stop = time.time() + secs
	n = errs = 0
	while time.time() < stop:
	    f = random.choice(files)
	    try:
	        if role == "openclose":
	            fd = os.open(f, os.O_RDONLY)
	            os.pread(fd, 4096, random.randrange(0, 256 * 1024, 4096))
	            os.close(fd)
	        elif role == "stat":
	            os.stat(f)
	        elif role == "stream":
	            fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
	            try:
	                import mmap
	                m = mmap.mmap(-1, 1 << 20)
	                os.readv(fd, [m])
	            finally:
	                os.close(fd)
	        elif role == "write":
	            b = orig[f]
	            off = random.randrange(0, len(b) - 8192, 512)
	            fd = os.open(f, os.O_WRONLY)
	            os.pwrite(fd, b[off:off + 8192], off)
	            os.close(fd)
	        elif role == "truncate":
	            b = orig[f]
	            os.truncate(f, len(b) - random.randrange(1, 4096))
	            fd = os.open(f, os.O_WRONLY)
	            os.pwrite(fd, b[len(b) - 4096:], len(b) - 4096)
	            os.close(fd)
	            os.truncate(f, len(b))
	        n += 1
	    except OSError as e:
	        errs += 1
	        print("%s: %s: %s" % (role, f, e), flush=True)
	        if errs > 5:
	            break
	print("%s: %d ops, %d errors" % (role, n, errs))
	sys.exit(1 if errs else 0)
	PY
hot=() cold=()
for ((i = 0; i < NHOT; i++)); do hot+=("$mnt/hot$i"); done
for ((i = 0; i < NCOLD; i++)); do cold+=("$mnt/cold$i"); done
pids=() roles=()
start() { # ROLE FILES...
	local role=$1
	shift
	timeout $((SECS + 60)) "$PY" "$work/race.py" "$role" "$SECS" "$@" >"$work/$role.${#pids[@]}.out" 2>&1 &
	pids+=($!)
	roles+=("$role")
}
for r in openclose openclose openclose stat stat write truncate; do start "$r" "${hot[@]}"; done
start stream "${cold[@]}"
for ((i = 0; i < ${#pids[@]}; i++)); do
	wait "${pids[$i]}"
	rc=$?
	out=$(tail -n 3 "$work/${roles[$i]}.$i.out")
	echo "  ${roles[$i]}: $(tail -n 1 "$work/${roles[$i]}.$i.out")" >&2
	[ $rc -eq 0 ] || bad "racer ${roles[$i]} (status $rc): $out"
done
pid_alive "$GW_PID" || bad "the gateway died during the race (log: $GW_LOG)"
sanitizer_check "$GW_LOG" || bad "sanitizer report during the race"

if pid_alive "$GW_PID"; then
	for ((i = 0; i < NHOT; i++)); do
		cmp -s "$data/hot$i" "$mnt/hot$i" || bad "hot$i: mount bytes differ from the origin's"
		drop_caches
		cmp -s "$data/hot$i" "$mnt/hot$i" || bad "hot$i: bytes differ from the origin's after dropping the page cache"
	done
	culled=$(gw_metric "$cdir" cache_culled_objects_total)
	hits=$(gw_metric "$cdir" cache_hit_bytes_total)
	echo "  culled objects ${culled:-none}, cache hit bytes ${hits:-none}" >&2
	[ "${culled:-0}" -gt 0 ] || bad "cache_culled_objects_total ${culled:-none}, want > 0 (culling did not race)"
	[ "${hits:-0}" -gt 0 ] || bad "cache_hit_bytes_total ${hits:-none}, want > 0 (the cache was never read)"
fi
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
