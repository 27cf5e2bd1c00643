#!/bin/bash
# Bytes flipped in cached data files and damaged .meta files (bad magic, bad header checksum, truncated) are caught, counted, logged and repaired; reads stay exact; cachegw-inspect verify exits 1 on damage and 0 once repaired.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

# Distinct sizes: cachegw-inspect ls shows the size, which names the object.
declare -A SIZE=(
	[d.bin]=$((16 * 1048576 + 111))	# data blocks flipped
	[m1.bin]=$((3 * 1048576 + 222))	# .meta magic damaged
	[m2.bin]=$((3 * 1048576 + 333))	# .meta truncated inside the header
	[m3.bin]=$((3 * 1048576 + 444))	# .meta header byte flipped (its checksum)
)
FILES="d.bin m1.bin m2.bin m3.bin"
TOTAL=0
data=$(harness_tmpdir origin-data)
declare -A WANT
for f in $FILES; do
	head -c "${SIZE[$f]}" /dev/urandom >"$data/$f"
	WANT[$f]=$(sha256sum <"$data/$f" | cut -d' ' -f1)
	TOTAL=$((TOTAL + ${SIZE[$f]}))
done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
LOGS=()

read_all() { # LABEL: every file exact
	local f got
	for f in $FILES; do
		got=$(timeout 60 sha256sum <"$mnt/$f" | cut -d' ' -f1)
		[ "$got" = "${WANT[$f]}" ] || bad "$1: $f: bytes differ from the origin's"
	done
}
mount_gw() { mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1; LOGS+=("$GW_LOG"); }
obj_of() { # FILE: object name, by its size
	cache_inspect ls --cache-dir "$cdir" | awk -v s="${SIZE[$1]}" 'NR > 1 && $2 == s { print $1; exit }'
}
obj_path() { printf '%s/objects/%s/%s' "$cdir" "${1:0:2}" "$1"; }
flip_byte() { # FILE OFFSET: invert one byte in place
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	[ -n "$b" ] || { bad "cannot read byte $2 of $1"; return 1; }
	# shellcheck disable=SC2059
	printf "\\$(printf %03o $((b ^ 0xff)))" |
		dd of="$1" bs=1 seek="$2" count=1 conv=notrunc status=none
}
verify_rc() { cache_inspect verify --cache-dir "$cdir" >/dev/null 2>&1; echo $?; }

# ---- 1. Fill the cache, check it verifies clean.
mount_gw
read_all cold
gw_wait_metric "$cdir" cache_fill_bytes_total "$TOTAL" 20 || bad "fills incomplete 20 s after the cold read"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
declare -A OBJ
for f in $FILES; do
	OBJ[$f]=$(obj_of "$f")
	[ -n "${OBJ[$f]}" ] || { bad "no object of size ${SIZE[$f]} ($f) in cachegw-inspect ls"; exit 1; }
done
[ "$(verify_rc)" = 0 ] || bad "verify of the intact cache exits non-zero"
BS=$(awk -F' = ' '$1 == "block_size" { print $2 }' "$cdir/cache.conf")
[ -n "$BS" ] || { bad "no block_size in cache.conf"; exit 1; }

damage() { # flip data bytes of d.bin in block 0 and a middle block; damage metas
	local d=${OBJ[d.bin]}
	BLK_MID=$(( (5 * 1048576 + 100) / BS ))
	flip_byte "$(obj_path "$d")" 7 || exit 1
	flip_byte "$(obj_path "$d")" $((5 * 1048576 + 100)) || exit 1
	flip_byte "$(obj_path "${OBJ[m1.bin]}").meta" 0 || exit 1	# magic
	truncate -s 20 "$(obj_path "${OBJ[m2.bin]}").meta"
	flip_byte "$(obj_path "${OBJ[m3.bin]}").meta" 40 || exit 1	# key byte: header checksum
}

# ---- 2. Damage; verify sees it.
damage
out=$(cache_inspect verify --cache-dir "$cdir" 2>&1)
rc=$?
[ $rc = 1 ] || bad "verify of the damaged cache exits $rc, want 1: $out"
n=$(printf '%s\n' "$out" | awk '/damaged block/ { print $1; exit }')
[ "${n:-0}" -ge 2 ] || bad "verify reports ${n:-no} damaged blocks, want >= 2 (2 data blocks + 3 metas): $out"
out=$(cache_inspect show --cache-dir "$cdir" "${OBJ[m1.bin]}" 2>&1)
echo "$out" | grep -q DAMAGED || bad "show of the object with bad magic does not say DAMAGED: $out"

