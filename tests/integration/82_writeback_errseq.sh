#!/bin/bash
# -o writeback, a full origin (tmpfs, size=4m): a write-back WRITE's ENOSPC goes to each descriptor open for writing when it happened, at its next fsync (once: the next one succeeds) or close, not to a reader whose close() flushed the pages (after reading them), nor to a writer opened after it; and readers run as children of the writer (cat, a reader through mmap), which inherit the writers' descriptors as a shell's children do and close them at their exit (a FLUSH of the writers' own open files), take it from neither of two writers.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

work=$(harness_tmpdir work)
# errseq.py FILE MODE: writers a and b open, a writes 8 MiB into the page
# cache (4 MiB fit at the origin), then
#   MODE "open":     reader r opens, reads it all and closes (the kernel
#                    writes the dirty pages out at its close), writer c
#                    opens; then fsyncs and closes;
#   MODE "children": cat and a reader through mmap read it as children that
#                    hold a and b too (pass_fds) until they exit; then a
#                    fsyncs twice, b closes, a closes;
# prints each result (for the readers: the x's they read).
py_script "$work/errseq.py" <<-'PY'
	import subprocess
	path, mode = sys.argv[1], sys.argv[2]
	out = []
	a = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
	b = os.open(path, os.O_WRONLY)
	out += ["write", res(lambda: os.write(a, b"x" * (8 << 20)))]
	if mode == "open":
	    r = os.open(path, os.O_RDONLY)
	    n = 0
	    while True:
	        d = os.read(r, 1 << 20)
	        if not d:
	            break
	        n += len(d)
	    out += ["read", str(n)]
	    out += ["r-close", res(lambda: os.close(r))]
	    c = os.open(path, os.O_WRONLY)
	    out += ["a-fsync", res(lambda: os.fsync(a))]
	    out += ["b-fsync", res(lambda: os.fsync(b))]
	    out += ["b-fsync", res(lambda: os.fsync(b))]
	    out += ["a-fsync", res(lambda: os.fsync(a))]
	    out += ["c-fsync", res(lambda: os.fsync(c))]
	    for n, fd in (("a", a), ("b", b), ("c", c)):
	        out += [n + "-close", res(lambda: os.close(fd))]
	else:
	    mm = ("import mmap, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); "
	          "m = mmap.mmap(fd, 0, prot=mmap.PROT_READ); print(m[:].count(b'x'))")
	    for name, argv in (("cat", ["cat", path]),
	                       ("mmap", [sys.executable, "-c", mm, path])):
	        p = subprocess.run(argv, stdout=subprocess.PIPE, pass_fds=(a, b))
	        n = p.stdout.count(b"x") if name == "cat" else int(p.stdout)
	        out += [name, str(n) if p.returncode == 0 else "exit %d" % p.returncode]
	    out += ["a-fsync", res(lambda: os.fsync(a))]
	    out += ["a-fsync", res(lambda: os.fsync(a))]
	    out += ["b-close", res(lambda: os.close(b))]
	    out += ["a-close", res(lambda: os.close(a))]
	print(" ".join(out))
	PY

small=$(harness_tmpdir small)
mount -t tmpfs -o size=4m cachegw-test-small "$small" || { bad "cannot mount a tmpfs"; exit 1; }
harness_register_mount "$small"
origin_start small "$small" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$SMALL_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1

want="write ok read 8388608 r-close ok a-fsync ENOSPC b-fsync ENOSPC b-fsync ok a-fsync ok c-fsync ok a-close ok b-close ok c-close ok"
out=$(timeout 120 "$PY" "$work/errseq.py" "$mnt/f" open 2>&1)
[ "$out" = "$want" ] || bad "a reader: got '$out', want '$want'"
rm -f "$mnt/f"
# cat reads the kernel's dirty pages; its exit writes them out (the
# origin takes 4 MiB), and the mmap reader reads what the origin holds.
out=$(timeout 120 "$PY" "$work/errseq.py" "$mnt/f" children 2>&1)
want="write ok cat 8388608 mmap $(tr -cd x <"$small/f" | wc -c) a-fsync ENOSPC a-fsync ok b-close ENOSPC a-close ok"
[ "$out" = "$want" ] || bad "readers as children: got '$out', want '$want'"
grep -q "write-back WRITE of .* refused (No space left on device)" "$GW_LOG" ||
	bad "no refused write-back WRITE in the gateway's log"

unmount_gateway || bad "unmount"
origin_stop small
exit $fail
