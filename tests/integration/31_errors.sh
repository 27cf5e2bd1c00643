#!/bin/bash
# Each error through the mount (ENOENT, EEXIST, ENOTEMPTY, ENOTDIR, EISDIR, EINVAL, ENAMETOOLONG, ELOOP; EACCES/EPERM as uid 1000; EXDEV; EROFS on -o ro; ENOSPC from a full origin) equals the errno the same syscall gets on a local filesystem.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
test_require_cmd setpriv

# The origin's export is a small ext4 on a loop device, so that ENOSPC can
# be reached quickly. Its mount is unmounted by hand once ganesha is gone
# (ganesha holds it busy until then).
loopmnt=
cleanup() {
	local rc=$?
	if [ -n "$loopmnt" ] && is_mounted "$loopmnt"; then
		[ -n "${GW_MNT:-}" ] && _harness_unmount "$GW_MNT"
		[ -n "${RO_MNT:-}" ] && _harness_unmount "$RO_MNT"
		origin_stop origin
		umount "$loopmnt" 2>/dev/null || umount -l "$loopmnt"
	fi
	(exit $rc)
	harness_cleanup
}
trap cleanup EXIT

work=$(harness_tmpdir work)
chmod 0755 "$work"
loopmnt=$(harness_tmpdir origin-ext4)
img=$work/origin.img
truncate -s 24M "$img"
mkfs.ext4 -q -F -m 0 -O ^has_journal "$img" >/dev/null 2>&1 || { echo "SKIP: mkfs.ext4 failed" >&2; loopmnt=; exit 77; }
if ! mount -o loop "$img" "$loopmnt" 2>"$work/loop.err"; then
	echo "SKIP: cannot loop-mount an ext4 image: $(cat "$work/loop.err")" >&2
	loopmnt=
	exit 77
fi
harness_register_mount "$loopmnt"
chmod 0755 "$loopmnt"
data=$loopmnt

