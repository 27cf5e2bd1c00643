#!/bin/bash
# A lookup of a new name while the node-id table cannot write (injected fdatasync or write error) fails with that error (EIO, ENOSPC), never ENOMEM, and lookups succeed again once the fault is gone: the table rewrites itself, and keeps every mapping across a remount.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
for f in a b c d e; do echo "file $f" >"$data/$f"; done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)/c

# stat NAME: prints "ok" or the error text stat(1) gave.
try_stat() {
	local err
	if err=$(timeout 30 stat -c %s "$mnt/$1" 2>&1 >/dev/null); then
		echo ok
	else
		echo "${err##*: }"
	fi
}

# ---- 1. The first fdatasync fails: it is the id reservation of the first
#         new name, so that lookup fails with EIO; the next ones work.
CACHEGW_INJECT_NODES_SYNC_ERROR=EIO:1 mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
r=$(try_stat a)
[ "$r" = "Input/output error" ] || bad "lookup of a under a failed fdatasync: '$r', want 'Input/output error'"
r=$(try_stat b)
[ "$r" = ok ] || bad "lookup of b after the fault is gone: '$r', want ok (table not recovered)"
r=$(try_stat a)
[ "$r" = ok ] || bad "lookup of a again: '$r', want ok"
[ "$(cat "$mnt/b" 2>/dev/null)" = "file b" ] || bad "read of b after recovery"
grep -q "node-id table: rewritten" "$GW_LOG" || bad "no log line of the table being rewritten"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
log1=$GW_LOG

# ---- 2. A write fails with ENOSPC: that lookup fails with ENOSPC, the next
#         works; a and b (added in run 1) resolve without writing.
CACHEGW_INJECT_NODES_ERROR=ENOSPC:1 mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
# a is in the table since run 1: its lookup writes nothing, so it cannot
# meet the injected fault.
r=$(try_stat a)
[ "$r" = ok ] || bad "run 2: lookup of a (in the table since run 1): '$r', want ok"
r=$(try_stat c)
[ "$r" = "No space left on device" ] || bad "run 2: lookup of c under a failed write: '$r', want 'No space left on device'"
r=$(try_stat c)
[ "$r" = ok ] || bad "run 2: lookup of c after the fault: '$r', want ok"
for f in b d e; do
	r=$(try_stat $f)
	[ "$r" = ok ] || bad "run 2: lookup of $f: '$r', want ok"
done
grep -q "Cannot allocate memory" "$GW_LOG" && bad "the gateway logged ENOMEM"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"

if [ $fail != 0 ]; then
	echo "--- gateway logs:" >&2
	tail -n 20 "$log1" "$GW_LOG" >&2
fi
exit $fail
