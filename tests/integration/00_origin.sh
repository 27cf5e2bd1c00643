#!/bin/bash
# Harness self-test: ganesha origins (two side by side) serve a fill_tree'd dir byte-exactly to libnfs (nfs-ls -R, nfs-cat); no gateway involved.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" origin

data=$(harness_tmpdir origin-data)
fill_tree "$data" || { echo "fill_tree failed" >&2; exit 1; }
test_origin "$data"

# 1. Listing: nfs-ls -R (mode, nlink, uid, gid, size, path) against find.
#    Symbolic mode + size + relative path; both sorted.
want=$(cd "$data" && find . -mindepth 1 -printf '%M %s %P\n' | LC_ALL=C sort -k3)
got=$(timeout 60 nfs-ls -R "$ORIGIN_URL" |
	awk '{ m = $1; s = $5; $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print m, s, $0 }' |
	LC_ALL=C sort -k3)
if [ "$want" != "$got" ]; then
	bad "nfs-ls -R listing differs from the exported dir"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -n 40 >&2
fi
n=$(printf '%s\n' "$got" | grep -c " $FILL_MANY/")
[ "$n" = "$FILL_MANY_COUNT" ] || bad "nfs-ls -R shows $n entries in $FILL_MANY/, want $FILL_MANY_COUNT"

# 2. Bytes: nfs-cat of a few files equals the local bytes.
for f in empty one_byte edge_64k_minus_1 edge_64k_plus_1 edge_1m edge_1m_plus_1 \
	"$FILL_BIG" sparse.bin mode_0640 dir_0750/file 'name with spaces.txt' \
	nested/l1/l2/l3/l4/leaf 'ünïcödé-名前.txt'; do
	if ! timeout 60 nfs-cat "$(origin_url origin "$f")" | cmp -s - "$data/$f"; then
		bad "nfs-cat $f differs from the origin file"
	fi
done

# 3. A second instance side by side (the future re-exporter's ports).
data2=$(harness_tmpdir second-data)
printf 'second instance\n' >"$data2/hello"
origin_start second "$data2" "$REEXPORT_NFS_PORT" "$REEXPORT_MNT_PORT" || exit 1
[ "$(timeout 20 nfs-cat "$(origin_url second hello)")" = "second instance" ] ||
	bad "second instance does not serve its file"
timeout 60 nfs-cat "$(origin_url origin edge_1m)" | cmp -s - "$data/edge_1m" ||
	bad "origin stopped serving after the second instance started"
timeout 20 nfs-ls "$SECOND_URL" | grep -q ' hello$' || bad "nfs-ls of second instance"

# 4. origin_stop stops the process it started (by pid).
pid=$ORIGIN_PID
origin_stop origin
if pid_alive "$pid"; then bad "ganesha pid $pid still alive after origin_stop"; fi
timeout 20 nfs-cat "$(origin_url second hello)" >/dev/null || bad "second instance died with the first"

exit $fail
