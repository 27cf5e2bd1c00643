#!/bin/bash
# Guest test: knfsd as the origin (in a network namespace of its own, so its nfsd threads are its own, as on another machine) → cachegw: tree and bytes equal the origin's, the second read is served by the cache, a change made in the origin's directory is seen after close-to-open, writes through the gateway land at the origin byte for byte and read back after fsync/close, an 8 MiB write from a kernel NFSv3 client through a knfsd re-export of the gateway completes, and (knfsd behind tests/lib/wccproxy.py, which adds the WRITE pre-op attributes knfsd never sends) a range changed at the origin while the gateway holds the file open, then another range written through the gateway, reads back as the origin's whole file.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start inspect
trap 'vm_cleanup; knfsd_origin_stop' EXIT
sum() { timeout 120 sha256sum <"$1" | cut -d' ' -f1; }
MiB=1048576

# A smaller tree than fill_tree's default: the same kinds of entries, less to
# copy under TCG.
FILL_BIG_SIZE=$((9 * MiB + 12345))
FILL_MANY_COUNT=100
data=$(harness_tmpdir origin-data)
fill_tree "$data" || { echo "fill_tree failed" >&2; exit 1; }
head -c $((4 * MiB)) /dev/urandom >"$data/wcc.bin"
step "knfsd origin in network namespace $KNFSD_ORIGIN_NS"
knfsd_origin_start "$data" 7401 || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$KNFSD_ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
gw1=$GW_PID

step "tree and bytes"
manifest() { timeout 300 bash -c "$(declare -f vm_manifest); vm_manifest '$1'"; }
if ! diff <(vm_manifest "$data") <(manifest "$mnt") >"$HARNESS_TMP/tree.diff" 2>&1; then
	bad "the tree through the gateway differs from the origin's: $(head -n 5 "$HARNESS_TMP/tree.diff")"
fi

