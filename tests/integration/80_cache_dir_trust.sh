#!/bin/bash
# A cache_dir others could write is refused (mode 0777 empty, 0775 and 1777 holding a cache, owned by uid 1000) with the reason and the chmod/chown that fixes it, exit != 0, nothing mounted, nothing written, and a control socket in a foreign one not connected to; links inside it are not followed: lock, nodes.log and objects/ made symlinks to files and a directory outside are refused by name and the outside ones stay byte for byte as they were; the harness's own cache dirs still mount; pidfile= in a directory others can write follows no link planted at a temporary name.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
printf 'hello\n' >"$data/hello"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || { echo "FAIL: the origin did not start" >&2; exit 1; }
mnt=$(harness_tmpdir mnt)
work=$(harness_tmpdir work)
harness_register_mount "$mnt"

# refused LABEL REGEX DIR: the gateway must exit non-zero within 30 s with a
# one-line message matching REGEX (extended), leaving nothing mounted.
refused() {
	local label=$1 re=$2 dir=$3 rc
	timeout -k 5 30 "$CACHEGW" "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$dir" </dev/null >"$work/out" 2>&1
	rc=$?
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		bad "$label: still running after 30 s"
	elif [ $rc = 0 ]; then
		bad "$label: exit status 0 (accepted)"
	fi
	grep -Eq -- "$re" "$work/out" || bad "$label: message does not match /$re/: $(head -c 300 "$work/out")"
	grep -Eq "$SANITIZER_PATTERN" "$work/out" && bad "$label: sanitizer report"
	if is_mounted "$mnt"; then
		bad "$label: $mnt left mounted"
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
		sleep 1
	fi
	echo "$label: exit $rc: $(head -n 1 "$work/out")" >&2
}
# The mount works and reads the origin's bytes.
mounts() {
	local label=$1 dir=$2
	if ! mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$dir"; then
		bad "$label: mount failed: $(tail -n 3 "$GW_LOG")"
		return 1
	fi
	[ "$(timeout 10 cat "$mnt/hello")" = hello ] || bad "$label: reading hello failed"
	unmount_gateway "$mnt" || bad "$label: unmount (log: $GW_LOG)"
}
snapshot() { (cd "$1" && find . -printf '%p %y %s %m %u\n' | LC_ALL=C sort); }
sum() { { stat -c '%s %a %u' "$1"; sha256sum <"$1"; } 2>&1; }

# 1. An existing empty dir, mode 0777.
d=$(harness_tmpdir open)
chmod 0777 "$d"
refused "empty dir 0777" "^cachegw: cache_dir $d: writable by group and others \\(mode 0777\\): chmod go-w $d\$" "$d"
[ -z "$(ls -A "$d")" ] || bad "empty dir 0777: files were made in it: $(ls -A "$d" | tr '\n' ' ')"

# 2. A cache made by the gateway (in a harness dir, 0755), then made
# writable by its group, then by everyone with the sticky bit.
c=$(harness_tmpdir cache)/c
mounts "fresh cache in a harness dir" "$c" || exit 1
[ "$(stat -c %a "$c")" = 700 ] || bad "a new cache_dir has mode $(stat -c %a "$c"), want 700"
chmod 0775 "$c"
before=$(snapshot "$c")
refused "cache 0775" "cache_dir $c: writable by group \\(mode 0775\\): chmod go-w $c\$" "$c"
[ "$(snapshot "$c")" = "$before" ] || bad "cache 0775: the cache was changed"
chmod 1777 "$c"
refused "cache 1777" "cache_dir $c: writable by group and others \\(mode 1777\\): chmod go-w $c\$" "$c"
chmod 0755 "$c"
mounts "cache 0755 after chmod go-w" "$c"

# 3. Owned by another user.
chown 1000 "$c"
before=$(snapshot "$c")
refused "cache owned by uid 1000" "cache_dir $c: owned by uid 1000, not by uid $(id -u) who runs cachegw, nor root: chown $(id -u) $c\$" "$c"
[ "$(snapshot "$c")" = "$before" ] || bad "cache owned by uid 1000: the cache was changed"
chown 0 "$c"

