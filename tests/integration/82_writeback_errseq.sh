#!/bin/bash
# -o writeback, a full origin (tmpfs, size=4m): a write-back WRITE's ENOSPC goes once to each descriptor open for writing when it happened (fsync fails, the next one succeeds), not to a reader whose close() flushed the pages, nor to a writer opened after it.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

work=$(harness_tmpdir work)
# errseq.py FILE: writers a and b open, a writes 8 MiB into the page cache,
# reader r opens and closes (the kernel writes the dirty pages out at its
# close), writer c opens; then fsyncs and closes; prints each result.
py_script "$work/errseq.py" <<-'PY'
	path = sys.argv[1]
	out = []
	a = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
	b = os.open(path, os.O_WRONLY)
	out += ["write", res(lambda: os.write(a, b"x" * (8 << 20)))]
	r = os.open(path, os.O_RDONLY)
	out += ["r-close", res(lambda: os.close(r))]
	c = os.open(path, os.O_WRONLY)
	out += ["a-fsync", res(lambda: os.fsync(a))]
	out += ["b-fsync", res(lambda: os.fsync(b))]
	out += ["b-fsync", res(lambda: os.fsync(b))]
	out += ["a-fsync", res(lambda: os.fsync(a))]
	out += ["c-fsync", res(lambda: os.fsync(c))]
	for n, fd in (("a", a), ("b", b), ("c", c)):
	    out += [n + "-close", res(lambda: os.close(fd))]
	print(" ".join(out))
	PY

small=$(harness_tmpdir small)
mount -t tmpfs -o size=4m cachegw-test-small "$small" || { bad "cannot mount a tmpfs"; exit 1; }
harness_register_mount "$small"
origin_start small "$small" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$SMALL_URL" "$mnt" "cache_dir=$cdir,writeback" || exit 1

want="write ok r-close ok a-fsync ENOSPC b-fsync ENOSPC b-fsync ok a-fsync ok c-fsync ok a-close ok b-close ok c-close ok"
out=$(timeout 120 "$PY" "$work/errseq.py" "$mnt/f" 2>&1)
[ "$out" = "$want" ] || bad "got '$out', want '$want'"
grep -q "write-back WRITE of .* refused (No space left on device)" "$GW_LOG" ||
	bad "no refused write-back WRITE in the gateway's log"

unmount_gateway || bad "unmount"
origin_stop small
exit $fail
