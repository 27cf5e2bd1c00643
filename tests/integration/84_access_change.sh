#!/bin/bash
# Cached ACCESS answers end with the attributes they were given for: a file uid 1000 read through the mount, chmod'ed 0600 at the origin (or through the mount), is refused to uid 1000 at its next open (EACCES, no byte read), well inside acregmax; made readable again, it is read again.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
test_require_cmd setpriv

U=1000 G=1000
AS_U=(setpriv --reuid "$U" --regid "$G" --clear-groups --)
OPS=$(harness_tmpdir ops)/read.py
cat >"$OPS" <<-'PY'
	import errno, os, sys
	try:
	    fd = os.open(sys.argv[1], os.O_RDONLY)
	except OSError as e:
	    print(errno.errorcode[e.errno])
	    sys.exit(0)
	try:
	    print("ok %d" % len(os.read(fd, 4096)))
	except OSError as e:
	    print("opened, read " + errno.errorcode[e.errno])
	PY
chmod 0644 "$OPS"
uread() { timeout 20 "${AS_U[@]}" "$PY" "$OPS" "$1" 2>&1; }
expect() { # WHAT GOT WANT
	[ "$2" = "$3" ] || bad "$1: got '$2', want '$3'"
}

data=$(harness_tmpdir origin-data)
for f in a b; do
	printf 'readable\n' >"$data/$f"
	chmod 0644 "$data/$f"
	# Changed long ago: the attributes (and the answers) are trusted for
	# acregmax, far longer than this test.
	touch -d '2001-01-01 00:00' "$data/$f"
done
test_origin "$data"
test_mount allow_other,acregmin=600,acregmax=600

# 1. Changed at the origin: the open's close-to-open GETATTR shows the new
# ctime and mode, and the answer cached for uid 1000 goes with them: the
# open fails (a read refused by the origin after it is not enough).
expect "(1) u reads a" "$(uread "$mnt/a")" "ok 9"
chmod 0600 "$data/a"
expect "(1) u reads a after chmod 0600 at the origin" "$(uread "$mnt/a")" EACCES
chmod 0644 "$data/a"
expect "(1) u reads a after chmod 0644 at the origin" "$(uread "$mnt/a")" "ok 9"

# 2. Changed through the mount (SETATTR by root).
expect "(2) u reads b" "$(uread "$mnt/b")" "ok 9"
chmod 0600 "$mnt/b" || bad "(2) chmod 0600 through the mount"
expect "(2) u reads b after chmod 0600 through the mount" "$(uread "$mnt/b")" EACCES
chmod 0644 "$mnt/b" || bad "(2) chmod 0644 through the mount"
expect "(2) u reads b after chmod 0644 through the mount" "$(uread "$mnt/b")" "ok 9"

# 3. The owner changes at the origin (mode kept, 0640): uid 1000 is now the
# owner and may read; back to root, it may not.
chmod 0640 "$data/a"
expect "(3) u reads 0640 root:root a" "$(uread "$mnt/a")" EACCES
chown "$U" "$data/a"
expect "(3) u reads a after chown to uid $U at the origin" "$(uread "$mnt/a")" "ok 9"
chown 0 "$data/a"
expect "(3) u reads a after chown back to root at the origin" "$(uread "$mnt/a")" EACCES

unmount_gateway || bad "unmount"
exit $fail
