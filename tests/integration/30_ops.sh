#!/bin/bash
# Every namespace/data operation through the mount (create, write, sparse, O_APPEND, mkdir, rename, mkfifo, mknod, symlink, link, chmod, chown, truncate, utimens, unlink, rmdir, fsync, fallocate) leaves the origin dir and the mount identical after each step.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
test_origin "$data"
test_mount
M=$mnt O=$data

# check STEP: the origin dir and the mount have the same manifest.
check() {
	local want got
	want=$(tree_manifest "$O")
	got=$(harness_timeout 60 tree_manifest "$M") || bad "$1: tree_manifest of the mount failed"
	if [ "$want" != "$got" ]; then
		bad "$1: origin and mount differ (< origin, > mount)"
		diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -n 20 >&2
	fi
}
# same_stat STEP FMT PATH: stat -c FMT equal on both sides.
same_stat() {
	local a b
	a=$(stat -c "$2" "$O/$3" 2>&1)
	b=$(timeout 20 stat -c "$2" "$M/$3" 2>&1)
	[ "$a" = "$b" ] || bad "$1: stat -c '$2' $3: origin '$a', mount '$b'"
}
# ns_times PATH: "atime_ns mtime_ns" from python (nanoseconds).
ns_times() {
	timeout 20 "$PY" -c 'import os,sys; s=os.lstat(sys.argv[1]); print(s.st_atime_ns, s.st_mtime_ns)' "$1"
}
# run STEP CMD...: run a command with a timeout, fail the step if it fails.
run() {
	local step=$1
	shift
	timeout 30 "$@" || bad "$step: '$*' exited $?"
}

# 1. Create + write: small, 1 MiB + 1, overwrite shorter (O_TRUNC).
run create printf 'hello\n' >"$M/small"
printf 'hello\n' | cmp -s - "$O/small" || bad "create: origin small != 'hello'"
head -c $((1048576 + 1)) /dev/urandom >"$work/r1m1"
run create-1m1 cp "$work/r1m1" "$M/big1m1"
cmp -s "$work/r1m1" "$O/big1m1" || bad "create-1m1: origin bytes differ"
printf 'a much longer line of text\n' >"$M/shrinkme"
printf 'ab' >"$M/shrinkme"
[ "$(cat "$O/shrinkme")" = ab ] || bad "O_TRUNC overwrite: origin has '$(head -c 60 "$O/shrinkme")'"
check create

# 2. Sparse writes past EOF: a new file with its only data at 4000 KiB, and
# one byte at 100000 of the 6-byte 'small'.
head -c 4096 /dev/urandom >"$work/blk"
run sparse dd if="$work/blk" of="$M/sparse" bs=4096 seek=1000 conv=notrunc status=none
run sparse-small dd if=<(printf X) of="$M/small" bs=1 seek=100000 conv=notrunc status=none
[ "$(stat -c %s "$O/sparse")" = $((1001 * 4096)) ] || bad "sparse: origin size $(stat -c %s "$O/sparse")"
cmp -s <(head -c $((1000 * 4096)) /dev/zero) <(head -c $((1000 * 4096)) "$M/sparse") || bad "sparse: hole does not read as zeros through the mount"
cmp -s <(printf 'hello\n'; head -c $((100000 - 6)) /dev/zero; printf X) "$O/small" || bad "sparse-small: origin bytes wrong"
check sparse

# 3. O_APPEND, several times, plus an append after a write through another fd.
for i in 1 2 3 4 5; do echo "line $i" >>"$M/append"; done
head -c 70000 /dev/urandom >>"$M/append"
echo tail >>"$M/append"
[ "$(head -n 5 "$O/append" | tail -n 1)" = "line 5" ] || bad "append: origin line 5 is '$(head -n 5 "$O/append" | tail -n 1)'"
[ "$(stat -c %s "$O/append")" = $((35 + 70000 + 5)) ] || bad "append: origin size $(stat -c %s "$O/append"), want $((35 + 70000 + 5))"
check append

# 4. mkdir, nested mkdir (mode honoured with umask 022).
run mkdir mkdir "$M/d1"
run mkdir-p mkdir -p "$M/d1/d2/d3/d4"
run mkdir-mode mkdir -m 0700 "$M/d700"
[ "$(stat -c %a "$O/d700")" = 700 ] || bad "mkdir -m 0700: origin mode $(stat -c %a "$O/d700")"
check mkdir

