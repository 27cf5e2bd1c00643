#!/bin/bash
# Caller credentials (allow_other, setpriv as uid 1000): files, dirs, symlinks and FIFOs made by uid 1000 are owned by 1000 at the origin; a 0600 root file is refused to uid 1000 even after root cached it; supplementary groups grant access; writes by the file's owner work as on a local fs; a caller whose credentials cannot be built gets ENOMEM and nothing is done at the origin under another identity.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed" >&2; exit 77; }

U=1000 G=1000 SG=4242
AS_U=(setpriv --reuid "$U" --regid "$G" --clear-groups --)
AS_U_SG=(setpriv --reuid "$U" --regid "$G" --groups "$SG" --)
# errno_of CMD...: run a python one-liner op as given, print ok or ERRNO.
OPS=$(harness_tmpdir ops)/op.py
cat >"$OPS" <<-'PY'
	import errno, os, sys
	op, path = sys.argv[1], sys.argv[2]
	try:
	    if op == "read":
	        with open(path, "rb") as f:
	            sys.stdout.write("ok %d\n" % len(f.read()))
	            sys.exit(0)
	    elif op == "write":
	        with open(path, "r+b") as f:
	            f.write(b"W")
	    elif op == "create":
	        with open(path, "xb") as f:
	            f.write(b"by %d\n" % os.getuid())
	    elif op == "create0444":
	        # What git and tar do: create read-only, then write to the fd.
	        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o444)
	        os.write(fd, b"readonly-but-mine\n" * 100)
	        os.fsync(fd)
	        os.close(fd)
	    elif op == "mkdir":
	        os.mkdir(path)
	    elif op == "symlink":
	        os.symlink("target", path)
	    elif op == "mkfifo":
	        os.mkfifo(path)
	    elif op == "unlink":
	        os.unlink(path)
	    elif op == "chmod":
	        os.chmod(path, 0o640)
	    elif op == "truncate":
	        os.truncate(path, 3)
	    print("ok")
	except OSError as e:
	    print(errno.errorcode[e.errno])
	PY
chmod 0644 "$OPS"
op() { timeout 20 "$@"; }

data=$(harness_tmpdir origin-data)
loc=$(harness_tmpdir local)
for base in "$data" "$loc"; do
	mkdir -m 1777 "$base/pub"
	mkdir "$base/home" && chown "$U:$G" "$base/home"
	mkdir -m 0770 "$base/grpdir" && chgrp "$SG" "$base/grpdir"
	printf 'top secret\n' >"$base/secret" && chmod 0600 "$base/secret"
	printf 'group data\n' >"$base/grpfile" && chgrp "$SG" "$base/grpfile" && chmod 0640 "$base/grpfile"
	printf 'root file\n' >"$base/pub/rootfile" && chmod 0666 "$base/pub/rootfile"
done
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1

owner() { stat -c %u:%g "$1" 2>&1; }
expect() { # WHAT GOT WANT
	[ "$2" = "$3" ] || bad "$1: got '$2', want '$3'"
}

# 1. Objects created by uid 1000 (no supplementary groups) are 1000:1000 at
# the origin, and on the mount.
expect "u create in 1777 dir" "$(op "${AS_U[@]}" "$PY" "$OPS" create "$mnt/pub/ufile")" ok
expect "u mkdir" "$(op "${AS_U[@]}" "$PY" "$OPS" mkdir "$mnt/home/udir")" ok
expect "u symlink" "$(op "${AS_U[@]}" "$PY" "$OPS" symlink "$mnt/home/ulink")" ok
expect "u mkfifo" "$(op "${AS_U[@]}" "$PY" "$OPS" mkfifo "$mnt/home/ufifo")" ok
expect "u create in own dir" "$(op "${AS_U[@]}" "$PY" "$OPS" create "$mnt/home/udir/deep")" ok
for f in pub/ufile home/udir home/ulink home/ufifo home/udir/deep; do
	expect "owner at origin of $f" "$(owner "$data/$f")" "$U:$G"
	expect "owner on mount of $f" "$(timeout 20 stat -c %u:%g "$mnt/$f" 2>&1)" "$U:$G"
done
expect "content of ufile at origin" "$(cat "$data/pub/ufile")" "by $U"

# 1b. With a supplementary group: still owned by uid:egid; creating in a
# 0770 root:SG dir works only with the group.
expect "u (no groups) create in 0770 root:$SG dir" "$(op "${AS_U[@]}" "$PY" "$OPS" create "$mnt/grpdir/nogroup")" EACCES
expect "u +$SG create in 0770 root:$SG dir" "$(op "${AS_U_SG[@]}" "$PY" "$OPS" create "$mnt/grpdir/withgroup")" ok
expect "owner at origin of grpdir/withgroup" "$(owner "$data/grpdir/withgroup")" "$U:$G"
[ -e "$data/grpdir/nogroup" ] && bad "grpdir/nogroup exists at the origin"

