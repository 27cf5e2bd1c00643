#!/bin/bash
# POSIX behaviour through the mount (default actimeo) compared with a local fs: nlink/ctime of a file's other names right after link/unlink/rename-over; open-unlink and rename-over-open keep the descriptor working (fstat, read, write, fsync) and leave nothing at the origin after close; hidden names left by a killed gateway are removed at the next start (and nothing else); a non-owner write to a setuid/setgid file succeeds and clears the bits; symlink targets too long for the origin call give ENAMETOOLONG; times outside NFSv3's range are clamped, never wrapped.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
test_require_cmd setpriv

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
loc=$(harness_tmpdir local)
test_origin "$data"
test_mount allow_other

# same CASE SCRIPT [ARGS]: run a python script in $loc/CASE and in
# $mnt/CASE; their outputs must be equal.
same() {
	local c=$1 s=$2 l m
	shift 2
	mkdir -p "$loc/$c" "$mnt/$c"
	l=$(timeout 30 "$PY" "$s" "$loc/$c" "$@" 2>&1)
	m=$(timeout 30 "$PY" "$s" "$mnt/$c" "$@" 2>&1)
	echo "  $c: local: $l" >&2
	[ "$l" = "$m" ] || bad "$c: mount differs from a local fs: $m"
}
# origin_empty DIR: nothing left in the origin's DIR within 5 s.
origin_empty() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ -z "$(ls -A "$data/$1")" ] && return 0
		sleep 0.1
	done
	bad "$1: left at the origin after close: $(ls -A "$data/$1" | tr '\n' ' ')"
}

# 1. The other names of a file see its nlink and ctime change at once.
cat >"$work/links.py" <<-'PY'
	import os, sys, time
	d = sys.argv[1]
	def p(n): return os.path.join(d, n)
	with open(p("a"), "wb") as f: f.write(b"x")
	os.link(p("a"), p("b"))
	out, last = [], os.stat(p("a")).st_ctime_ns
	def look(step, name):
	    global last
	    s = os.stat(p(name))
	    out.append("%s:nlink=%d,ctime=%s" % (step, s.st_nlink,
	               "changed" if s.st_ctime_ns != last else "same"))
	    last = s.st_ctime_ns
	time.sleep(0.05); os.link(p("b"), p("c")); look("link", "a")
	time.sleep(0.05); os.unlink(p("c")); look("unlink", "b")
	with open(p("d"), "wb") as f: f.write(b"y")
	moved = os.stat(p("d")).st_ctime_ns
	time.sleep(0.05); os.rename(p("d"), p("b")); look("rename-over", "a")
	out.append("moved:ctime=" + ("changed" if os.stat(p("b")).st_ctime_ns != moved else "same"))
	print(" ".join(out))
	PY
for c in links links2; do same "$c" "$work/links.py"; done

# 2. Open, unlink (or rename over), then use the descriptor; close leaves
# nothing behind, at the origin nor in a listing.
cat >"$work/openrm.py" <<-'PY'
	import errno, os, sys, time
	d, how = sys.argv[1], sys.argv[2]
	def p(n): return os.path.join(d, n)
	def e(x): return errno.errorcode[x.errno]
	data = bytes(range(256)) * 400
	fd = os.open(p("f"), os.O_RDWR | os.O_CREAT, 0o644)
	os.write(fd, data)
	os.fsync(fd)
	if how == "cached":
	    os.pread(fd, len(data), 0)
	if how == "rename":
	    with open(p("g"), "wb") as f: f.write(b"new")
	    os.rename(p("g"), p("f"))
	else:
	    os.unlink(p("f"))
	res = []
	try:
	    s = os.fstat(fd)
	    res.append("fstat=size%d,nlink%d,mode%o" % (s.st_size, s.st_nlink, s.st_mode))
	except OSError as x: res.append("fstat=" + e(x))
	try: res.append("read=" + ("ok" if os.pread(fd, len(data), 0) == data else "differs"))
	except OSError as x: res.append("read=" + e(x))
	try:
	    os.pwrite(fd, b"XYZ", 5); os.fsync(fd)
	    res.append("write=" + ("ok" if os.pread(fd, 8, 0) == data[:5] + b"XYZ" else "differs"))
	except OSError as x: res.append("write=" + e(x))
	try:
	    os.ftruncate(fd, 1000); res.append("size=%d" % os.fstat(fd).st_size)
	except OSError as x: res.append("ftruncate=" + e(x))
	try: os.close(fd); res.append("close=ok")
	except OSError as x: res.append("close=" + e(x))
	want = ["f"] if how == "rename" else []
	for i in range(50):
	    ls = sorted(os.listdir(d))
	    if ls == want: break
	    time.sleep(0.1)
	res.append("ls=" + ",".join(ls))
	if how == "rename":
	    with open(p("f"), "rb") as f: res.append("new=" + f.read().decode())
	    os.unlink(p("f"))
	# rmdir of a directory whose only entry is an open, unlinked file.
	os.mkdir(p("sub"))
	fd = os.open(p("sub/h"), os.O_RDWR | os.O_CREAT, 0o644)
	os.unlink(p("sub/h"))
	try: os.rmdir(p("sub")); res.append("rmdir-open=ok")
	except OSError as x: res.append("rmdir-open=" + e(x))
	os.close(fd)
	for i in range(50):
	    if not os.path.exists(p("sub")): break
	    try: os.rmdir(p("sub"))
	    except OSError as x: err = e(x); time.sleep(0.1)
	res.append("sub=" + ("gone" if not os.path.exists(p("sub")) else err))
	print(" ".join(res))
	PY
