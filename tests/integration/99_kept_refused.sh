#!/bin/bash
# Kept metadata goes only to callers the origin lets see it: with a root-squashing origin, a 0700 directory of uid 1000 that its owner listed is refused to root (EACCES, no names) after a restart, with and without close-to-open, and in a start with the origin down (offline=: EACCES for root, refused before; EHOSTDOWN for a credential never answered), while its owner lists and reads it from what was kept; an offline listing of kept attributes keeps their age: with nocto,actimeo=5, a file changed while the origin was away is seen changed as soon as it is back.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
test_require_cmd setpriv
trap 'kill -CONT "${ORIGIN_PID:-0}" 2>/dev/null; harness_cleanup' EXIT
AS_OWNER=(setpriv --reuid 1000 --regid 1000 --clear-groups --)
# Root with a supplementary group: a credential the origin never answered.
AS_ROOT_G=(setpriv --groups 4 --)

data=$(harness_tmpdir origin-data)
chmod 0755 "$data"
mkdir "$data/pub" "$data/private"
for i in 1 2 3; do
	echo "private $i" >"$data/private/f$i"
	echo "pub $i" >"$data/pub/f$i"
done
chown -R 1000:1000 "$data/private"
chmod 0700 "$data/private"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" Root_Squash ||
	{ echo "FAIL: the origin did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
chmod 0755 "$mnt"
cdir=$(harness_tmpdir cache)/c
st() { cache_inspect stats --cache-dir "$cdir" | awk -v n="$1" '$1 == n { print $2; exit }'; }

# What WHO... sees listing private/: its names on one line, or the error.
list() { timeout 30 "$@" ls "$mnt/private" 2>&1 | tr '\n' ' '; }
NAMES="f1 f2 f3 "
owner_sees() { # WHEN
	[ "$(list "${AS_OWNER[@]}")" = "$NAMES" ] || bad "$1: the owner lists private/ as '$(list "${AS_OWNER[@]}")'"
	[ "$(timeout 30 "${AS_OWNER[@]}" cat "$mnt/private/f2" 2>&1)" = "private 2" ] ||
		bad "$1: the owner reads private/f2 as '$(timeout 30 "${AS_OWNER[@]}" cat "$mnt/private/f2" 2>&1)'"
}
refused() { # WHEN ERROR WHO...
	local when=$1 want=$2 out
	shift 2
	out=$(list "$@")
	case $out in *"$want"*) ;; *) bad "$when: ${*:-root} lists private/ as '$out', want '$want'" ;; esac
	out=$(timeout 30 "$@" stat -c '%s %U' "$mnt/private/f1" 2>&1)
	case $out in *"$want"*) ;; *) bad "$when: ${*:-root} stats private/f1 as '$out', want '$want'" ;; esac
}

# 0. The first run: the owner lists and reads private/, root is refused
# by the origin (it squashes root).
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,offline=2" || exit 1
owner_sees "first run"
ls "$mnt/pub" >/dev/null || bad "root lists pub/"
# Root with another group list lists the export's root only: offline it
# may find private/, and nothing is known of it there.
"${AS_ROOT_G[@]}" ls "$mnt" >/dev/null || bad "root with group 4 lists the export's root"
out=$(list)
case $out in
*"Permission denied"*) ;;
*) bad "the origin does not squash root: root lists private/ as '$out' (nothing below can be seen)"; exit 1 ;;
esac
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# 1. A restart, close-to-open: the owner's kept listing serves the owner
# and no one else.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
refused "after a restart" "Permission denied"
owner_sees "after a restart"
echo "  after a restart: listings from what was kept $(st md_kept_listings_total), READDIRPLUS $(st origin_readdirplus_calls_total), ACCESS $(st origin_access_calls_total)" >&2
[ "$(st md_kept_listings_total)" -ge 1 ] || bad "after a restart the owner's listing was not the kept one (md_kept_listings_total $(st md_kept_listings_total))"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# 2. A restart with nocto: the kept listing, not asked for its version.
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,nocto,actimeo=600" || exit 1
refused "after a restart (nocto)" "Permission denied"
owner_sees "after a restart (nocto)"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# 3. A start with the origin down: root, refused before, is refused; a
# credential never answered cannot be told (EHOSTDOWN); the owner is
# served from what was kept.
origin_stop origin
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,offline=2" || exit 1
refused "offline" "Permission denied"
refused "offline" "Host is down" "${AS_ROOT_G[@]}"
owner_sees "offline"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# 4. Kept attributes listed offline keep their age: listed at t0, the
# origin stopped, pub/f1 grown at the origin, listed again offline once
# older than actimeo=5, the origin back: pub/f1 shows its new size at
# once (it showed the old one for 5 more seconds).
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" Root_Squash ||
	{ echo "FAIL: the origin did not start again" >&2; exit 1; }
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other,nocto,actimeo=5,offline=2" || exit 1
t0=$SECONDS
ls -l "$mnt/pub" >/dev/null || bad "4: listing pub/"
kill -STOP "$ORIGIN_PID" || { echo "FAIL: cannot stop the origin" >&2; exit 1; }
echo "grown while the origin was away" >>"$data/pub/f1"
gw_wait_metric "$cdir" origin_lost 1 30 || bad "4: the origin was not called lost"
while [ $((SECONDS - t0)) -le 6 ]; do sleep 0.2; done
out=$(timeout 30 ls -l "$mnt/pub" 2>&1) || bad "4: the offline listing of pub/: $out"
kill -CONT "$ORIGIN_PID"
gw_wait_metric "$cdir" origin_back_total 1 30 || bad "4: the origin was not seen back"
size=$(stat -c %s "$mnt/pub/f1")
echo "  4: pub/f1 $((SECONDS - t0)) s after the first listing: size $size, origin $(stat -c %s "$data/pub/f1")" >&2
[ "$size" = "$(stat -c %s "$data/pub/f1")" ] || bad "4: pub/f1, grown while the origin was away, shows size $size once it is back (origin: $(stat -c %s "$data/pub/f1"))"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
