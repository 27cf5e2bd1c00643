#!/bin/bash
# A full cache disk does not make CREATE lie: with the cache directory's file system full, creates through the gateway either succeed (the file is at the origin and reads back) or fail with ENOSPC having made nothing at the origin; never "No space left on device" for a file the origin now has. Freed space: creates work again, and everything made survives a restart.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect

data=$(harness_tmpdir origin-data)
mkdir "$data/new"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
fs=$(harness_tmpdir cachefs)
mount -t tmpfs -o size=8m,mode=0700 cachegw-test-cache "$fs" || { echo "SKIP: cannot mount a tmpfs" >&2; exit 77; }
harness_register_mount "$fs"
cdir=$fs/cache
mnt=$(harness_tmpdir mnt)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1

# Fill the cache's file system to the last block.
dd if=/dev/zero of="$fs/filler" bs=64k 2>/dev/null
df -k "$fs" | tail -1 >&2

made=0 refused=0 lied=0
for i in $(seq 1 3000); do
	err=$( { : >"$mnt/new/f$i"; } 2>&1 )
	if [ -z "$err" ]; then
		made=$((made + 1))
		[ -e "$data/new/f$i" ] || bad "f$i: created through the gateway, not at the origin"
		continue
	fi
	case $err in
	*"No space left on device"*) ;;
	*) bad "f$i: create failed with '$err', want ENOSPC" ;;
	esac
	if [ -e "$data/new/f$i" ]; then
		lied=$((lied + 1))
		[ $lied -le 3 ] && bad "f$i: create said '$err' but the origin has the file"
	else
		refused=$((refused + 1))
	fi
	[ $refused -ge 5 ] && break
	[ $lied -ge 5 ] && break
done
echo "  made $made, refused $refused, refused after the origin made it $lied" >&2
[ $refused -ge 1 ] || bad "no create was refused on a full cache disk ($made made, $lied lied)"
[ $lied = 0 ] || bad "$lied creates reported ENOSPC for files the origin has"
v=$(gw_metric "$cdir" nodes_room_refusals_total)
[ "${v:-0}" -ge "$refused" ] || bad "nodes_room_refusals_total ${v:-none}, $refused refused"
# Reads of what exists go on.
[ "$(ls "$mnt/new" | wc -l)" = "$made" ] || bad "the listing has $(ls "$mnt/new" | wc -l) names, $made were made"

# Room again: creates succeed, with their bytes.
rm -f "$fs/filler"
echo "made after space came back" >"$mnt/new/after" || bad "create after space came back"
[ "$(cat "$data/new/after" 2>/dev/null)" = "made after space came back" ] || bad "new/after at the origin"

# A restart: everything made is there, through the mount.
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
[ "$(ls "$mnt/new" | wc -l)" = "$((made + 1))" ] || bad "after a restart the listing has $(ls "$mnt/new" | wc -l) names, want $((made + 1))"
[ "$(cat "$mnt/new/after")" = "made after space came back" ] || bad "new/after through the mount after a restart"
exit $fail