for how in unlink cached rename; do
	mkdir -p "$loc/open-$how" "$mnt/open-$how"
	l=$(timeout 30 "$PY" "$work/openrm.py" "$loc/open-$how" "$how" 2>&1)
	m=$(timeout 30 "$PY" "$work/openrm.py" "$mnt/open-$how" "$how" 2>&1)
	echo "  open-$how: local: $l" >&2
	# rmdir of a directory holding an open unlinked file: ENOTEMPTY
	# through NFS (the hidden name is there), ok locally: documented.
	m=${m/rmdir-open=ENOTEMPTY/rmdir-open=ok}
	[ "$l" = "$m" ] || bad "open-$how: mount differs from a local fs: $m"
	origin_empty "open-$how"
done

# 3. Hidden names of files still open when the gateway is killed are
# removed at the next start on the same cache_dir; names cachegw did not
# make (even ones that look like its own) are left alone.
mkdir -p "$mnt/killed"
echo keep >"$data/killed/.cachegw-silly.decoy"
echo keep >"$data/killed/.cachegw-silly.0000000000000001.1"
echo keep >"$data/killed/.nfs0000000000000001"
echo data >"$mnt/killed/victim"
"$PY" -c 'import os,sys,time; fd=os.open(sys.argv[1], os.O_RDONLY); print("open", flush=True); time.sleep(120)' "$mnt/killed/victim" >"$work/holder.out" 2>&1 &
holder=$!
harness_register_pid "$holder"
for ((i = 0; i < 50; i++)); do grep -q open "$work/holder.out" && break; sleep 0.1; done
# The record of the hidden name must be durable before the origin's
# RENAME: silly-names written, fsynced, renamed into place and its
# directory fsynced (watched with strace; the directory's fsync was missing).
strace -f -qq -p "$GW_PID" -e trace=openat,fsync,rename,renameat,renameat2 -o "$work/silly.strace" 2>"$work/strace.err" &
spid=$!
sleep 1		# attached
rm -f "$mnt/killed/victim" || bad "killed: unlink of the open victim failed"
sleep 0.5
kill -INT "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
awk -v dir="$cdir" '
	/rename.*silly-names\.tmp.*= 0/ { renamed = 1; next }
	renamed && index($0, "openat(") && index($0, "\"" dir "\"") && /O_DIRECTORY/ {
		fd = $NF; next }
	renamed && fd != "" && index($0, "fsync(" fd ")") && / = 0$/ { ok = 1 }
	END { exit !ok }' "$work/silly.strace" ||
	bad "killed: silly-names renamed into place without an fsync of $cdir (strace: $(grep -c . "$work/silly.strace") lines, $(head -c 200 "$work/strace.err"))"
hidden=$(cd "$data/killed" && ls -A | grep -v -x -e .cachegw-silly.decoy -e .cachegw-silly.0000000000000001.1 -e .nfs0000000000000001)
echo "  killed: at the origin while open: ${hidden:-nothing}" >&2
[ -n "$hidden" ] || bad "killed: no hidden name at the origin while the file is open (no silly-rename?)"
kill -KILL "$GW_PID"
wait "$GW_PID" 2>/dev/null
kill -KILL "$holder"
wait "$holder" 2>/dev/null
fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt"
sanitizer_check "$GW_LOG" || bad "killed: sanitizer report in the first gateway's log"
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1
for ((i = 0; i < 50; i++)); do
	left=$(cd "$data/killed" && ls -A | tr '\n' ' ')
	[ "$left" = ".cachegw-silly.0000000000000001.1 .cachegw-silly.decoy .nfs0000000000000001 " ] && break
	sleep 0.1
done
[ "$left" = ".cachegw-silly.0000000000000001.1 .cachegw-silly.decoy .nfs0000000000000001 " ] ||
	bad "killed: after restart the origin has: $left"