# 3b. A foreign cache_dir holding a control socket that answers: refused
# before anything in it is used; its socket sees no connection (a process
# there could otherwise answer a takeover request and be handed the mount).
f=$(harness_tmpdir foreign)
chown 1000 "$f"
"$PY" - "$f/control.sock" "$work/conns" <<-'PY' &
	import os, socket, sys
	s = socket.socket(socket.AF_UNIX)
	s.bind(sys.argv[1])
	s.listen(8)
	while True:
	    c, _ = s.accept()
	    with open(sys.argv[2], "a") as f:
	        f.write("connection\n")
	    c.close()
PY
lpid=$!
harness_register_pid "$lpid"
for _ in $(seq 50); do [ -S "$f/control.sock" ] && break; sleep 0.1; done
refused "foreign cache_dir with a control socket" "cache_dir $f: owned by uid 1000, not by uid $(id -u) who runs cachegw, nor root: chown $(id -u) $f\$" "$f"
[ ! -s "$work/conns" ] || bad "foreign cache_dir: the gateway connected to its control socket ($(wc -l <"$work/conns") times)"
pid_stop "$lpid" 2

# 4. lock is a symlink to a file outside: refused, the file untouched.
printf 'precious\n' >"$work/outside"
chmod 0644 "$work/outside"
want=$(sum "$work/outside")
rm -f "$c/lock"
ln -s "$work/outside" "$c/lock"
refused "lock is a symlink" "cache_dir $c: lock is a symbolic link" "$c"
[ "$(sum "$work/outside")" = "$want" ] || bad "lock is a symlink: the file it points to changed: $(sum "$work/outside")"
rm -f "$c/lock"

# 5. nodes.log is a symlink to a copy of itself outside: refused, the copy
# untouched.
cp -p "$c/nodes.log" "$work/nodes.copy"
want=$(sum "$work/nodes.copy")
rm "$c/nodes.log"
ln -s "$work/nodes.copy" "$c/nodes.log"
refused "nodes.log is a symlink" "nodes.log.*symbolic link" "$c"
[ "$(sum "$work/nodes.copy")" = "$want" ] || bad "nodes.log is a symlink: the file it points to changed"
rm "$c/nodes.log"
cp -p "$work/nodes.copy" "$c/nodes.log"

# 6. objects/ is a symlink to a directory outside: refused, nothing made
# there.
mkdir "$work/outdir"
mv "$c/objects" "$work/objects.orig"
ln -s "$work/outdir" "$c/objects"
refused "objects is a symlink" "objects.*symbolic link" "$c"
[ -z "$(ls -A "$work/outdir")" ] || bad "objects is a symlink: files were made outside: $(ls -A "$work/outdir" | head -3 | tr '\n' ' ')"
rm "$c/objects"
mv "$work/objects.orig" "$c/objects"

# 7. Put back as it was, the cache mounts again.
mounts "cache restored" "$c"

# 8. pidfile= in a directory others can write (mode 1777): a link put
# there at a name the gateway might give its temporary file (the pidfile's
# name and a pid: the next few thousand pids) is not followed; the pidfile
# is a file of its own holding the gateway's pid.
pd=$(harness_tmpdir piddir)
chmod 1777 "$pd"
printf 'precious\n' >"$work/victim"
want=$(sum "$work/victim")
last=$(cat /proc/sys/kernel/ns_last_pid)
"$PY" -c 'import os, sys
for p in range(int(sys.argv[1]) + 1, int(sys.argv[1]) + 4000):
    os.symlink(sys.argv[2], "%s.%d" % (sys.argv[3], p))' "$last" "$work/victim" "$pd/gw.pid"
if mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$c,pidfile=$pd/gw.pid"; then
	[ "$(sum "$work/victim")" = "$want" ] || bad "pidfile=: a link at a temporary name was followed: $(cat "$work/victim")"
	[ -f "$pd/gw.pid" ] && [ ! -L "$pd/gw.pid" ] || bad "pidfile=: $pd/gw.pid is not a file of its own ($(ls -l "$pd/gw.pid"))"
	[ "$(cat "$pd/gw.pid" 2>/dev/null)" = "$GW_PID" ] || bad "pidfile=: holds '$(cat "$pd/gw.pid" 2>/dev/null)', not $GW_PID"
	[ "$GW_PID" -gt "$last" ] && [ "$GW_PID" -lt $((last + 4000)) ] ||
		echo "  pidfile=: the gateway's pid $GW_PID was not among the links made (from $last): the link was not tested" >&2
	unmount_gateway "$mnt" || bad "pidfile=: unmount (log: $GW_LOG)"
else
	bad "pidfile=: mount failed: $(tail -n 3 "$GW_LOG")"
fi

exit $fail
