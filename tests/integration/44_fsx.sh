#!/bin/bash
# fsx (reads, writes, truncates up and down, mapped reads and MAP_SHARED writes, fsync, close/reopen, O_DIRECT reads, dropped page cache) through the mount with the default cache, cache_block=4K and cache_writes=around: every op matches fsx's model; the files then equal the origin's, and read the same through a fresh mount on a new cache_dir and after a remount on the same one; fsx -X (a byte corrupted on purpose) fails.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
# fsx from the same build as the gateway (tests/fsx).
FSX=${CACHEGW_FSX:-$(dirname "$CACHEGW")/../tests/fsx/fsx}
[ -x "$FSX" ] || { echo "SKIP: fsx not built ($FSX)" >&2; exit 77; }
# Fixed seeds, so that a failure replays; CACHEGW_FSX_SEEDS tries others.
read -r -a seeds <<<"${CACHEGW_FSX_SEEDS:-1 3}"
ops=${CACHEGW_FSX_OPS:-1200}

step() { echo "--- $* ($SECONDS s)" >&2; }

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)

# run_fsx LABEL FILE ARGS...: fsx on FILE through the mount; its report
# (op log, first bad offset) goes to stderr on failure.
run_fsx() {
	local label=$1 f=$2 out
	shift 2
	out=$work/fsx.$label.out
	if ! timeout 120 "$FSX" "$@" "$f" >"$out" 2>&1; then
		bad "$label: fsx $* failed:"
		head -n 80 "$out" >&2
		return 1
	fi
	echo "  $label: $(tail -n 1 "$out")" >&2
}

# same_bytes LABEL NAME DIR: DIR/NAME is byte for byte the origin's.
same_bytes() {
	local out
	out=$(timeout 60 cmp "$data/$2" "$3/$2" 2>&1) || bad "$1: $2 differs from the origin's: $out"
}

# One mount configuration: fsx with each seed (mapped writes included;
# -d: O_DIRECT reads, and after every op the whole file read with O_DIRECT
# as well, through the gateway rather than the kernel's pages; the last
# seed on a 1 MiB file with ops up to 256 KiB, more cache blocks), then the files checked at the
# origin, through a fresh mount on a new cache_dir, and after a remount on
# the first cache_dir with the page cache dropped (its disk cache).
config() { # NAME MOUNT_OPTS
	local name=$1 opts=$2 cdir fresh s files=() size
	cdir=$(harness_tmpdir "cache-$name")
	step "$name: fsx through a mount with ${opts:-default options}"
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir${opts:+,$opts}" || { bad "$name: mount"; return; }
	for s in "${seeds[@]}"; do
		size=(-l 256K -o 64K)
		[ "$s" = "${seeds[-1]}" ] && size=(-l 1M -o 256K)
		run_fsx "$name.$s" "$mnt/fsx.$name.$s" -S "$s" -N "$ops" -c 20 -d "${size[@]}"
		files+=("fsx.$name.$s")
	done
	# Mapped writes of MiBs: the kernel writes the pages of one cache
	# block back in parallel WRITEs. Before cache_write serialized its
	# edge merges, two merged from the same old copy and the block kept
	# only one write's bytes (this seed failed 4 runs in 4, by op 200).
	run_fsx "$name.big" "$mnt/fsx.$name.big" -S 852230692 -N 200 -l 8M -o 3M -c 8 -k 3 -d
	files+=("fsx.$name.big")
	for f in "${files[@]}"; do
		same_bytes "$name: same mount" "$f" "$mnt"
	done
	unmount_gateway "$mnt" || bad "$name: unmount / gateway exit (log: $GW_LOG)"

	fresh=$(harness_tmpdir "cache-$name-fresh")
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$fresh${opts:+,$opts}" || { bad "$name: fresh mount"; return; }
	for f in "${files[@]}"; do
		same_bytes "$name: fresh mount, new cache_dir" "$f" "$mnt"
	done
	unmount_gateway "$mnt" || bad "$name: unmount (fresh) (log: $GW_LOG)"

	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir${opts:+,$opts}" || { bad "$name: remount"; return; }
	drop_caches
	for f in "${files[@]}"; do
		same_bytes "$name: remount on the fsx run's cache_dir" "$f" "$mnt"
	done
	unmount_gateway "$mnt" || bad "$name: unmount (remount) (log: $GW_LOG)"
}

config default ""
config block4k "cache_block=4K"
config around "cache_writes=around"

# The checks can fail: -X changes a byte behind fsx's model (through a
# second open of the mount) and fsx must report it.
step "fsx -X: a corrupted byte is found"
cdir=$(harness_tmpdir cache-selftest)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
timeout 60 "$FSX" -S 7 -N 200 -X 150 "$mnt/fsx.selftest" >"$work/selftest.out" 2>&1
rc=$?
[ $rc = 1 ] || bad "fsx -X 150 exited $rc, want 1"
grep -q 'FAIL: op 150: .*first bad offset\|FAIL: op 150: size' "$work/selftest.out" ||
	bad "fsx -X 150 did not report the corrupted byte: $(head -n 5 "$work/selftest.out")"
unmount_gateway "$mnt" || bad "unmount (self-test) (log: $GW_LOG)"

step "done"
exit $fail
