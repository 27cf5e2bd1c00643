#!/bin/bash
# 8 concurrent ranged readers (dd, various block sizes and offsets, some past EOF) of the 33 MiB file through the gateway get the origin's bytes, cold and warm.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
fill_tree "$data" || exit 1
test_origin "$data"
work=$(harness_tmpdir work)
test_mount

# "bs skip count" — file is 33 MiB + 12345 bytes.
readers=(
	"1M 0 8"          # first 8 MiB
	"1M 5 10"         # overlaps the first
	"12345 7 300"     # odd block size, unaligned
	"4096 2000 1000"  # 4 KiB blocks at 8000 KiB
	"65537 100 100"   # just over 64 KiB, unaligned
	"1M 30 10"        # runs past EOF (short last block)
	"777 43000 5000"  # tiny blocks across the tail
	"12345 0 3000"    # whole file, odd block size
)

range_sum() { # FILE BS SKIP COUNT
	dd if="$1" bs="$2" skip="$3" count="$4" iflag=fullblock status=none | sha256sum | cut -d' ' -f1
}

for i in "${!readers[@]}"; do
	read -r bs skip count <<<"${readers[i]}"
	range_sum "$data/$FILL_BIG" "$bs" "$skip" "$count" >"$work/want.$i"
done

for round in cold warm; do
	pids=()
	for i in "${!readers[@]}"; do
		read -r bs skip count <<<"${readers[i]}"
		(
			set -o pipefail
			timeout 120 dd if="$mnt/$FILL_BIG" bs="$bs" skip="$skip" count="$count" \
				iflag=fullblock status=none 2>"$work/err.$i" |
				sha256sum | cut -d' ' -f1 >"$work/got.$i"
		) &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		if ! wait "${pids[i]}"; then
			bad "$round reader $i (${readers[i]}) failed: $(head -c 300 "$work/err.$i")"
		elif ! cmp -s "$work/want.$i" "$work/got.$i"; then
			bad "$round reader $i (bs skip count = ${readers[i]}) got different bytes"
		fi
	done
done

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
