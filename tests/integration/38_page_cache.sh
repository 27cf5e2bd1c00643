#!/bin/bash
# The kernel's page cache of a file: writes through the mount do not make the next open drop it (kernel_cache_drops_total stays 0); a change at the origin does; a read-only open of a file that is open for writing reads around it (direct_io: nothing of its reads stays in the page cache), and reads through it again once the writer closed.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
command -v fincore >/dev/null || { echo "SKIP: fincore (util-linux) not installed" >&2; exit 77; }

SIZE=$((4 * 1048576))
test_origin_random f "$SIZE"
test_mount
drops() { gw_metric "$cdir" kernel_cache_drops_total; }
# Bytes of the mount's file in the page cache (fincore maps it: only
# while no writer has it open, or the map is refused).
cached() { fincore -b -n -o RES "$mnt/f" | awk '{ print $1 + 0 }'; }

# 1. Our own writes: the open after them keeps the pages.
"$PY" - "$mnt/f" <<-'PY' || bad "write through the mount failed"
	import os, sys
	fd = os.open(sys.argv[1], os.O_WRONLY)
	os.pwrite(fd, b"own" * 1000, 4096)
	os.close(fd)
	PY
cat "$mnt/f" >/dev/null
cat "$mnt/f" >/dev/null
[ "$(drops)" = 0 ] || bad "opens after our own write dropped the kernel's pages: kernel_cache_drops_total $(drops)"
cmp -s "$data/f" "$mnt/f" || bad "after our write the mount's bytes differ from the origin's"

# 2. A change at the origin: the next open drops them (and reads the change).
printf 'origin' | dd of="$data/f" bs=1 seek=100 conv=notrunc status=none
cmp -s "$data/f" "$mnt/f" || bad "after a change at the origin the mount's bytes differ from the origin's"
[ "$(drops)" -ge 1 ] || bad "a change at the origin did not drop the kernel's pages: kernel_cache_drops_total $(drops)"

# 3. A reader while a writer holds the file open: direct_io, so its reads
# leave nothing in the page cache; after the writer closes, they do.
drop_caches
"$PY" - "$mnt/f" <<-'PY' || bad "reading while a writer has the file open failed"
	import os, sys
	w = os.open(sys.argv[1], os.O_WRONLY)
	with open(sys.argv[1], "rb") as r:
	    n = len(r.read())
	os.close(w)
	sys.exit(0 if n > 0 else 1)
	PY
c1=$(cached)
cat "$mnt/f" >/dev/null
c2=$(cached)
echo "page cache of the file: ${c1:-?} bytes after a read beside a writer, ${c2:-?} after a read alone" >&2
[ "${c1:-1}" = 0 ] || bad "a read beside a writer left ${c1:-?} bytes in the page cache (want direct_io: 0)"
[ "${c2:-0}" -ge $((SIZE / 2)) ] || bad "a read with no writer left only ${c2:-?} bytes in the page cache"
cmp -s "$data/f" "$mnt/f" || bad "the mount's bytes differ from the origin's"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
