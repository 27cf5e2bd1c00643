#!/bin/bash
# Guest test: supplementary groups through a knfsd re-export: knfsd origin trusting AUTH_SYS groups (manage-gids=n) → cachegw → knfsd re-export → kernel NFSv3 client: a member of group 4242 (known on the gateway host) reads a 0640 root:4242 file in a 0770 root:4242 directory on the gateway mount and through the re-export, a non-member gets EACCES on both.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start
test_require_cmd setpriv
trap 'vm_cleanup; knfsd_origin_stop' EXIT

# The users, known on the gateway host only (the guest's / is an overlay:
# these lines vanish with it). 5000 is in 4242, 5001 is not.
step "users 5000 (in group 4242) and 5001"
getent passwd 5000 5001 >/dev/null && { echo "uid 5000 or 5001 already exists" >&2; exit 1; }
cat >>/etc/group <<-'EOF'
	cgwshare:x:4242:cgwu5000
	cgwu5000:x:5000:
	cgwu5001:x:5001:
	EOF
cat >>/etc/passwd <<-'EOF'
	cgwu5000:x:5000:5000::/nonexistent:/usr/sbin/nologin
	cgwu5001:x:5001:5001::/nonexistent:/usr/sbin/nologin
	EOF
[ "$(id -G cgwu5000 | tr ' ' '\n' | sort -n | paste -sd,)" = 4242,5000 ] ||
	{ echo "id -G cgwu5000: $(id -G cgwu5000), want 5000 4242" >&2; exit 1; }
# cat as uid: the bytes, or the error's text.
cat_as() { timeout 120 setpriv --reuid "$1" --regid "$1" --init-groups -- cat "$2" 2>&1; }

data=$(harness_tmpdir origin-data)
mkdir "$data/share"
head -c 100000 /dev/urandom | base64 >"$data/share/file"
want=$(sha256sum <"$data/share/file" | cut -d' ' -f1)
chown root:4242 "$data/share" "$data/share/file"
chmod 0770 "$data/share"
chmod 0640 "$data/share/file"

step "knfsd origin (manage-gids=n) in network namespace $KNFSD_ORIGIN_NS"
# shellcheck disable=SC2034 # read by knfsd_origin_start (lib.sh)
KNFSD_ORIGIN_MANAGE_GIDS=n
knfsd_origin_start "$data" 7701 || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$KNFSD_ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1

check() { # WHERE DIR
	local got
	got=$(cat_as 5000 "$2/share/file" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ] ||
		bad "$1: uid 5000 (group 4242) cat share/file: '$(cat_as 5000 "$2/share/file" | head -c 200)', want its bytes"
	got=$(cat_as 5001 "$2/share/file")
	case $got in
	*"Permission denied"*) ;;
	*) bad "$1: uid 5001 (not in 4242) cat share/file: '$(printf %s "$got" | head -c 200)', want Permission denied" ;;
	esac
	got=$(timeout 60 setpriv --reuid 5001 --regid 5001 --init-groups -- ls "$2/share" 2>&1)
	case $got in
	*"Permission denied"*) ;;
	*) bad "$1: uid 5001 ls share: '$(printf %s "$got" | head -c 200)', want Permission denied" ;;
	esac
	got=$(timeout 60 setpriv --reuid 5000 --regid 5000 --init-groups -- ls "$2/share" 2>&1)
	[ "$got" = file ] || bad "$1: uid 5000 ls share: '$(printf %s "$got" | head -c 200)', want file"
}

step "on the gateway mount"
check "gateway mount" "$mnt"

step "through a knfsd re-export of the gateway, NFSv3 client"
knfsd_start || exit 1
knfsd_export "$mnt" 7702 || exit 1
c3=$(harness_tmpdir client-v3)
nfs_mount "127.0.0.1:$mnt" "$c3" vers=3,nolock,actimeo=0 || exit 1
check "re-export" "$c3"
# Once more: the user database's answer is kept (GW_GROUPS_TTL), the same
# groups reach the origin.
drop_caches
check "re-export, again" "$c3"

grep -q "credentials: a caller whose groups the kernel does not show" "$GW_LOG" ||
	bad "the gateway's log does not say where the re-export's groups came from"
step "done (kernel $(uname -r), Kthread: line in /proc status: $(grep -c '^Kthread:' /proc/self/status))"
exit $fail
