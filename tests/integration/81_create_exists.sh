#!/bin/bash
# A CREATE that finds the file already there (made at the origin between the kernel's LOOKUP and the CREATE, held open by fault injection) opens it as open(2) would: uid 1000 gets EACCES for root's 0600 file that root had cached through the mount (not a descriptor on its bytes), and opens and reads a 0666 one.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
test_require_cmd setpriv

U=1000 G=1000
AS_U=(setpriv --reuid "$U" --regid "$G" --clear-groups --)
work=$(harness_tmpdir work)
chmod 0755 "$work"
# creat.py PATH: open(PATH, O_CREAT|O_RDWR) and read; "EACCES" or
# "opened, read N bytes: ..." (what it read).
cat >"$work/creat.py" <<-'PY'
	import errno, os, sys
	try:
	    fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
	except OSError as e:
	    print(errno.errorcode[e.errno])
	    sys.exit(0)
	try:
	    b = os.read(fd, 4096)
	    print("opened, read %d bytes: %r" % (len(b), b))
	except OSError as e:
	    print("opened, read " + errno.errorcode[e.errno])
	PY
chmod 0644 "$work/creat.py"

data=$(harness_tmpdir origin-data)
mkdir -m 1777 "$data/pub"
printf 'top secret\n' >"$data/secret" && chmod 0600 "$data/secret"
printf 'for all\n' >"$data/open" && chmod 0666 "$data/open"
test_origin "$data"
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
release=$work/release
CACHEGW_INJECT_CREATE_DELAY=1:2 CACHEGW_INJECT_RELEASE=$release \
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1

# race N NAME SRC: uid 1000 opens pub/NAME with O_CREAT; while its CREATE
# is held (the kernel's LOOKUP found no such name), SRC appears as
# pub/NAME at the origin (a hard link); then the CREATE goes on.
race() {
	local n=$1 name=$2 src=$3
	timeout 60 "${AS_U[@]}" "$PY" "$work/creat.py" "$mnt/pub/$name" >"$work/$name.out" 2>&1 &
	local pid=$!
	log_wait "$GW_LOG" 'inject: CREATE held' "$n" || bad "($n) no CREATE held for $name"
	ln "$data/$src" "$data/pub/$name" || bad "($n) ln at the origin"
	touch "$release"
	wait "$pid"
	cat "$work/$name.out"
	rm -f "$release"
}

# Root reads the secret through the mount: its bytes are in the cache.
[ "$(cat "$mnt/secret" 2>&1)" = "top secret" ] || bad "root cannot read secret"
expect() { [ "$2" = "$3" ] || bad "$1: got '$2', want '$3'"; }
expect "(1) uid $U open(O_CREAT|O_RDWR) of root's 0600 file that appeared" \
	"$(race 1 s secret)" EACCES
expect "(2) uid $U open(O_CREAT|O_RDWR) of a 0666 file that appeared" \
	"$(race 2 o open)" "opened, read 8 bytes: b'for all\\n'"
# Nothing was created or changed at the origin by them.
expect "(1) the secret at the origin" "$(stat -c '%a %u %s' "$data/secret")" "600 0 11"
expect "(2) the open file at the origin" "$(cat "$data/open")" "for all"

unmount_gateway || bad "unmount"
exit $fail
