#!/bin/bash
# Re-export handles cannot be guessed: through a ganesha re-export of the mount, a client holding the handle of one file and making the handle of another (that file's node-id, its own generation: what a client can guess, node-ids being sequential) gets NFS3ERR_STALE, not the other file's bytes; real handles of both read their own bytes, before and after a gateway + re-exporter restart on the same cache_dir (the key is kept); two files' generations differ; an upgrade from the first format of cache_dir/handle-key (XXH3) keeps the handles it gave valid.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
test_require_fhclient
trap test_reexport_cleanup EXIT

data=$(harness_tmpdir origin-data)
mkdir -m 0700 "$data/private"
echo "the file a client was given" >"$data/private/given"
echo "a file the client was never given" >"$data/private/secret"
test_origin "$data"
test_mount allow_other
cat "$mnt/private/given" "$mnt/private/secret" >/dev/null	# the gateway has seen both
test_reexport
R=$(origin_url reexp)

ha=$("$FHCLIENT" gethandle "$R" private/given) || { echo "FAIL: gethandle given" >&2; exit 1; }
hb=$("$FHCLIENT" gethandle "$R" private/secret) || { echo "FAIL: gethandle secret" >&2; exit 1; }
echo "  given:  $ha" >&2
echo "  secret: $hb" >&2
# Inside the re-exporter's handle is the kernel's FUSE handle: node-id
# (u32 high, u32 low, little-endian) then the generation (u32). The two
# handles differ first in the node-id's low byte (node-ids are handed out
# in order); the attacker's handle is the given one with the other's
# node-id: its own generation kept.
n=${#ha}
[ "${#hb}" = "$n" ] || { echo "FAIL: handles of different lengths: '$ha' / '$hb'" >&2; exit 1; }
for ((i = 0; i < n; i++)); do [ "${ha:i:1}" = "${hb:i:1}" ] || break; done
p=$((i / 2 * 2))
[ $((p + 16)) -le "$n" ] || { echo "FAIL: unexpected handle layout: '$ha' / '$hb'" >&2; exit 1; }
[ "${ha:p+8:8}" != "${hb:p+8:8}" ] || bad "the two files have the same generation (${ha:p+8:8})"
forged=${ha:0:p}${hb:p:8}${ha:p+8}
echo "  forged: $forged" >&2
readfh() { "$FHCLIENT" readfh "$R" "$1" 2>&1; }
check() { # WHEN
	[ "$(readfh "$ha")" = "the file a client was given" ] || bad "$1: the real handle of given reads '$(readfh "$ha")'"
	[ "$(readfh "$hb")" = "a file the client was never given" ] || bad "$1: the real handle of secret reads '$(readfh "$hb")'"
	out=$(readfh "$forged")
	rc=$?
	case $out in
	*"never given"*) bad "$1: a made-up handle ($forged) read the other file: '$out'" ;;
	esac
	[ $rc = 3 ] || bad "$1: the made-up handle: exit $rc ('$out'), want 3 (NFS3ERR_STALE)"
}
check "first mount"

# restart: both on the same cache_dir.
restart() {
	origin_stop reexp
	unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
	test_reexport
}
# The generations stay.
restart
check "after a restart"

# An upgrade from handle-key's first format (XXH3 of the node-id seeded
# with a secret): the cache_dir as a gateway of that format leaves it
# when it started with private and given known (their handles carry the
# table's generation) and saw secret first (the XXH3 one). After the
# upgrade and after one more restart, the gateway gives both files the
# handles that gateway gave (their generations) and they read their
# files; the start logs the three node-ids that keep guessable
# generations. (Handles are taken anew after each mount: ganesha's hold
# the mount's device number, which another test's mount can take.)
V1=$(dirname "$FHCLIENT")/handlekey_v1
[ -x "$V1" ] || { echo "FAIL: $V1 not built" >&2; exit 1; }
hex_le() { echo "${1:6:2}${1:4:2}${1:2:2}${1:0:2}"; }	# 8 hex digits, LE <-> BE
seed=0123456789abcdef
cut=$(hex_le "${hb:p-8:8}")$(hex_le "${hb:p:8}")	# secret's node-id
declare -A gen text
gen[given]=$(od -An -tx1 -j12 -N4 "$cdir/nodes.log" | tr -d ' \n')	# the table's
gen[secret]=$("$V1" gen $seed "$cut") || exit 1
text[given]="the file a client was given"
text[secret]="a file the client was never given"
origin_stop reexp
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
"$V1" write "$cdir/handle-key" $seed "$cut" || exit 1
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
test_reexport
[ "$(head -c 8 "$cdir/handle-key")" = CGWHKEY2 ] || bad "handle-key not rewritten in the new format"
grep -q "handle-key: 3 node-ids handed out before it was made keep generations a client can compute from handles it holds (2 the table's one, 1 of the older hash)" "$GW_LOG" ||
	bad "no or another count of node-ids keeping older generations in the log: $(grep handle-key "$GW_LOG")"
check_v1() { # WHEN
	local f h
	for f in given secret; do
		h=$("$FHCLIENT" gethandle "$R" "private/$f") || { bad "$1: gethandle $f"; continue; }
		[ "${h:p+8:8}" = "${gen[$f]}" ] || bad "$1: $f's handle $h has generation ${h:p+8:8}; the older gateway gave ${gen[$f]}"
		[ "$(readfh "$h")" = "${text[$f]}" ] || bad "$1: $f's handle $h reads '$(readfh "$h")'"
	done
}
check_v1 "after the upgrade"
restart
check_v1 "after a restart after the upgrade"
exit $fail