# 2. A 0600 root file: root reads it (cached), uid 1000 is refused, with
# and without a group, and again after root read it once more.
expect "root read secret" "$(op "$PY" "$OPS" read "$mnt/secret")" "ok 11"
expect "u read 0600 root file" "$(op "${AS_U[@]}" "$PY" "$OPS" read "$mnt/secret")" EACCES
expect "u +$SG read 0600 root file" "$(op "${AS_U_SG[@]}" "$PY" "$OPS" read "$mnt/secret")" EACCES
expect "root read secret again" "$(op "$PY" "$OPS" read "$mnt/secret")" "ok 11"
expect "u read 0600 root file (2)" "$(op "${AS_U[@]}" "$PY" "$OPS" read "$mnt/secret")" EACCES
expect "u cat 0600 root file" "$(timeout 20 "${AS_U[@]}" cat "$mnt/secret" 2>/dev/null)" ""

# 3. Supplementary group access: 0640 root:SG.
expect "root read grpfile" "$(op "$PY" "$OPS" read "$mnt/grpfile")" "ok 11"
expect "u +$SG read 0640 root:$SG" "$(op "${AS_U_SG[@]}" "$PY" "$OPS" read "$mnt/grpfile")" "ok 11"
expect "u (no groups) read 0640 root:$SG" "$(op "${AS_U[@]}" "$PY" "$OPS" read "$mnt/grpfile")" EACCES
expect "u +$SG read 0640 root:$SG again" "$(op "${AS_U_SG[@]}" "$PY" "$OPS" read "$mnt/grpfile")" "ok 11"
expect "u +$SG write 0640 root:$SG" "$(op "${AS_U_SG[@]}" "$PY" "$OPS" write "$mnt/grpfile")" EACCES

# 4. Permission changes at the origin are honoured within the attribute
# timeout + close-to-open: chmod 0644 makes secret readable, 0600 again
# takes it away.
chmod 0644 "$data/secret"
sleep 4 # > acregmin (3 s)
expect "u read secret after origin chmod 0644" "$(op "${AS_U[@]}" "$PY" "$OPS" read "$mnt/secret")" "ok 11"
chmod 0600 "$data/secret"
sleep 4
expect "u read secret after origin chmod 0600" "$(op "${AS_U[@]}" "$PY" "$OPS" read "$mnt/secret")" EACCES

# 5. What a local fs allows the owner, the mount allows too (the same ops
# on the local dir as the reference): writing to a file created 0444 on
# the fd that created it, chmod and truncate of one's own file, writing to
# a 0666 root file, unlinking someone else's file in a sticky dir.
# The local reference dir gets what step 1 made through the mount.
op "${AS_U[@]}" "$PY" "$OPS" create "$loc/pub/ufile" >/dev/null
op "${AS_U[@]}" "$PY" "$OPS" mkdir "$loc/home/udir" >/dev/null
op "${AS_U[@]}" "$PY" "$OPS" create "$loc/home/udir/deep" >/dev/null
for t in "create0444 home/ro444" "chmod home/udir/deep" "truncate home/udir/deep" \
	"write pub/rootfile" "unlink pub/rootfile" "unlink pub/ufile"; do
	read -r o f <<<"$t"
	want=$(op "${AS_U[@]}" "$PY" "$OPS" "$o" "$loc/$f")
	got=$(op "${AS_U[@]}" "$PY" "$OPS" "$o" "$mnt/$f")
	expect "u $o $f (local fs: $want)" "$got" "$want"
done
expect "owner at origin of home/ro444" "$(owner "$data/home/ro444")" "$U:$G"
expect "mode at origin of home/ro444" "$(stat -c %a "$data/home/ro444" 2>&1)" 444
expect "size at origin of home/ro444" "$(stat -c %s "$data/home/ro444" 2>&1)" 1800

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"

# 6. Credentials that cannot be built (libnfs_authunix_create failing,
# injected for uid $U): the call fails with ENOMEM, and nothing goes out
# under the identity the connection carried before (root's: one connection,
# root used it last). Other users are served as themselves afterwards.
U2=1001
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
CACHEGW_INJECT_AUTH_ERROR=$U
export CACHEGW_INJECT_AUTH_ERROR
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,nconnect=1" || exit 1
unset CACHEGW_INJECT_AUTH_ERROR
expect "root create before" "$(op "$PY" "$OPS" create "$mnt/pub/rootmade")" ok
expect "u create with unbuildable credentials" \
	"$(op "${AS_U[@]}" "$PY" "$OPS" create "$mnt/pub/nocred")" ENOMEM
if [ -e "$data/pub/nocred" ]; then
	bad "pub/nocred was created at the origin (owner $(owner "$data/pub/nocred")) for a caller whose credentials could not be built"
fi
expect "u mkdir with unbuildable credentials" \
	"$(op "${AS_U[@]}" "$PY" "$OPS" mkdir "$mnt/home/nocreddir")" ENOMEM
[ -e "$data/home/nocreddir" ] && bad "home/nocreddir was created at the origin"
expect "uid $U2 create after" "$(op setpriv --reuid "$U2" --regid "$U2" --clear-groups -- "$PY" "$OPS" create "$mnt/pub/u2file")" ok
expect "owner at origin of pub/u2file" "$(owner "$data/pub/u2file")" "$U2:$U2"
expect "owner at origin of pub/rootmade" "$(owner "$data/pub/rootmade")" "0:0"
unmount_gateway "$mnt" || bad "auth: unmount / gateway exit (log: $GW_LOG)"
exit $fail