# 5. rename: file, dir (with contents), over an existing file.
echo content >"$M/d1/d2/d3/inner"
run rename-file "$PY" -c 'import os,sys; os.rename(sys.argv[1], sys.argv[2])' "$M/small" "$M/d1/small_renamed"
[ -e "$O/small" ] && bad "rename-file: origin still has small"
run rename-dir "$PY" -c 'import os,sys; os.rename(sys.argv[1], sys.argv[2])' "$M/d1/d2" "$M/d2moved"
[ "$(cat "$M/d2moved/d3/inner" 2>&1)" = content ] || bad "rename-dir: content through new path: $(cat "$M/d2moved/d3/inner" 2>&1)"
echo old-target >"$M/target"
echo new-source >"$M/source"
run rename-over "$PY" -c 'import os,sys; os.rename(sys.argv[1], sys.argv[2])' "$M/source" "$M/target"
[ "$(cat "$O/target")" = new-source ] || bad "rename-over: origin target has '$(cat "$O/target")'"
[ "$(cat "$M/target")" = new-source ] || bad "rename-over: mount target has '$(cat "$M/target")'"
check rename

# 5b. renameat2: RENAME_NOREPLACE onto an existing name -> EEXIST, onto a
# free name -> moved; RENAME_EXCHANGE -> EINVAL (allowed by the issue).
echo a >"$M/rn_a"
echo b >"$M/rn_b"
ra2=$(timeout 20 "$PY" - "$M" <<-'PY'
	import ctypes, errno, os, sys
	libc = ctypes.CDLL(None, use_errno=True)
	AT = -100
	def r2(a, b, fl):
	    m = sys.argv[1]
	    rc = libc.renameat2(AT, os.path.join(m, a).encode(), AT, os.path.join(m, b).encode(), fl)
	    return "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
	print("noreplace-existing", r2("rn_a", "rn_b", 1))
	print("noreplace-free", r2("rn_a", "rn_c", 1))
	print("exchange", r2("rn_b", "rn_c", 2))
	PY
)
echo "renameat2 results: $(echo $ra2)"
grep -q '^noreplace-existing EEXIST$' <<<"$ra2" || bad "RENAME_NOREPLACE over existing: $(grep noreplace-existing <<<"$ra2")"
grep -q '^noreplace-free ok$' <<<"$ra2" || bad "RENAME_NOREPLACE to free name: $(grep noreplace-free <<<"$ra2")"
grep -Eq '^exchange (ok|EINVAL)$' <<<"$ra2" || bad "RENAME_EXCHANGE: $(grep exchange <<<"$ra2")"
[ "$(cat "$O/rn_b")" = b ] || bad "RENAME_NOREPLACE replaced rn_b at origin"
check renameat2

# 6. mkfifo, mknod of a regular file (python os.mknod and mknod(1) p).
run mkfifo mkfifo -m 0640 "$M/fifo"
[ -p "$O/fifo" ] || bad "mkfifo: origin fifo is not a FIFO ($(stat -c %F "$O/fifo" 2>&1))"
run mknod-reg "$PY" -c 'import os,stat,sys; os.mknod(sys.argv[1], 0o640 | stat.S_IFREG)' "$M/mknod_reg"
[ -f "$O/mknod_reg" ] && [ ! -s "$O/mknod_reg" ] || bad "mknod S_IFREG: origin $(stat -c '%F %s' "$O/mknod_reg" 2>&1)"
run mknod-p mknod "$M/fifo2" p
[ -p "$O/fifo2" ] || bad "mknod p: origin $(stat -c %F "$O/fifo2" 2>&1)"
same_stat mknod '%F %a' fifo
same_stat mknod '%F %a' mknod_reg
# A FIFO made through the mount works as one through the mount.
( timeout 10 cat "$M/fifo" >"$work/fifo.out" ) &
rp=$!
sleep 0.3
echo through-fifo | timeout 10 tee "$M/fifo" >/dev/null
wait $rp
[ "$(cat "$work/fifo.out")" = through-fifo ] || bad "fifo: reader got '$(cat "$work/fifo.out")'"
check mknod

# 7. symlink (relative, absolute, dangling).
run symlink ln -s d1/small_renamed "$M/sym_rel"
run symlink-abs ln -s /etc/hostname "$M/sym_abs"
run symlink-dangling ln -s no/such/thing "$M/sym_dangling"
[ "$(readlink "$O/sym_rel")" = d1/small_renamed ] || bad "symlink: origin target '$(readlink "$O/sym_rel")'"
cmp -s "$M/sym_rel" "$O/d1/small_renamed" || bad "symlink: reading through it on the mount differs"
check symlink

