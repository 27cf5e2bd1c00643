#!/bin/bash
# `mount.fuse3 SOURCE MNT -t cachegw -o ...` (what mount -t fuse.cachegw and /etc/fstab run) mounts a daemonized gateway that serves the origin's bytes and logs through logfile=; unmount ends it.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
command -v mount.fuse3 >/dev/null || { echo "SKIP: no mount.fuse3" >&2; exit 77; }

data=$(harness_tmpdir origin-data)
fill_tree "$data" || exit 1
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
bin=$(harness_tmpdir bin)
log=$(harness_tmpdir log)/gw.log
ln -s "$CACHEGW" "$bin/cachegw"
harness_register_mount "$mnt"

# mount.fuse3 finds the helper "cachegw" on PATH and passes the fstab
# options; _netdev and nofail are for mount(8), the gateway must accept them.
PATH="$bin:$PATH" timeout 30 mount.fuse3 "$ORIGIN_URL" "$mnt" -t cachegw \
	-o "cache_dir=$cdir,allow_other,_netdev,nofail,noatime,logfile=$log" ||
	bad "mount.fuse3 failed (exit $?)"
is_mounted "$mnt" || { bad "nothing mounted at $mnt"; exit 1; }
pid=$(pgrep -f "cachegw $ORIGIN_URL $mnt" | head -n 1)
[ -n "$pid" ] && harness_register_pid "$pid"
grep -q " $mnt fuse.cachegw " /proc/mounts || bad "mount type is not fuse.cachegw"

a=$(sha256sum <"$data/$FILL_BIG" | cut -d' ' -f1)
b=$(timeout 60 sha256sum <"$mnt/$FILL_BIG" | cut -d' ' -f1)
[ "$a" = "$b" ] || bad "big file differs through the mount.fuse3 mount"

fusermount3 -u "$mnt" || bad "unmount failed"
for _ in $(seq 100); do
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
	sleep 0.2
done
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && bad "daemon $pid still running after unmount"
sanitizer_check "$log" || bad "sanitizer report in $log"
exit $fail
