#!/bin/bash
# -o writeback, two writers of one file (uid 1000 its owner, uid 1001 through its group): with the owner's access revoked at the origin while both hold dirty pages, the other's fsync succeeds and the origin holds both writers' bytes exactly, whichever opened last (the file the kernel sends the pages through); with both revoked, each writer's fsync fails once with EACCES.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

work=$(harness_tmpdir work)
# two.py MNTFILE ORIGINFILE ORDER REVOKE: uid 1000 (A, no groups) and uid
# 1001 (B, group 4242) open the file for writing in ORDER (ab or ba: the
# kernel sends write-back pages through one of them), each writes 64 KiB
# (whole pages: no READ) into the page cache; then, at the origin, the file
# goes to REVOKE (uid:gid); then B fsyncs, A fsyncs, both again, both close.
py_script "$work/two.py" <<-'PY'
	path, opath, order, revoke = sys.argv[1:5]
	users = {"a": (1000, 1000, []), "b": (1001, 1001, [4242])}
	def as_user(who, fn):
	    uid, gid, groups = users[who]
	    os.setgroups(groups)
	    os.setegid(gid)
	    os.seteuid(uid)
	    try:
	        return fn()
	    finally:
	        os.seteuid(0)
	        os.setegid(0)
	        os.setgroups([])
	fds = {}
	for who in order:
	    fds[who] = as_user(who, lambda: os.open(path, os.O_WRONLY))
	os.pwrite(fds["a"], b"A" * 65536, 0)
	os.pwrite(fds["b"], b"B" * 65536, 65536)
	uid, gid = revoke.split(":")
	os.chown(opath, int(uid), int(gid))
	out = []
	for who in "baba":
	    out += [who + "-fsync", res(lambda: os.fsync(fds[who]))]
	for who in "ab":
	    out += [who + "-close", res(lambda: os.close(fds[who]))]
	print(" ".join(out))
	PY

data=$(harness_tmpdir origin-data)
chmod 0755 "$data"
test_origin "$data"
test_mount writeback,allow_other

"$PY" -c 'import sys; sys.stdout.buffer.write(b"A" * 65536 + b"B" * 65536)' >"$work/expect"
# round NAME ORDER REVOKE WANT
round() {
	local name=$1 order=$2 revoke=$3 want=$4 out
	rm -f "$data/$name"
	install -m 0660 -o 1000 -g 4242 /dev/null "$data/$name"
	out=$(timeout 120 "$PY" "$work/two.py" "$mnt/$name" "$data/$name" "$order" "$revoke" 2>&1)
	[ "$out" = "$want" ] || bad "($name) opened $order, origin file made $revoke: got '$out', want '$want'"
}
ok="b-fsync ok a-fsync ok b-fsync ok a-fsync ok a-close ok b-close ok"
# 1. and 2. The owner (A) loses its access; B still writes through group
# 4242. Both orders of opening, so that the kernel sends the pages through
# A's file in one of them.
for order in ab ba; do
	round "r$order" "$order" 1002:4242 "$ok"
	cmp "$data/r$order" "$work/expect" >/dev/null 2>&1 ||
		bad "(r$order) bytes at the origin: $(cmp "$data/r$order" "$work/expect" 2>&1 | head -c 200)"
done
grep -q "refused to uid 1000: sent as uid 1001" "$GW_LOG" ||
	bad "no WRITE sent again as the other writer in the gateway's log"
# 3. Neither may write any more: the error goes to both writers, once each.
round none ab 1002:4243 "b-fsync EACCES a-fsync EACCES b-fsync ok a-fsync ok a-close ok b-close ok"

unmount_gateway || bad "unmount"
exit $fail
