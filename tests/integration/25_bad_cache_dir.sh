#!/bin/bash
# Bad cache_dir inputs (missing option, a file, a foreign non-empty dir, another format version (99, and format 1 from before the 4 KiB sector checksums), read-only fs, missing parent) fail fast with a clear message and a non-zero exit, mount nothing and touch nothing.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

data=$(harness_tmpdir origin-data)
printf 'hello\n' >"$data/hello"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
work=$(harness_tmpdir work)
harness_register_mount "$mnt"

# expect_fail LABEL WANT_RC(any|N) REGEX [CACHEGW ARGS...]: runs the gateway
# in the foreground; it must exit within 30 s with a matching status and a
# message matching REGEX (extended, case-insensitive), leaving nothing mounted.
expect_fail() {
	local label=$1 want_rc=$2 re=$3 rc
	shift 3
	timeout -k 5 30 "$CACHEGW" "$@" </dev/null >"$work/out" 2>&1
	rc=$?
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		bad "$label: still running after 30 s"
	elif [ $rc = 0 ]; then
		bad "$label: exit status 0"
	elif [ "$want_rc" != any ] && [ $rc != "$want_rc" ]; then
		bad "$label: exit status $rc, want $want_rc"
	fi
	grep -Eqi "$re" "$work/out" || bad "$label: message does not match /$re/: $(head -c 300 "$work/out")"
	if grep -Eq "$SANITIZER_PATTERN" "$work/out"; then
		bad "$label: sanitizer report"
		head -n 30 "$work/out" >&2
	fi
	if is_mounted "$mnt"; then
		bad "$label: $mnt left mounted"
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	echo "$label: exit $rc: $(head -n 1 "$work/out")" >&2
}
# Names, types, sizes, modes, and the bytes of the small files (the lock
# file holds the last owner's pid: a refused start must not rewrite it).
snapshot() {
	(cd "$1" && find . -printf '%p %y %s %m\n' | LC_ALL=C sort &&
		find . -maxdepth 1 -type f -size -4k -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
}

# 1. No cache_dir at all: usage error (2), the message names the option.
expect_fail "no cache_dir" 2 'cache_dir' "$ORIGIN_URL" "$mnt" -f
expect_fail "no cache_dir (other options)" 2 'cache_dir' "$ORIGIN_URL" "$mnt" -f -o actimeo=5

# 2. cache_dir is a regular file (left as it was).
f=$work/a-file
printf 'not a dir\n' >"$f"
expect_fail "cache_dir is a file" any 'not a directory' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$f"
[ "$(cat "$f")" = "not a dir" ] || bad "cache_dir is a file: the file was changed"

# 3. A non-empty directory that is not a cache: refused, nothing written.
d=$(harness_tmpdir foreign)
printf 'precious\n' >"$d/notes.txt"
mkdir "$d/sub"
head -c 5000 /dev/urandom >"$d/sub/blob"
before=$(snapshot "$d")
expect_fail "foreign non-empty dir" any 'not empty|no cachegw cache|not a cache' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$d"
[ "$(snapshot "$d")" = "$before" ] || bad "foreign non-empty dir: its contents changed: $(diff <(echo "$before") <(snapshot "$d") | head -5 | tr '\n' ' ')"

# 4. A cache of another format version: refused, message names the version.
c=$(harness_tmpdir cache)/c
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$c" || exit 1
[ "$(timeout 10 cat "$mnt/hello")" = hello ] || bad "reading through a fresh cache failed"
unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
if grep -q '^format_version = ' "$c/cache.conf"; then
	sed -i 's/^format_version = .*/format_version = 99/' "$c/cache.conf"
else
	bad "cache.conf has no 'format_version = ' line: $(head -c 200 "$c/cache.conf")"
fi
before=$(snapshot "$c")
expect_fail "format version 99" any 'version' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$c"
grep -Eq 'version[^0-9]*99|99[^0-9]*version' "$work/out" ||
	bad "format version 99: the message does not say which version it found: $(head -c 300 "$work/out")"
[ "$(snapshot "$c")" = "$before" ] || bad "format version 99: the cache was modified: $(diff <(echo "$before") <(snapshot "$c") | head -5 | tr '\n' ' ')"
# Daemon mode (no -f) reports the same failure through its exit status.
expect_fail "format version 99 (background)" any 'version' "$ORIGIN_URL" "$mnt" -o "cache_dir=$c"
# Format 1 (one checksum per block, before the 4 KiB sector checksums):
# refused too, with what to do, and left as it was. (The layout is the
# same but for cache.conf and the .meta headers' version; the refusal
# comes from cache.conf before any object is opened.)
sed -i 's/^format_version = .*/format_version = 1/' "$c/cache.conf"
before=$(snapshot "$c")
expect_fail "format version 1" any 'format version 1;.*version 2.*empty cache_dir' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$c"
[ "$(wc -l <"$work/out")" = 1 ] || bad "format version 1: not one line: $(head -c 300 "$work/out")"
[ "$(snapshot "$c")" = "$before" ] || bad "format version 1: the cache was modified: $(diff <(echo "$before") <(snapshot "$c") | head -5 | tr '\n' ' ')"

# 5. A read-only filesystem: an empty one, and one holding a valid cache.
ro=$(harness_tmpdir ro)
if mount -t tmpfs -o size=4m,mode=0700 tmpfs "$ro"; then
	harness_register_mount "$ro"
	mount -o remount,ro "$ro" || bad "cannot remount tmpfs read-only"
	expect_fail "empty read-only fs" any 'writable|read-only|Read-only' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$ro"
	expect_fail "missing dir on a read-only fs" any 'read-only|Read-only|writable|cannot create' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$ro/sub"
	mount -o remount,rw "$ro" || bad "cannot remount tmpfs read-write"
	mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$ro/c" || exit 1
	timeout 10 cat "$mnt/hello" >/dev/null || bad "reading through a tmpfs cache failed"
	unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
	mount -o remount,ro "$ro" || bad "cannot remount tmpfs read-only"
	expect_fail "valid cache on a read-only fs" any 'writable|read-only|Read-only' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$ro/c"
	umount "$ro" || bad "cannot unmount the tmpfs"
else
	echo "note: cannot mount tmpfs; read-only cases skipped" >&2
fi

# 6. A cache_dir whose parent does not exist.
expect_fail "missing parent" any 'cache_dir|No such file' "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$work/no/such/dir"
[ -e "$work/no" ] && bad "missing parent: $work/no was created"

exit $fail