# 8. hard link: nlink 2 on both sides, same inode, shared content.
echo linked >"$M/hl_a"
run link ln "$M/hl_a" "$M/d1/hl_b"
same_stat link '%h %i' hl_a
same_stat link '%h %i' d1/hl_b
[ "$(stat -c %h "$O/hl_a")" = 2 ] || bad "link: origin nlink $(stat -c %h "$O/hl_a")"
[ "$(timeout 20 stat -c %h "$M/hl_a")" = 2 ] || bad "link: mount nlink of hl_a $(stat -c %h "$M/hl_a")"
echo more >>"$M/d1/hl_b"
[ "$(cat "$M/hl_a")" = "$(printf 'linked\nmore')" ] || bad "link: write through one name not seen through the other on the mount: $(cat "$M/hl_a")"
check link

# 9. chmod (file and dir), chown numeric (file, dir, symlink with -h).
run chmod chmod 0600 "$M/big1m1"
run chmod-x chmod 4755 "$M/append"
run chmod-dir chmod 0711 "$M/d1"
same_stat chmod '%a' big1m1
same_stat chmod '%a' append
same_stat chmod '%a' d1
[ "$(stat -c %a "$O/append")" = 4755 ] || bad "chmod 4755: origin $(stat -c %a "$O/append")"
run chown chown 1234:5678 "$M/big1m1"
run chown-dir chown 4321 "$M/d1"
run chgrp chgrp 777 "$M/append"
run chown-h chown -h 2222:3333 "$M/sym_abs"
for f in big1m1 d1 append sym_abs; do same_stat chown '%u:%g' "$f"; done
[ "$(stat -c %u:%g "$O/big1m1")" = 1234:5678 ] || bad "chown: origin big1m1 $(stat -c %u:%g "$O/big1m1")"
[ "$(stat -c %u:%g "$O/sym_abs")" = 2222:3333 ] || bad "chown -h: origin sym_abs $(stat -c %u:%g "$O/sym_abs")"
check chmod-chown

# 10. truncate: shrink, then grow (zeros), ftruncate on an open fd, then a
# write after the grown zeros.
head -c 100000 /dev/urandom >"$work/t100k"
cp "$work/t100k" "$M/trunc"
cat "$M/trunc" >/dev/null # cached
run truncate-shrink truncate -s 1000 "$M/trunc"
run truncate-grow truncate -s 50000 "$M/trunc"
cmp -s <(head -c 1000 "$work/t100k"; head -c 49000 /dev/zero) "$O/trunc" || bad "truncate shrink/grow: origin bytes wrong"
cmp -s <(head -c 1000 "$work/t100k"; head -c 49000 /dev/zero) "$M/trunc" || bad "truncate shrink/grow: mount bytes wrong (stale cache?)"
run ftruncate "$PY" - "$M/trunc" <<-'PY'
	import os, sys
	fd = os.open(sys.argv[1], os.O_RDWR)
	os.ftruncate(fd, 10)
	os.ftruncate(fd, 20000)
	os.pwrite(fd, b"Z" * 10, 30000)
	os.close(fd)
	PY
cmp -s <(head -c 10 "$work/t100k"; head -c 29990 /dev/zero; printf ZZZZZZZZZZ) "$O/trunc" || bad "ftruncate: origin bytes wrong"
cmp -s "$O/trunc" "$M/trunc" || bad "ftruncate: mount bytes differ from origin"
check truncate

# 11. utimens: explicit (touch -d, ns precision), UTIME_NOW for mtime only
# (touch -m: atime is UTIME_OMIT), touch -a (mtime UTIME_OMIT), utime(NULL).
echo times >"$M/times"
run touch-d touch -d '2001-02-03 04:05:06.123456789' "$M/times"
a=$(ns_times "$O/times")
b=$(ns_times "$M/times")
want=$(date -d '2001-02-03 04:05:06.123456789' +%s%N)
[ "$a" = "$want $want" ] || bad "touch -d: origin times $a"
[ "$a" = "$b" ] || bad "touch -d: origin '$a', mount '$b'"
run utime-ns "$PY" -c 'import os,sys; os.utime(sys.argv[1], ns=(1000000000123, 2000000000456))' "$M/times"
a=$(ns_times "$O/times")
b=$(ns_times "$M/times")
[ "$a" = "1000000000123 2000000000456" ] || bad "os.utime ns: origin times $a"
[ "$a" = "$b" ] || bad "os.utime ns: origin '$a', mount '$b'"
t0=$(date +%s)
run touch-m touch -m "$M/times"
read -r oa om <<<"$(ns_times "$O/times")"
[ "$oa" = 1000000000123 ] || bad "touch -m (atime UTIME_OMIT): origin atime changed to $oa"
[ $((om / 1000000000)) -ge $((t0 - 2)) ] || bad "touch -m (mtime UTIME_NOW): origin mtime $om not now ($t0)"
[ "$(ns_times "$M/times")" = "$oa $om" ] || bad "touch -m: mount times '$(ns_times "$M/times")', origin '$oa $om'"
run utime-ns2 "$PY" -c 'import os,sys; os.utime(sys.argv[1], ns=(1000000000123, 2000000000456))' "$M/times"
run touch-a touch -a "$M/times"
read -r oa om <<<"$(ns_times "$O/times")"
[ "$om" = 2000000000456 ] || bad "touch -a (mtime UTIME_OMIT): origin mtime changed to $om"
[ $((oa / 1000000000)) -ge $((t0 - 2)) ] || bad "touch -a (atime UTIME_NOW): origin atime $oa not now"
[ "$(ns_times "$M/times")" = "$oa $om" ] || bad "touch -a: mount times '$(ns_times "$M/times")', origin '$oa $om'"
run utime-now "$PY" -c 'import os,sys; os.utime(sys.argv[1], ns=(5, 6)); os.utime(sys.argv[1])' "$M/times"
read -r oa om <<<"$(ns_times "$O/times")"
[ $((om / 1000000000)) -ge $((t0 - 2)) ] && [ $((oa / 1000000000)) -ge $((t0 - 2)) ] || bad "utime(NULL): origin times $oa $om not now"
run touch-d-dir touch -h -d '2002-01-01 00:00:00' "$M/d1"
same_stat utimens '%Y' d1
check utimens
a=$(tree_manifest "$O" --mtime)
b=$(harness_timeout 60 tree_manifest "$M" --mtime)
[ "$a" = "$b" ] || { bad "mtimes differ after utimens (< origin, > mount)"; diff <(echo "$a") <(echo "$b") | head -n 20 >&2; }