step "the second read is served by the cache"
total=$(find "$data" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
gw_wait_metric "$cdir" cache_fill_bytes_total "$total" 60 ||
	bad "fills: $(gw_metric "$cdir" cache_fill_bytes_total) bytes, want $total"
o1=$(gw_metric "$cdir" origin_read_bytes_total)
h1=$(gw_metric "$cdir" cache_hit_bytes_total)
drop_caches
if ! diff <(vm_manifest "$data") <(manifest "$mnt") >"$HARNESS_TMP/tree2.diff" 2>&1; then
	bad "the second read differs from the origin's: $(head -n 5 "$HARNESS_TMP/tree2.diff")"
fi
o2=$(gw_metric "$cdir" origin_read_bytes_total)
h2=$(gw_metric "$cdir" cache_hit_bytes_total)
[ -n "$o1" ] && [ "$o1" = "$o2" ] || bad "the second read went to the origin: origin read bytes $o1 -> $o2"
[ $((h2 - h1)) -ge "$total" ] || bad "cache hit bytes moved by $((h2 - h1)), want >= $total"

step "a change in the origin's directory is seen at the next open"
head -c 8192 /dev/urandom | dd of="$data/edge_1m" bs=4096 seek=70 conv=notrunc status=none
[ "$(sum "$mnt/edge_1m")" = "$(sum "$data/edge_1m")" ] ||
	bad "edge_1m changed at the origin: the next open reads old bytes (kernel pages)"
drop_caches
[ "$(sum "$mnt/edge_1m")" = "$(sum "$data/edge_1m")" ] ||
	bad "edge_1m changed at the origin: a read after drop_caches serves old bytes (disk cache)"

step "writes through the gateway land at the origin"
head -c $((5 * MiB + 123)) /dev/urandom >"$HARNESS_TMP/w.src"
timeout 300 dd if="$HARNESS_TMP/w.src" of="$mnt/written.bin" bs=1M conv=fsync status=none ||
	bad "dd of written.bin through the gateway failed"
cmp "$HARNESS_TMP/w.src" "$data/written.bin" || bad "the origin's written.bin differs from what was written"
cp "$data/big.bin" "$HARNESS_TMP/big.want"
head -c 65536 /dev/urandom >"$HARNESS_TMP/patch"
for f in "$mnt/big.bin" "$HARNESS_TMP/big.want"; do
	timeout 120 dd if="$HARNESS_TMP/patch" of="$f" bs=4096 seek=1001 conv=notrunc,fsync status=none ||
		bad "dd into $f failed"
done
cmp "$HARNESS_TMP/big.want" "$data/big.bin" || bad "the origin's big.bin differs after a write into its middle"

step "fsync/close, then the bytes read back"
[ "$(sum "$mnt/written.bin")" = "$(sum "$HARNESS_TMP/w.src")" ] || bad "written.bin reads back wrong (kernel pages)"
[ "$(sum "$mnt/big.bin")" = "$(sum "$HARNESS_TMP/big.want")" ] || bad "big.bin reads back wrong (kernel pages)"
drop_caches
[ "$(sum "$mnt/written.bin")" = "$(sum "$HARNESS_TMP/w.src")" ] || bad "written.bin reads back wrong after drop_caches"
[ "$(sum "$mnt/big.bin")" = "$(sum "$HARNESS_TMP/big.want")" ] || bad "big.bin reads back wrong after drop_caches"

step "the 8 MiB write through a knfsd re-export completes"
knfsd_start || exit 1
knfsd_export "$mnt" 7402 no_root_squash || exit 1
c3=$(harness_tmpdir client-v3)
nfs_mount "127.0.0.1:$mnt" "$c3" vers=3,nolock,actimeo=0 || exit 1
head -c $((8 * MiB)) /dev/urandom >"$HARNESS_TMP/w8"
timeout -k 10 300 dd if="$HARNESS_TMP/w8" of="$c3/written8.bin" bs=1M conv=fsync status=none
rc=$?
if [ $rc = 124 ] || [ $rc = 137 ]; then
	bad "dd of 8 MiB through the re-export did not finish in 300 s"
	vm_hang_report "$gw1"
elif [ $rc != 0 ]; then
	bad "dd of 8 MiB through the re-export failed ($rc)"
fi
cmp "$HARNESS_TMP/w8" "$data/written8.bin" || bad "the origin's written8.bin differs from what the client wrote"

step "wcc: a range changed at the origin, then another written through the gateway"
# knfsd sends no pre-op attributes in WRITE replies (nfsd3_proc_write never
# saves them: wcc_data "before" is absent), so a second gateway mounts the
# origin through tests/lib/wccproxy.py, which adds them as FreeBSD's nfsd
# sends them. Open read-write and read (kernel pages and disk cache hold
# it), change [1 MiB, +64 KiB) in the origin's directory, write
# [3 MiB, +64 KiB) through the open file, close.
# (absolute: entering a mount namespace moves the cwd to its root)
knfsd_origin_exec python3 "$(cd "$(dirname "$0")/../lib" && pwd)/wccproxy.py" 2050 2049 "$KNFSD_ORIGIN_ADDR" \
	>"$HARNESS_TMP/proxy.log" 2>&1 </dev/null &
harness_register_pid $!
for ((i = 0; i < 100; i++)); do
	grep -q ready "$HARNESS_TMP/proxy.log" && break
	sleep 0.1
done
mnt2=$(harness_tmpdir mnt-wcc)
cdir2=$(harness_tmpdir cache-wcc)
mount_gateway "nfs://$KNFSD_ORIGIN_ADDR$data?nfsport=2050&mountport=$KNFSD_ORIGIN_MNT_PORT" \
	"$mnt2" "cache_dir=$cdir2" || exit 1
timeout 120 python3 "$(dirname "$0")/../lib/foreign_write.py" "$mnt2/wcc.bin" "$data/wcc.bin" || bad "wcc.bin: the open/read/change/write sequence failed"
w=$(gw_metric "$cdir2" write_wcc_foreign_total)
[ "${w:-0}" -ge 1 ] || bad "the WRITE's pre-op attributes did not show the change at the origin: write_wcc_foreign_total '$w'"
[ "$(sum "$mnt2/wcc.bin")" = "$(sum "$data/wcc.bin")" ] ||
	bad "wcc.bin: the next open reads other bytes than the origin's (the range changed at the origin is lost: kernel pages kept)"
drop_caches
[ "$(sum "$mnt2/wcc.bin")" = "$(sum "$data/wcc.bin")" ] ||
	bad "wcc.bin: after drop_caches, other bytes than the origin's (the disk cache kept the old range)"
w=$(gw_metric "$cdir" write_wcc_foreign_total)
[ "$w" = 0 ] || bad "the first mount (no pre-op attributes from knfsd) counted foreign changes: '$w'"

step "done"
exit $fail