# ---- 3. The gateway catches it: exact bytes, counted, logged, refilled.
mount_gw
drop_caches
read_all "read of damaged cache"
c=$(gw_metric "$cdir" cache_corrupt_blocks_total)
[ "${c:-0}" -ge 5 ] || bad "cache_corrupt_blocks_total ${c:-none}, want >= 5 (2 blocks + 3 objects)"
o=$(gw_metric "$cdir" origin_read_bytes_total)
minre=$((${SIZE[m1.bin]} + ${SIZE[m2.bin]} + ${SIZE[m3.bin]} + 2 * BS))
[ "${o:-0}" -ge "$minre" ] || bad "origin_read_bytes_total ${o:-none} < $minre: damaged objects/blocks not refetched"
d=${OBJ[d.bin]}
for blk in 0 "$BLK_MID"; do
	grep -Eq "block ${blk}[^0-9].*$d|$d.*block ${blk}([^0-9]|\$)" "$GW_LOG" ||
		bad "no log line naming block $blk of object $d"
done
for f in m1.bin m2.bin m3.bin; do
	grep -q "${OBJ[$f]}" "$GW_LOG" || bad "no log line naming object ${OBJ[$f]} ($f, damaged metadata)"
done
# Refills land; a second read (page cache dropped) is served by the cache.
gw_wait_metric "$cdir" cache_fill_bytes_total "$minre" 20 || bad "refills incomplete"
sleep 0.5
h1=$(gw_metric "$cdir" cache_hit_bytes_total)
o1=$(gw_metric "$cdir" origin_read_bytes_total)
drop_caches
read_all "second read after repair"
h2=$(gw_metric "$cdir" cache_hit_bytes_total)
o2=$(gw_metric "$cdir" origin_read_bytes_total)
[ $((h2 - h1)) -ge "$TOTAL" ] || bad "second read: cache_hit_bytes moved by $((h2 - h1)), want >= $TOTAL"
[ "$o2" = "$o1" ] || bad "second read: origin_read_bytes moved $o1 -> $o2"
c2=$(gw_metric "$cdir" cache_corrupt_blocks_total)
[ "$c2" = "$c" ] || bad "second read: corrupt blocks moved $c -> $c2 (repair did not stick)"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
rc=$(verify_rc)
[ "$rc" = 0 ] || bad "verify after the gateway's repair exits $rc, want 0"
for f in m1.bin m2.bin m3.bin; do
	cache_inspect show --cache-dir "$cdir" "$(obj_of "$f")" >/dev/null 2>&1 ||
		bad "$f: no intact object after the refill"
done

# ---- 4. Offline repair: damage again, verify --repair, verify clean, read exact.
damage
[ "$(verify_rc)" = 1 ] || bad "verify of the re-damaged cache does not exit 1"
out=$(cache_inspect verify --cache-dir "$cdir" --repair 2>&1)
echo "$out" | grep -q dropped || bad "verify --repair does not say it dropped blocks: $out"
rc=$(verify_rc)
[ "$rc" = 0 ] || bad "verify after verify --repair exits $rc, want 0"
mount_gw
drop_caches
# d.bin alone first: only its 2 dropped blocks come from the origin, with
# the other blocks of the kernel's read that needs them (a read is at most
# 1 MiB: the gateway fetches every block it covers) and 1 MiB of timing
# slack; every other block is served by the cache (refetching a readahead
# window of present blocks would be 8 MiB).
slack=$((2 * (1048576 + BS) + 1048576))
got=$(timeout 60 sha256sum <"$mnt/d.bin" | cut -d' ' -f1)
[ "$got" = "${WANT[d.bin]}" ] || bad "read after verify --repair: d.bin bytes differ"
o=$(gw_metric "$cdir" origin_read_bytes_total)
h=$(gw_metric "$cdir" cache_hit_bytes_total)
echo "after verify --repair: d.bin: ${o:-?} bytes from the origin, ${h:-?} from the cache" >&2
[ "${o:-0}" -ge $((2 * BS)) ] || bad "after verify --repair: origin_read_bytes ${o:-none}: dropped blocks not refetched"
[ "${o:-0}" -le "$slack" ] || bad "after verify --repair: d.bin, 2 blocks of $BS dropped, took ${o:-none} bytes from the origin: present blocks fetched again"
[ "${h:-0}" -ge $((${SIZE[d.bin]} - slack)) ] || bad "after verify --repair: d.bin: cache_hit_bytes ${h:-none}: intact blocks not reused"
read_all "read after verify --repair"
c=$(gw_metric "$cdir" cache_corrupt_blocks_total)
[ "$c" = 0 ] || bad "after verify --repair the gateway still found $c corrupt blocks"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
[ "$(verify_rc)" = 0 ] || bad "final verify exits non-zero"

if [ $fail != 0 ]; then
	for l in "${LOGS[@]}"; do echo "--- $l" >&2; tail -n 15 "$l" >&2; done
fi
exit $fail