# The errno script: setup BASE | root BASE | user BASE. Prints "op errno"
# (or "op ok") per line.
cat >"$work/errs.py" <<-'PY'
	import ctypes, errno, os, stat, sys
	libc = ctypes.CDLL(None, use_errno=True)
	mode, base = sys.argv[1], sys.argv[2]
	P = lambda *a: os.path.join(base, *a)

	def show(name, fn):
	    try:
	        r = fn()
	        if isinstance(r, int):
	            os.close(r)   # an fd from os.open
	        print(name, "ok")
	    except OSError as e:
	        print(name, errno.errorcode.get(e.errno, e.errno))

	def openw(path, fl=os.O_WRONLY, m=0o644):
	    return os.open(path, fl, m)

	def renameat2(a, b, fl):
	    if libc.renameat2(-100, a.encode(), -100, b.encode(), fl) != 0:
	        e = ctypes.get_errno()
	        raise OSError(e, os.strerror(e))

	def write_ro(path):
	    fd = os.open(path, os.O_RDONLY)
	    try:
	        os.write(fd, b"x")
	    finally:
	        os.close(fd)

	if mode == "setup":
	    os.mkdir(P("d")); open(P("d", "x"), "w").write("x\n")
	    os.mkdir(P("e"))
	    open(P("f"), "w").write("data\n"); os.chmod(P("f"), 0o644)
	    open(P("secret"), "w").write("secret\n"); os.chmod(P("secret"), 0o600)
	    os.mkdir(P("priv")); os.chmod(P("priv"), 0o700)
	    os.mkdir(P("udir")); os.chown(P("udir"), 1000, 1000)
	    open(P("udir", "mine"), "w").write("mine\n"); os.chown(P("udir", "mine"), 1000, 1000)
	    os.symlink("loop2", P("loop1")); os.symlink("loop1", P("loop2"))
	    os.symlink("nowhere", P("dangling"))
	    os.mkdir(P("r555")); os.chmod(P("r555"), 0o555)
	    sys.exit(0)

	if mode == "root":
	    show("open-missing", lambda: os.open(P("missing"), os.O_RDONLY))
	    show("stat-missing", lambda: os.stat(P("missing")))
	    show("open-missing-parent", lambda: os.open(P("nodir", "x"), os.O_CREAT | os.O_WRONLY, 0o644))
	    show("mkdir-existing-dir", lambda: os.mkdir(P("d")))
	    show("mkdir-existing-file", lambda: os.mkdir(P("f")))
	    show("creat-excl-existing", lambda: os.open(P("f"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
	    show("creat-excl-dangling", lambda: os.open(P("dangling"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
	    show("link-existing", lambda: os.link(P("f"), P("d", "x")))
	    show("symlink-existing", lambda: os.symlink("t", P("f")))
	    show("mknod-existing", lambda: os.mknod(P("f"), 0o644 | stat.S_IFREG))
	    show("mkfifo-existing", lambda: os.mkfifo(P("d")))
	    show("rmdir-nonempty", lambda: os.rmdir(P("d")))
	    show("open-through-file", lambda: os.open(P("f", "x"), os.O_RDONLY))
	    show("creat-through-file", lambda: os.open(P("f", "x"), os.O_CREAT | os.O_WRONLY, 0o644))
	    show("mkdir-through-file", lambda: os.mkdir(P("f", "x")))
	    show("open-file-slash", lambda: os.open(P("f") + "/", os.O_RDONLY))
	    show("rmdir-file", lambda: os.rmdir(P("f")))
	    show("unlink-dir", lambda: os.unlink(P("d")))
	    show("open-dir-wronly", lambda: os.open(P("d"), os.O_WRONLY))
	    show("open-dir-rdwr", lambda: os.open(P("d"), os.O_RDWR))
	    show("open-file-odirectory", lambda: os.open(P("f"), os.O_RDONLY | os.O_DIRECTORY))
	    show("truncate-dir", lambda: os.truncate(P("d"), 0))
	    show("rename-dir-over-file", lambda: os.rename(P("d"), P("f")))
	    show("rename-file-over-dir", lambda: os.rename(P("f"), P("e")))
	    show("rename-dir-over-nonempty", lambda: os.rename(P("e"), P("d")))
	    show("rename-into-self", lambda: os.rename(P("d"), P("d", "sub")))
	    show("rename-missing", lambda: os.rename(P("missing"), P("other")))
	    show("rename-noreplace-existing", lambda: renameat2(P("f"), P("d", "x"), 1))
	    show("rmdir-missing", lambda: os.rmdir(P("missing")))
	    show("rmdir-dot", lambda: os.rmdir(P("d", ".")))
	    show("unlink-missing", lambda: os.unlink(P("missing")))
	    show("link-missing", lambda: os.link(P("missing"), P("newlink")))
	    show("link-dir", lambda: os.link(P("d"), P("dlink")))
	    show("readlink-file", lambda: os.readlink(P("f")))
	    show("open-symlink-loop", lambda: os.open(P("loop1"), os.O_RDONLY))
	    show("open-nofollow-symlink", lambda: os.open(P("dangling"), os.O_RDONLY | os.O_NOFOLLOW))
	    show("creat-name-255", lambda: os.open(P("a" * 255), os.O_CREAT | os.O_WRONLY, 0o644))
	    show("creat-name-256", lambda: os.open(P("a" * 256), os.O_CREAT | os.O_WRONLY, 0o644))
	    show("mkdir-name-256", lambda: os.mkdir(P("b" * 256)))
	    show("stat-name-256", lambda: os.stat(P("c" * 256)))
	    show("symlink-name-256", lambda: os.symlink("t", P("s" * 256)))
	    show("rename-to-name-256", lambda: os.rename(P("e"), P("r" * 256)))
	    show("write-rdonly-fd", lambda: write_ro(P("f")))
	    show("creat-in-0555-as-root", lambda: os.open(P("r555", "new"), os.O_CREAT | os.O_WRONLY, 0o644))
	    sys.exit(0)

	if mode == "user":
	    show("u-open-rdonly", lambda: os.open(P("f"), os.O_RDONLY))
	    show("u-open-wronly-0644-root", lambda: os.open(P("f"), os.O_WRONLY))
	    show("u-open-rdwr-0644-root", lambda: os.open(P("f"), os.O_RDWR))
	    show("u-open-trunc-0644-root", lambda: os.open(P("f"), os.O_WRONLY | os.O_TRUNC))
	    show("u-open-secret-0600", lambda: os.open(P("secret"), os.O_RDONLY))
	    show("u-listdir-0700", lambda: os.listdir(P("priv")))
	    show("u-stat-in-0700", lambda: os.stat(P("priv", "x")))
	    show("u-creat-in-root-dir", lambda: os.open(P("new"), os.O_CREAT | os.O_WRONLY, 0o644))
	    show("u-mkdir-in-root-dir", lambda: os.mkdir(P("newdir")))
	    show("u-symlink-in-root-dir", lambda: os.symlink("t", P("newsym")))
	    show("u-unlink-root-file", lambda: os.unlink(P("f")))
	    show("u-rename-root-file", lambda: os.rename(P("f"), P("f2")))
	    show("u-rmdir-root-dir", lambda: os.rmdir(P("e")))
	    show("u-truncate-root-file", lambda: os.truncate(P("f"), 0))
	    show("u-chown-root-file", lambda: os.chown(P("f"), 1000, 1000))
	    show("u-chmod-root-file", lambda: os.chmod(P("f"), 0o666))
	    show("u-utime-set-root-file", lambda: os.utime(P("f"), (1, 1)))
	    show("u-utime-now-root-file", lambda: os.utime(P("f"), None))
	    show("u-link-into-root-dir", lambda: os.link(P("udir", "mine"), P("mylink")))
	    show("u-creat-own-dir", lambda: os.open(P("udir", "new"), os.O_CREAT | os.O_WRONLY, 0o644))
	    show("u-chmod-own-file", lambda: os.chmod(P("udir", "mine"), 0o600))
	    show("u-chown-own-file-to-root", lambda: os.chown(P("udir", "mine"), 0, -1))
	    show("u-chgrp-own-file-to-0", lambda: os.chown(P("udir", "mine"), -1, 0))
	    show("u-utime-set-own-file", lambda: os.utime(P("udir", "mine"), (1, 1)))
	    show("u-rename-own-to-root-dir", lambda: os.rename(P("udir", "mine"), P("stolen")))
	    sys.exit(0)
	PY
chmod 0644 "$work/errs.py"
# The uid 1000 runs need python and the script readable: both are.
AS_USER=(setpriv --reuid 1000 --regid 1000 --clear-groups --)

loc=$(harness_tmpdir local)
mkdir "$data/cmp"
"$PY" "$work/errs.py" setup "$loc" || { echo "setup of the local dir failed" >&2; exit 1; }
"$PY" "$work/errs.py" setup "$data/cmp" || { echo "setup of the origin dir failed" >&2; exit 1; }

origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
RW_PID=$GW_PID RW_LOG=$GW_LOG

# compare LABEL LOCAL-OUT MOUNT-OUT
compare() {
	local label=$1 a=$2 b=$3
	printf '%s\n' "$b" | sed "s/^/  $label (mount) /" >&2
	if [ "$a" != "$b" ]; then
		bad "$label: errnos through the mount differ from the local fs's (< local, > mount)"
		diff <(printf '%s\n' "$a") <(printf '%s\n' "$b") >&2
	fi
}

# 1. As root.
a=$(timeout 30 "$PY" "$work/errs.py" root "$loc")
b=$(timeout 30 "$PY" "$work/errs.py" root "$mnt/cmp")
compare root "$a" "$b"
# The issue's list, asserted by name (not only "same as local").
for want in "open-missing ENOENT" "mkdir-existing-dir EEXIST" "creat-excl-existing EEXIST" \
	"link-existing EEXIST" "rmdir-nonempty ENOTEMPTY" "open-through-file ENOTDIR" \
	"open-dir-wronly EISDIR" "creat-name-256 ENAMETOOLONG" "rename-noreplace-existing EEXIST"; do
	grep -qx "$want" <<<"$b" || bad "mount: want '$want', got '$(grep "^${want% *} " <<<"$b")'"
done

# 2. As uid 1000 without groups (the kernel's default_permissions and the
# origin's own checks).
a=$(timeout 30 "${AS_USER[@]}" "$PY" "$work/errs.py" user "$loc")
b=$(timeout 30 "${AS_USER[@]}" "$PY" "$work/errs.py" user "$mnt/cmp")
compare user "$a" "$b"
for want in "u-open-wronly-0644-root EACCES" "u-open-secret-0600 EACCES" "u-chown-root-file EPERM"; do
	grep -qx "$want" <<<"$b" || bad "mount: want '$want', got '$(grep "^${want% *} " <<<"$b")'"
done

# After both runs the origin and the local dir hold the same tree (what
# succeeded did the same on both sides).
lm=$(tree_manifest "$loc")
om=$(tree_manifest "$data/cmp")
[ "$lm" = "$om" ] || { bad "local dir and origin differ after the error runs (< local, > origin)"; diff <(echo "$lm") <(echo "$om") | head -n 20 >&2; }

# 3. EXDEV: rename and link from the mount to a local dir.
echo x >"$mnt/cmp/xdev"
x=$(timeout 20 "$PY" - "$mnt/cmp/xdev" "$loc/xdev" <<-'PY'
	import errno, os, sys
	for name, fn in (("rename", os.rename), ("link", os.link)):
	    try:
	        fn(sys.argv[1], sys.argv[2]); print(name, "ok")
	    except OSError as e:
	        print(name, errno.errorcode[e.errno])
	PY
)
[ "$x" = $'rename EXDEV\nlink EXDEV' ] || bad "cross-device rename/link: $(echo $x)"

# 4. EROFS: a second gateway on the same origin with -o ro.
romnt=$(harness_tmpdir romnt)
rocache=$(harness_tmpdir rocache)
mount_gateway "$ORIGIN_URL" "$romnt" "cache_dir=$rocache,ro" || exit 1
RO_MNT=$romnt RO_PID=$GW_PID RO_LOG=$GW_LOG
r=$(timeout 30 "$PY" - "$romnt/cmp" <<-'PY'
	import errno, os, sys
	b = sys.argv[1]
	P = lambda *a: os.path.join(b, *a)
	ops = [
	    ("open-wronly", lambda: os.close(os.open(P("f"), os.O_WRONLY))),
	    ("creat", lambda: os.close(os.open(P("new"), os.O_CREAT | os.O_WRONLY, 0o644))),
	    ("mkdir", lambda: os.mkdir(P("newdir"))),
	    ("unlink", lambda: os.unlink(P("f"))),
	    ("rmdir", lambda: os.rmdir(P("e"))),
	    ("rename", lambda: os.rename(P("f"), P("g"))),
	    ("symlink", lambda: os.symlink("t", P("sym"))),
	    ("link", lambda: os.link(P("f"), P("hl"))),
	    ("chmod", lambda: os.chmod(P("f"), 0o600)),
	    ("chown", lambda: os.chown(P("f"), 1, 1)),
	    ("truncate", lambda: os.truncate(P("f"), 0)),
	    ("utime", lambda: os.utime(P("f"), (1, 1))),
	    ("mkfifo", lambda: os.mkfifo(P("fifo"))),
	]
	for name, fn in ops:
	    try:
	        fn(); print(name, "ok")
	    except OSError as e:
	        print(name, errno.errorcode[e.errno])
	with open(P("f")) as f:
	    print("read", "ok" if f.read() == "data\n" else "wrong")
	PY
)
printf '%s\n' "$r" | sed 's/^/  ro (mount) /' >&2
while read -r op res; do
	want=EROFS
	[ "$op" = read ] && want=ok
	[ "$res" = "$want" ] || bad "-o ro: $op gave $res, want $want"
done <<<"$r"
unmount_gateway "$RO_MNT" "$RO_PID" "$RO_LOG" || bad "unmount of the ro gateway (log: $RO_LOG)"
RO_MNT=

# 5. ENOSPC from the origin (the 24 MiB ext4 fills up): write until an
# error; it must be ENOSPC (at write, fsync or close) and the file system
# must work again after the file is removed.
s=$(timeout 50 "$PY" - "$mnt/cmp/fill" <<-'PY'
	import errno, os, sys
	buf = os.urandom(1 << 20)
	where = "none"
	fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	try:
	    for i in range(64):
	        os.write(fd, buf)
	    os.fsync(fd)
	except OSError as e:
	    where = "write/fsync " + errno.errorcode[e.errno]
	try:
	    os.close(fd)
	except OSError as e:
	    if where == "none":
	        where = "close " + errno.errorcode[e.errno]
	print(where)
	PY
)
echo "  full origin: $s" >&2
case $s in
*ENOSPC | *EDQUOT) ;;
*) bad "writing 64 MiB to a 24 MiB origin: got '$s', want ENOSPC" ;;
esac
rm -f "$mnt/cmp/fill" || bad "rm of the fill file failed"
echo after-full >"$mnt/cmp/after" || bad "write after freeing space failed"
[ "$(cat "$data/cmp/after" 2>&1)" = after-full ] || bad "origin after freeing space: $(cat "$data/cmp/after" 2>&1)"

unmount_gateway "$mnt" "$RW_PID" "$RW_LOG" || bad "unmount / gateway exit (log: $RW_LOG)"
exit $fail
