#!/bin/bash
# Callers whose groups the kernel does not show (the gateway in its own pid namespace, as in a container: FUSE gives pid 0 for callers outside it): a member of a supplementary group in the user database reads a 0640 file of that group in a 0770 directory through the gateway; a uid the database does not know gets EACCES even with the group in its own process; the gateway says once where the groups came from.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed" >&2; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare not installed" >&2; exit 77; }
unshare --pid --fork true 2>/dev/null || { echo "SKIP: cannot make a pid namespace" >&2; exit 77; }

# A user of this host's database with a supplementary group other than its
# primary one: made for the test (and removed at its end), so that the test
# runs on any machine; useradd/groupadd from Debian's passwd package.
command -v useradd >/dev/null && command -v groupadd >/dev/null ||
	{ echo "SKIP: useradd/groupadd not installed" >&2; exit 77; }
TUSER=cgwt$$ TGROUP=cgwtg$$
users_cleanup() {
	local rc=$?
	userdel "$TUSER" 2>/dev/null
	groupdel "$TGROUP" 2>/dev/null
	(exit $rc)
	harness_cleanup
}
trap users_cleanup EXIT
groupadd -r "$TGROUP" || { echo "FAIL: groupadd $TGROUP" >&2; exit 1; }
useradd -r -M -N -g nogroup -G "$TGROUP" -s /usr/sbin/nologin "$TUSER" ||
	{ echo "FAIL: useradd $TUSER" >&2; exit 1; }
U=$(id -u "$TUSER") G=$(id -g "$TUSER") S=$(getent group "$TGROUP" | cut -d: -f3)
[ -n "$U" ] && [ -n "$S" ] && [ "$G" != "$S" ] || { echo "FAIL: made user $TUSER: uid '$U' gid '$G' group '$S'" >&2; exit 1; }
# A uid the database does not know.
N=4000123
while getent passwd "$N" >/dev/null; do N=$((N + 1)); done

data=$(harness_tmpdir origin-data)
mkdir -m 0770 "$data/share" && chgrp "$S" "$data/share"
head -c 50000 /dev/urandom >"$data/share/file"
chgrp "$S" "$data/share/file" && chmod 0640 "$data/share/file"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1

# The gateway in a pid namespace of its own (it mounts from there, so FUSE
# numbers callers in it: ours are outside, pid 0).
wrap=$(harness_tmpdir wrap)/cachegw
printf '#!/bin/sh\nexec unshare --pid --fork --kill-child -- "%s" "$@"\n' "$CACHEGW" >"$wrap"
chmod 0755 "$wrap"
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
CACHEGW=$wrap mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1

read_as() { # UID GID GROUPS-ARGS... : the file's sha256 or the error
	local u=$1 g=$2
	shift 2
	timeout 20 setpriv --reuid "$u" --regid "$g" "$@" -- \
		sh -c 'sha256sum <"$1" | cut -d" " -f1' sh "$mnt/share/file" 2>&1
}
want=$(sha256sum <"$data/share/file" | cut -d' ' -f1)

got=$(read_as "$U" "$G" --init-groups)
[ "$got" = "$want" ] || bad "uid $U (group $S in the user database) read share/file: '$got', want its bytes"
got=$(read_as "$U" "$G" --init-groups)
[ "$got" = "$want" ] || bad "uid $U again (the kept answer): '$got', want its bytes"
got=$(read_as "$N" "$N" --groups "$S")
case $got in
*"Permission denied"*) ;;
*) bad "uid $N (unknown to the database, group $S in its process) read share/file: '$got', want Permission denied" ;;
esac
got=$(timeout 20 setpriv --reuid "$N" --regid "$N" --groups "$S" -- ls "$mnt/share" 2>&1)
case $got in
*"Permission denied"*) ;;
*) bad "uid $N ls share: '$got', want Permission denied" ;;
esac
n=$(grep -c "credentials: a caller whose groups the kernel does not show" "$GW_LOG")
[ "$n" = 1 ] || bad "the gateway's log says where the groups came from $n times, want once"

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