# 12. unlink (file, symlink, fifo, one hard link), rmdir (empty, nested).
run unlink rm "$M/shrinkme" "$M/sym_dangling" "$M/fifo2" "$M/d1/hl_b"
[ "$(stat -c %h "$O/hl_a")" = 1 ] || bad "unlink of a hard link: origin nlink of hl_a $(stat -c %h "$O/hl_a")"
[ "$(timeout 20 stat -c %h "$M/hl_a")" = 1 ] || bad "unlink of a hard link: mount nlink of hl_a $(timeout 20 stat -c %h "$M/hl_a")"
run rmdir rmdir "$M/d700"
run rmdir-nested rmdir "$M/d2moved/d3/d4"
run rm-r rm -r "$M/d2moved"
[ -e "$O/d2moved" ] && bad "rm -r: origin still has d2moved"
[ -e "$M/d2moved" ] && bad "rm -r: mount still shows d2moved"
check unlink-rmdir

# 13. fsync: data at the origin before close; fsync of a directory.
run fsync "$PY" - "$M/fsynced" "$O/fsynced" <<-'PY'
	import os, sys
	fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	os.write(fd, b"durable\n" * 1000)
	os.fsync(fd)
	with open(sys.argv[2], "rb") as f:
	    got = f.read()
	assert got == b"durable\n" * 1000, "origin has %d bytes before close" % len(got)
	os.fdatasync(fd)
	os.close(fd)
	d = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY | os.O_DIRECTORY)
	os.fsync(d)
	os.close(d)
	PY
check fsync

# 14. fallocate: success (then the size and zeros must match) or EOPNOTSUPP.
fa=$(timeout 20 "$PY" - "$M/falloc" <<-'PY'
	import ctypes, errno, os, sys
	libc = ctypes.CDLL(None, use_errno=True)
	fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
	os.write(fd, b"abc")
	def fa(mode, off, ln):
	    rc = libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(ln))
	    return "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
	print("allocate", fa(0, 0, 65536))
	print("keep_size", fa(1, 0, 131072))            # FALLOC_FL_KEEP_SIZE
	print("punch_hole", fa(1 | 2, 0, 4096))         # PUNCH_HOLE|KEEP_SIZE
	os.close(fd)
	PY
)
echo "fallocate results: $(echo $fa)"
while read -r what res; do
	case $res in
	ok | EOPNOTSUPP | ENOTSUP) ;; # ENOTSUP == EOPNOTSUPP on Linux
	*) bad "fallocate $what: $res (want ok or EOPNOTSUPP)" ;;
	esac
done <<<"$fa"
if grep -q '^allocate ok' <<<"$fa"; then
	[ "$(stat -c %s "$O/falloc")" -ge 65536 ] || bad "fallocate ok but origin size $(stat -c %s "$O/falloc")"
fi
check fallocate

# 15. Ownership at the origin of what root made through the mount.
[ "$(stat -c %u:%g "$O/d1/small_renamed")" = 0:0 ] || bad "owner of a file root created: $(stat -c %u:%g "$O/d1/small_renamed")"

# 16. A fresh mount (no attribute or page cache) sees the same tree.
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir" || exit 1
check remount
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
