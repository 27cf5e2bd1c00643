#!/bin/bash
# One origin call per open on a warm cache after a restart, close-to-open kept: 90 files read by root and by uid 1000 before a restart are read by both after it with the kernel's attributes expired (acregmin=1), whether the kernel revalidates with a GETATTR (root) or, its entries dropped (drop_caches), a LOOKUP (uid 1000), at most 1.1 ACCESS+GETATTR+LOOKUP per open (before: about 2, a GETATTR for the kernel and an ACCESS for the open; now the kernel's GETATTR goes as an ACCESS and is the open's check), a file changed at the origin read new and a file chmod'ed 0600 refused; 100 statfs(2) cost 1 to 5 FSSTAT, and one after the kept answer's acregmin asks again.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
test_require_cmd setpriv

AS_U=(setpriv --reuid 1000 --regid 1000 --clear-groups --)
N=90
data=$(harness_tmpdir origin-data)
for i in $(seq 1 $N); do
	d=$data/d$((i % 3))
	mkdir -p "$d"
	echo "file $i" >"$d/f$i"
done
chmod -R a+rX "$data"
test_origin "$data"
# acregmin=1: the kernel's attributes and the ACCESS answers of these
# young files (a tenth of their age, at least acregmin) expire within the
# test; close-to-open and acregmax (60 s) as by default.
OPTS=allow_other,acregmin=1
test_mount "$OPTS"
st() { cache_inspect stats --cache-dir "$cdir" | awk -v n="$1" '$1 == n { print $2; exit }'; }
# The ACCESS, GETATTR and LOOKUP calls so far.
calls() { echo $(($(st origin_access_calls_total) + $(st origin_getattr_calls_total) + $(st origin_lookup_calls_total))); }
# Every file read through the mount as WHO..., in one process (xargs cat,
# as a build reads a tree), by names taken from the origin (a listing
# through the mount would give the kernel fresh attributes); the bytes
# compared as a whole.
read_all() {
	local got want
	got=$(cd "$data" && find . -type f | sort | sed "s|^\.|$mnt|" | "$@" xargs cat | sha256sum)
	want=$(cd "$data" && find . -type f | sort | xargs cat | sha256sum)
	[ "$got" = "$want" ] || bad "$*: the tree read through the mount differs from the origin's"
}

# 1. Before the restart: both users read every file (their ACCESS
# answers are kept in md.log).
read_all env
read_all "${AS_U[@]}"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"

# 2. After it: listed, then read once the kernel's attributes (and the
# answers, 1 s) expired; one file changed at the origin, one refused to
# uid 1000 from now on.
sleep 1.1	# a new ctime second at the origin
echo "changed while down" >"$data/d1/f1"
chmod 0600 "$data/d2/f2"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,$OPTS" || exit 1
find "$mnt" >/dev/null
sleep 2.5
c0=$(calls)
read_all env
out=$("${AS_U[@]}" cat "$mnt/d2/f2" 2>&1) && bad "d2/f2, chmod 0600 at the origin, read by uid 1000: '$out'"
case $out in *"Permission denied"*) ;; *) bad "d2/f2 as uid 1000: '$out', want Permission denied" ;; esac
chmod 0644 "$data/d2/f2"
sleep 2.5
# The kernel forgets its unused entries and inodes (any drop_caches on the
# machine does it): each open is then preceded by a LOOKUP, not a GETATTR.
echo 2 >/proc/sys/vm/drop_caches
read_all "${AS_U[@]}"
[ "$(cat "$mnt/d1/f1")" = "changed while down" ] || bad "d1/f1, changed at the origin, reads '$(cat "$mnt/d1/f1")'"
c1=$(calls)
opens=$((2 * N + 2))
echo "  after a restart: $((c1 - c0)) ACCESS+GETATTR+LOOKUP for $opens opens (ACCESS $(st origin_access_calls_total), GETATTR $(st origin_getattr_calls_total), LOOKUP $(st origin_lookup_calls_total); close-to-open checks that were the kernel's own: $(st cto_joined_total))" >&2
[ $(((c1 - c0) * 100)) -le $((opens * 110)) ] || bad "after a restart $((c1 - c0)) ACCESS+GETATTR+LOOKUP calls for $opens opens, want at most 1.1 per open"
[ "$(st cto_joined_total)" -gt 0 ] 2>/dev/null || bad "cto_joined_total '$(st cto_joined_total)': no open took the kernel's GETATTR for its close-to-open check"

# 3. statfs: the FSSTAT answer serves for acregmin (1 s here).
sleep 1.1
f0=$(st origin_fsstat_calls_total)
for _ in $(seq 1 100); do stat -f -c %b "$mnt" >/dev/null || bad "statfs failed"; done
f1=$(st origin_fsstat_calls_total)
echo "  100 statfs: $((f1 - f0)) FSSTAT" >&2
[ $((f1 - f0)) -ge 1 ] && [ $((f1 - f0)) -le 5 ] || bad "100 statfs made $((f1 - f0)) FSSTAT calls, want 1 to 5"
sleep 1.1
stat -f "$mnt" >/dev/null
[ "$(st origin_fsstat_calls_total)" -gt "$f1" ] || bad "a statfs 1.1 s after the last FSSTAT (acregmin=1) did not ask the origin"
# The space the origin reports, as df shows it.
want=$(stat -f -c '%b %S' "$data" | awk '{ print int($1 * $2 / 4096) }')
got=$(stat -f -c '%b %S' "$mnt" | awk '{ print int($1 * $2 / 4096) }')
[ "$got" = "$want" ] || bad "statfs: $got blocks of 4 KiB through the mount, the origin's file system has $want"

unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
