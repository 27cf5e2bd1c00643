#!/bin/bash
# With an origin that sends pre-op attributes in its WRITE replies (ganesha behind tests/lib/wccproxy.py, which adds them as FreeBSD's nfsd sends them): a range changed at the origin while the mount holds the file open and has read it, then another range written through the mount, reads back as the origin's whole file at the next open (kernel pages) and after drop_caches (disk cache); the mount's own writes are not taken for someone else's.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

sum() { timeout 30 sha256sum <"$1" | cut -d' ' -f1; }
MiB=1048576

data=$(harness_tmpdir origin-data)
head -c $((4 * MiB)) /dev/urandom >"$data/foreign.bin"
test_origin "$data"
test_proxy wccproxy.py
test_mount

# 1. The mount's own writes, one after the other, in an open file: each
#    WRITE finds what the one before left. Not someone else's change: the
#    file's blocks stay cached (a re-read after drop_caches is served by
#    the cache).
head -c $((3 * MiB)) /dev/urandom >"$HARNESS_TMP/own"
timeout 60 dd if="$HARNESS_TMP/own" of="$mnt/own.bin" bs=256k conv=fsync status=none ||
	bad "dd of own.bin failed"
cmp "$HARNESS_TMP/own" "$data/own.bin" || bad "own.bin at the origin differs from what was written"
w=$(gw_metric "$cdir" write_wcc_foreign_total)
[ "$w" = 0 ] || bad "the mount's own writes were taken for someone else's: write_wcc_foreign_total '$w', want 0"
o1=$(gw_metric "$cdir" origin_read_bytes_total)
drop_caches
[ "$(sum "$mnt/own.bin")" = "$(sum "$HARNESS_TMP/own")" ] || bad "own.bin reads back wrong"
o2=$(gw_metric "$cdir" origin_read_bytes_total)
[ "$o1" = "$o2" ] || bad "own.bin was read again from the origin ($o1 -> $o2): its written blocks were dropped"

# 2. Open read-write and read (kernel pages and disk cache hold the file),
#    change [1 MiB, +64 KiB) in the origin's directory, write
#    [3 MiB, +64 KiB) through the open file, close.
timeout 60 python3 "$(dirname "$0")/../lib/foreign_write.py" "$mnt/foreign.bin" "$data/foreign.bin" || bad "the open/read/change/write sequence failed"
w=$(gw_metric "$cdir" write_wcc_foreign_total)
[ "${w:-0}" -ge 1 ] || bad "the WRITE's pre-op attributes did not show the change at the origin: write_wcc_foreign_total '$w'"
[ "$(sum "$mnt/foreign.bin")" = "$(sum "$data/foreign.bin")" ] ||
	bad "foreign.bin: the next open reads other bytes than the origin's (the range changed at the origin is lost: kernel pages kept)"
drop_caches
[ "$(sum "$mnt/foreign.bin")" = "$(sum "$data/foreign.bin")" ] ||
	bad "foreign.bin: after drop_caches, other bytes than the origin's (the disk cache kept the old range)"

unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
