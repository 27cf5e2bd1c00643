#!/bin/bash
# Re-export handles cannot be guessed: through a ganesha re-export of the mount, a client holding the handle of one file and making the handle of another (that file's node-id, its own generation: what a client can guess, node-ids being sequential) gets NFS3ERR_STALE, not the other file's bytes; real handles of both read their own bytes, before and after a gateway + re-exporter restart on the same cache_dir (the key is kept); two files' generations differ.
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

# Restart both on the same cache_dir: the generations stay.
origin_stop reexp
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
origin_start reexp "$mnt" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" || exit 1
check "after a restart"
exit $fail
