#!/bin/bash
# fio random 4 KiB writes through the mount (2 jobs x 16 MiB, --verify=crc32c, fsync on close) pass verification; the origin's files then equal the mount's bytes, also after a remount with dropped page cache.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
test_require_cmd fio

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
test_origin "$data"
test_mount
mkdir "$mnt/fio" || { echo "mkdir through the mount failed" >&2; exit 1; }

cd "$work" || exit 1 # fio writes its verify state files into the cwd
timeout 50 fio --name=v --directory="$mnt/fio" --rw=randwrite --bs=4k --size=16m \
	--numjobs=2 --verify=crc32c --do_verify=1 --ioengine=sync --fsync_on_close=1 \
	--output="$work/fio.out" >"$work/fio.stdout" 2>"$work/fio.stderr"
rc=$?
if [ $rc != 0 ]; then
	bad "fio exited $rc"
	tail -n 20 "$work/fio.stderr" "$work/fio.out" >&2
fi
grep -Eiq 'verify: bad|verify failed|crc32c: verify' "$work/fio.out" "$work/fio.stderr" &&
	bad "fio reported verify errors: $(grep -Ei 'verify' "$work/fio.stderr" | head -n 3)"
grep -E 'err= *[1-9]' "$work/fio.out" && bad "fio reported errors"

# fio's own verification, run again directly on the origin's files.
timeout 50 fio --name=v --directory="$data/fio" --rw=randwrite --bs=4k --size=16m \
	--numjobs=2 --verify=crc32c --verify_only --ioengine=sync \
	--output="$work/fio-origin.out" >/dev/null 2>"$work/fio-origin.stderr" ||
	{ bad "fio --verify_only on the origin's files failed"; tail -n 10 "$work/fio-origin.stderr" >&2; }

# The origin's files equal the mount's, same mount and after a remount.
cmp_all() { # LABEL
	local f n=0
	for f in "$data"/fio/*; do
		n=$((n + 1))
		a=$(sha256sum <"$f" | cut -d' ' -f1)
		b=$(timeout 60 sha256sum <"$mnt/fio/${f##*/}" | cut -d' ' -f1)
		[ "$a" = "$b" ] || bad "$1: ${f##*/} differs between origin and mount"
		[ "$(stat -c %s "$f")" = 16777216 ] || bad "$1: ${f##*/} at the origin is $(stat -c %s "$f") bytes"
	done
	[ $n = 2 ] || bad "$1: $n fio files at the origin, want 2"
}
cmp_all "same mount"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
sync
echo 3 >/proc/sys/vm/drop_caches
cmp_all "after remount"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
