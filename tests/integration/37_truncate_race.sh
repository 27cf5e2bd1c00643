#!/bin/bash
# A writer that truncates (O_TRUNC) and appends while O_DIRECT and buffered readers re-read the file: no read ever fails (ENODATA once leaked out here), and the final bytes equal the origin's.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
PY=$(command -v python3) || { echo "SKIP: no python3" >&2; exit 77; }

data=$(harness_tmpdir origin-data)
test_origin "$data"
work=$(harness_tmpdir work)
test_mount

cat >"$work/race.py" <<-'PY'
	import mmap, os, sys, threading, time
	path, mode, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
	def rec(i): return ((b"%07d\n" % i) * 512)[: 4096 - (i % 3)]
	stop = time.time() + secs
	written = [0]
	def writer():
	    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
	    i = 0
	    while time.time() < stop:
	        os.write(fd, rec(i)); i += 1
	    os.close(fd)
	    written[0] = i
	t = threading.Thread(target=writer); t.start()
	reads = errors = zeros = 0
	while time.time() < stop:
	    try:
	        if mode == "direct":
	            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
	            m = mmap.mmap(-1, (os.fstat(fd).st_size // 4096 + 2) * 4096)
	            n = os.readv(fd, [m]); b = bytes(m[:n]); os.close(fd)
	        else:
	            with open(path, "rb") as f: b = f.read()
	    except FileNotFoundError:
	        continue
	    except OSError as e:
	        errors += 1
	        print("read error: %s" % e)
	        if errors > 3: break
	        continue
	    reads += 1
	    if b.find(b"\0" * 16) >= 0:
	        zeros += 1
	t.join()
	print("reads %d errors %d zero-runs %d records %d" % (reads, errors, zeros, written[0]))
	# Every record is a run of digits: a zero run is never the file's.
	sys.exit(1 if errors or zeros else 0)
	PY
for round in 1 2; do
	for mode in direct buffered; do
		out=$(timeout 60 "$PY" "$work/race.py" "$mnt/trunc.$mode" "$mode" 3 2>&1)
		rc=$?
		echo "  round $round, $mode: $(printf '%s\n' "$out" | tail -n 1)" >&2
		[ $rc -eq 0 ] || bad "round $round, $mode readers: $(printf '%s\n' "$out" | head -n 3)"
		cmp -s "$data/trunc.$mode" "$mnt/trunc.$mode" ||
			bad "round $round, $mode: mount bytes differ from the origin's after the writer closed"
	done
done
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
