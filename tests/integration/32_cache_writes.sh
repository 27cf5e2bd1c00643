#!/bin/bash
# cache_writes=through and =around: overwrites, appends, truncates and new files written through the mount read back exactly (origin bytes as truth) after a remount on the same cache and dropped page cache; with through, rewritten ranges come from the cache, not the origin.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

INSPECT=$(dirname "$CACHEGW")/../tools/inspect/cachegw-inspect
[ -x "$INSPECT" ] || { echo "SKIP: $INSPECT not built" >&2; exit 77; }

# metric CACHE_DIR NAME: a counter of the live gateway on CACHE_DIR.
metric() {
	timeout 10 "$INSPECT" stats --cache-dir "$1" --prometheus |
		awk -v n="cachegw_$2" '$1 == n { print $2; f = 1 } END { if (!f) print "NA" }'
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
sum() { sha256sum <"$1" | cut -d' ' -f1; }

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)

for mode in through around; do
	d=$data/$mode
	mkdir "$d"
	# A: 4 MiB + 777 (this test sets cache_block=256K: a partial last block),
	# T: 2 MiB to truncate, both read through the mount before the writes.
	head -c $((4194304 + 777)) /dev/urandom >"$d/A"
	head -c 2097152 /dev/urandom >"$d/T"
	cdir=$(harness_tmpdir "cache-$mode")
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,cache_writes=$mode,cache_block=256K" || exit 1
	M=$mnt/$mode
	cat "$M/A" "$M/T" >/dev/null || bad "$mode: first read failed"

	# The same writes go to the mount and to a local shadow copy; the
	# origin must end up equal to the shadow. Nothing is read through the
	# mount until after the remount (a read would refill the cache).
	shadow=$work/shadow-$mode
	mkdir "$shadow"
	cp "$d/A" "$d/T" "$shadow/"
	head -c 4096 /dev/urandom >"$work/w1"
	head -c 100000 /dev/urandom >"$work/w2"
	head -c 262144 /dev/urandom >"$work/w3"
	head -c 300000 /dev/urandom >"$work/w4"
	head -c $((3 * 1048576 + 4321)) /dev/urandom >"$work/N"
	for D in "$M" "$shadow"; do
		# Overwrites: unaligned 4 KiB at 5, 100000 B at 1 MiB+123, one
		# whole aligned 256 KiB block at 512 KiB, 3 bytes in the last
		# partial block.
		dd if="$work/w1" of="$D/A" bs=4096 oflag=seek_bytes seek=5 conv=notrunc status=none || bad "$mode: overwrite 1 ($D)"
		dd if="$work/w2" of="$D/A" oflag=seek_bytes seek=$((1048576 + 123)) conv=notrunc status=none || bad "$mode: overwrite 2 ($D)"
		dd if="$work/w3" of="$D/A" bs=262144 seek=2 conv=notrunc status=none || bad "$mode: overwrite 3 ($D)"
		printf 'xyz' | dd of="$D/A" oflag=seek_bytes seek=$((4194304 + 100)) conv=notrunc status=none || bad "$mode: overwrite 4 ($D)"
		# Appends (O_APPEND).
		cat "$work/w4" >>"$D/A" || bad "$mode: append ($D)"
		echo appended >>"$D/A" || bad "$mode: append 2 ($D)"
		# Truncate shrink, grow, write into the grown part.
		truncate -s 1000000 "$D/T" || bad "$mode: truncate shrink ($D)"
		truncate -s 1500000 "$D/T" || bad "$mode: truncate grow ($D)"
		printf 'grown' | dd of="$D/T" oflag=seek_bytes seek=1400000 conv=notrunc status=none || bad "$mode: write in grown part ($D)"
		# A new file: whole blocks and a tail.
		dd if="$work/N" of="$D/N" bs=1M status=none || bad "$mode: new file ($D)"
	done
	for f in A T N; do
		cmp -s "$shadow/$f" "$d/$f" || bad "$mode: $f at the origin differs from the same writes on a local fs"
	done
	unmount_gateway "$mnt" || bad "$mode: unmount (log: $GW_LOG)"
	timeout 60 "$INSPECT" verify --cache-dir "$cdir" >"$work/verify.$mode" 2>&1 ||
		{ bad "$mode: cachegw-inspect verify found damage"; tail -n 5 "$work/verify.$mode" >&2; }

	# Remount on the same cache, no page cache: read back.
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,cache_writes=$mode,cache_block=256K" || exit 1
	drop_caches
	# a. Rewritten ranges, read alone with O_DIRECT (no kernel readahead
	# around them): A's whole rewritten block (512 KiB..768 KiB), A's
	# block 0 (4 KiB merged into the cached block), all of N.
	for rd in "A 2 1" "A 0 1" "N 0 12"; do
		read -r f skip count <<<"$rd"
		r0=$(metric "$cdir" origin_read_bytes_total)
		h0=$(metric "$cdir" cache_hit_bytes_total)
		got=$(dd if="$M/$f" bs=262144 skip="$skip" count="$count" iflag=direct status=none | sha256sum | cut -d' ' -f1)
		want=$(dd if="$d/$f" bs=262144 skip="$skip" count="$count" status=none | sha256sum | cut -d' ' -f1)
		r1=$(metric "$cdir" origin_read_bytes_total)
		h1=$(metric "$cdir" cache_hit_bytes_total)
		echo "$mode: O_DIRECT read of $f blocks $skip+$count after remount: origin_read $((r1 - r0)) B, cache_hit $((h1 - h0)) B" >&2
		[ "$got" = "$want" ] || bad "$mode: $f blocks $skip+$count after remount differ from the origin"
		if [ "$mode" = through ]; then
			[ $((r1 - r0)) -eq 0 ] && [ $((h1 - h0)) -ge $((count * 262144)) ] ||
				bad "through: written range $f blocks $skip+$count not served from the cache after remount (origin $((r1 - r0)) B, hit $((h1 - h0)) B)"
		elif [ "$f$skip" = A2 ]; then
			[ $((r1 - r0)) -ge 262144 ] ||
				bad "around: written block $f/$skip came from the cache ($((r1 - r0)) B from the origin): it should have been dropped"
		fi
	done
	# The checksums of those hits came from the metadata file: this
	# gateway's checksum cache started empty.
	if [ "$mode" = through ]; then
		loads=$(metric "$cdir" cache_checksum_loads_total)
		[ "${loads:-0}" -ge 1 ] || bad "through: cache hits after a remount loaded no checksums (cache_checksum_loads_total '${loads:-}')"
	fi
	# b. Whole files, through the page cache: the origin's bytes.
	r0=$(metric "$cdir" origin_read_bytes_total)
	h0=$(metric "$cdir" cache_hit_bytes_total)
	for f in A T N; do
		[ "$(sum "$M/$f")" = "$(sum "$d/$f")" ] || bad "$mode: $f after remount differs from the origin"
	done
	r1=$(metric "$cdir" origin_read_bytes_total)
	h1=$(metric "$cdir" cache_hit_bytes_total)
	echo "$mode: whole A, T, N after remount: origin_read $((r1 - r0)) B, cache_hit $((h1 - h0)) B" \
		"(sizes $(( $(stat -c %s "$d/A" "$d/T" "$d/N" | paste -sd+) )) B)" >&2
	# Second read: everything from the cache now, still the origin's bytes.
	drop_caches
	r3=$(metric "$cdir" origin_read_bytes_total)
	for f in A T N; do
		[ "$(sum "$M/$f")" = "$(sum "$d/$f")" ] || bad "$mode: $f on second read differs from the origin"
	done
	r4=$(metric "$cdir" origin_read_bytes_total)
	[ $((r4 - r3)) -eq 0 ] || echo "note: $mode: second read still took $((r4 - r3)) B from the origin" >&2
	unmount_gateway "$mnt" || bad "$mode: unmount (log: $GW_LOG)"
	timeout 60 "$INSPECT" verify --cache-dir "$cdir" >"$work/verify.$mode" 2>&1 ||
		{ bad "$mode: cachegw-inspect verify found damage after read-back"; tail -n 5 "$work/verify.$mode" >&2; }
done
exit $fail
