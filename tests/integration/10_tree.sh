#!/bin/bash
# Gateway mount of a fill_tree'd origin: names, types, sizes, modes, symlink targets, mtimes, st_ino and every file's sha256 equal the origin's; clean unmount.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
fill_tree "$data" || { echo "fill_tree failed" >&2; exit 1; }
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
timeout 20 mountpoint -q "$mnt" || bad "mountpoint -q $mnt fails after mounting"

# 1. Tree and bytes.
want=$(tree_manifest "$data")
got=$(harness_timeout 180 tree_manifest "$mnt")
rc=$?
[ $rc = 0 ] || bad "tree_manifest of the mount exited $rc (124 = timeout)"
if [ "$want" != "$got" ]; then
	bad "manifest of the mount differs from the origin's (< origin, > mount)"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -n 60 >&2
fi

# 2. Modification times (seconds).
want_t=$(tree_manifest "$data" --mtime | cut -f1,6)
got_t=$(harness_timeout 180 tree_manifest "$mnt" --mtime | cut -f1,6)
if [ "$want_t" != "$got_t" ]; then
	bad "mtimes differ (< origin, > mount)"
	diff <(printf '%s\n' "$want_t") <(printf '%s\n' "$got_t") | head -n 20 >&2
fi

# 3. st_ino is the origin's fileid (for ganesha's VFS FSAL: the local inode).
for f in . empty "$FILL_BIG" nested/l1/l2/l3/l4/leaf link_to_dir "$FILL_MANY/f123"; do
	a=$(stat -c %i "$data/$f")
	b=$(timeout 20 stat -c %i "$mnt/$f")
	[ "$a" = "$b" ] || bad "st_ino of $f: origin $a, mount $b"
done

# 4. statfs answers.
timeout 20 df -P "$mnt" >/dev/null || bad "statfs (df) on the mount fails"

# 5. Clean unmount: the gateway exits 0, no sanitizer report.
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
is_mounted "$mnt" && bad "$mnt still mounted"
exit $fail