# 3b. An unlink that comes while an open of the file is still asking the
# origin (its ACCESS held by fault injection until the unlink is done):
# the open succeeds and reads the file, as on a local fs where the open
# got there first, and the name goes at its close. The unlink used to
# remove the file (no open counted yet): the open failed with ESTALE.
mnt2=$(harness_tmpdir mnt2)
mkdir -p "$data/race"
gw1=("$GW_MNT" "$GW_PID" "$GW_LOG")	# the main mount's, for its unmount
echo racedata >"$data/race/victim"
CACHEGW_INJECT_ACCESS_DELAY=100:1 CACHEGW_INJECT_RELEASE=$work/race.release \
	mount_gateway "$ORIGIN_URL" "$mnt2" "cache_dir=$(harness_tmpdir cache-race)" || exit 1
timeout 60 "$PY" -c '
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
except OSError as x:
    print("open=" + errno.errorcode[x.errno]); sys.exit(0)
try:
    r = os.read(fd, 100).decode().strip()
except OSError as x:
    r = errno.errorcode[x.errno]
print("open=ok read=%s nlink=%d" % (r, os.fstat(fd).st_nlink))
os.close(fd)' "$mnt2/race/victim" >"$work/race.out" 2>&1 &
opener=$!
# while_held LABEL OUT CMD...: once the open's ACCESS is held, run CMD, then
# let the ACCESS go, wait for the opener and set out to what it printed.
while_held() {
	local label=$1 o=$2
	shift 2
	if timeout 30 bash -c 'until grep -q "inject: ACCESS held" "$1"; do sleep 0.1; done' _ "$GW_LOG"; then
		"$@"
	else
		bad "$label: the open's ACCESS was never held"
	fi
	touch "$work/race.release"
	wait "$opener"
	out=$(cat "$o")
}
unlink_victim() { rm "$mnt2/race/victim" || bad "open-race: unlink through the mount failed"; }
while_held open-race "$work/race.out" unlink_victim
echo "  open-race: $out" >&2
[ "$out" = "open=ok read=racedata nlink=0" ] || bad "open-race: unlink during an open: '$out', want 'open=ok read=racedata nlink=0'"
origin_empty race
unmount_gateway "$mnt2" || bad "open-race: unmount / gateway exit (log: $GW_LOG)"
# 3c. The same race, but the open then fails (the file's mode changed at
# the origin while the ACCESS was held): the name the unlink hid for that
# open must go with it, not stay at the origin as a hidden file.
echo racedata >"$data/race/victim2"
chmod 0644 "$data/race/victim2"
rm -f "$work/race.release"
CACHEGW_INJECT_ACCESS_DELAY=100:1 CACHEGW_INJECT_RELEASE=$work/race.release \
	mount_gateway "$ORIGIN_URL" "$mnt2" "cache_dir=$(harness_tmpdir cache-race2),allow_other" || exit 1
timeout 60 setpriv --reuid 1000 --regid 1000 --clear-groups -- "$PY" -c '
import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDONLY)); print("open=ok")
except OSError as x:
    print("open=" + errno.errorcode[x.errno])' "$mnt2/race/victim2" >"$work/race2.out" 2>&1 &
opener=$!
unlink_deny() {
	rm "$mnt2/race/victim2" || bad "open-race-fail: unlink through the mount failed"
	chmod 0000 "$data"/race/.cachegw-silly.* 2>/dev/null ||
		bad "open-race-fail: the unlink did not hide the name: $(ls -A "$data/race" | tr '\n' ' ')"
}
while_held open-race-fail "$work/race2.out" unlink_deny
echo "  open-race-fail: $out" >&2
[ "$out" = "open=EACCES" ] || bad "open-race-fail: '$out', want 'open=EACCES'"
origin_empty race
unmount_gateway "$mnt2" || bad "open-race-fail: unmount / gateway exit (log: $GW_LOG)"
GW_MNT=${gw1[0]} GW_PID=${gw1[1]} GW_LOG=${gw1[2]}

# 4. A non-owner's write to a setuid / setgid file it may write: succeeds,
# and the bits are cleared, as on a local fs. A truncate succeeds too; the
# origin (ganesha) keeps the bits there, and the mount shows what it has.
U=1000 G=1000
AS_U=(setpriv --reuid "$U" --regid "$G" --clear-groups --)
WR='import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.write(fd, b"W") if sys.argv[2] == "write" else os.ftruncate(fd, 1); os.close(fd); print("ok")'
for m in 4757 2757 6777 t4757; do
	op=write
	case $m in t*) op=truncate m=${m#t} ;; esac
	for side in "$loc" "$mnt"; do
		mkdir -p "$side/suid"
		printf 'Worig\n' >"$side/suid/f$op$m"
		chmod "$m" "$side/suid/f$op$m"
	done
	l=$(timeout 20 "${AS_U[@]}" "$PY" -c "$WR" "$loc/suid/f$op$m" $op 2>&1)
	w=$(timeout 20 "${AS_U[@]}" "$PY" -c "$WR" "$mnt/suid/f$op$m" $op 2>&1)
	[ "$w" = "$l" ] || bad "suid $m: $op by uid $U: local '$l', mount '$w'"
	lm=$(stat -c %a "$loc/suid/f$op$m")
	mm=$(timeout 20 stat -c %a "$mnt/suid/f$op$m")
	om=$(stat -c %a "$data/suid/f$op$m")
	echo "  suid $m: after a $op by uid $U: local $lm, mount $mm, origin $om" >&2
	[ "$mm" = "$om" ] || bad "suid $m: $op: mode through the mount $mm, origin $om"
	[ $op = truncate ] || [ "$om" = "$lm" ] || bad "suid $m: $op: mode at the origin $om, local fs $lm"
	cmp -s "$loc/suid/f$op$m" "$data/suid/f$op$m" || bad "suid $m: the $op did not reach the origin"
done

# 5. Symlink targets: those that fit in one origin call work; longer ones
# (the limit, under 4,000 bytes, depends on the handle, the name and the
# caller's groups) and 4096 (PATH_MAX) give ENAMETOOLONG, never EIO.
cat >"$work/sym.py" <<-'PY'
	import errno, os, sys
	d, out = sys.argv[1], []
	for n in [1000, 3000] + list(range(3850, 4001)) + [4095, 4096]:
	    t = "t" * n
	    try:
	        os.symlink(t, os.path.join(d, "s%d" % n))
	        r = "ok" if os.readlink(os.path.join(d, "s%d" % n)) == t else "differs"
	    except OSError as x:
	        r = errno.errorcode[x.errno]
	    if not out or out[-1][0] != r:
	        out.append([r, n, n])
	    out[-1][2] = n
	print(" ".join("%s:%d-%d" % tuple(x) for x in out))
	PY
mkdir -p "$mnt/sym"
s=$(timeout 60 "$PY" "$work/sym.py" "$mnt/sym" 2>&1)
echo "  symlink targets by length: $s" >&2
[[ $s =~ ^ok:1000-(39[0-9][0-9])\ ENAMETOOLONG:(39[0-9][0-9]|4000)-4096$ ]] ||
	bad "symlink targets: want ok up to a limit (3900..3999), ENAMETOOLONG above: $s"
for n in 1000 3000; do
	[ "$(readlink "$data/sym/s$n" | wc -c)" = $((n + 1)) ] || bad "symlink $n: origin target wrong"
done

# 6. Times NFSv3 cannot carry (32-bit unsigned seconds): clamped to the
# range (as the Linux NFS client's s_time_min/s_time_max do) or refused,
# never wrapped; stat shows what the origin stored.
cat >"$work/times.py" <<-'PY'
	import errno, os, sys
	p, sec = sys.argv[1], int(sys.argv[2])
	try:
	    os.utime(p, ns=(sec * 10**9 + 5, sec * 10**9 + 5))
	    r = "ok"
	except OSError as x:
	    r = errno.errorcode[x.errno]
	s = os.stat(p)
	print(r, s.st_atime_ns // 10**9, s.st_mtime_ns // 10**9)
	PY
mkdir -p "$mnt/times"
for sec in $((2 ** 33)) -1; do
	echo t >"$mnt/times/f"
	before=$(stat -c %Y "$data/times/f")
	r=$(timeout 20 "$PY" "$work/times.py" "$mnt/times/f" "$sec" 2>&1)
	o=$(stat -c '%X %Y' "$data/times/f")
	echo "  utimensat $sec: mount: $r, origin: $o" >&2
	if [ "$sec" -gt 0 ]; then clamp="4294967295 4294967295"; else clamp="0 0"; fi
	case ,${CACHEGW_TEST_GW_OPTS:-}, in
	*,writeback,*)
		# Write-back: the kernel owns a regular file's mtime while it
		# holds the inode and keeps the one it set (doc/how-it-works.md, Writes);
		# the origin must still hold the clamped value, never a
		# wrapped one.
		[ "${r%% *}" != ok ] || [ "$o" = "$clamp" ] ||
			bad "utimensat $sec: the origin stored '$o' (wrapped? want '$clamp')"
		r="${r%% *} $o" ;;
	esac
	[ "${r#* }" = "$o" ] || bad "utimensat $sec: stat through the mount '${r#* }' is not what the origin stored '$o'"
	case $r in
	"ok $clamp") ;;
	EOVERFLOW*|EINVAL*|ERANGE*)
		[ "${o#* }" = "$before" ] || bad "utimensat $sec: refused, yet mtime changed to ${o#* }" ;;
	*) bad "utimensat $sec: '$r' (wrapped? want 'ok $clamp' or an error)" ;;
	esac
done

unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"
exit $fail
