#!/bin/bash
# offline=SECONDS: with the origin stopped (SIGSTOP) the gateway says once that it is lost (log line, metric origin_lost 1) and serves what its cache holds: every cached file byte for byte, listings of directories it listed, stat, df; what it does not hold fails at once with EHOSTDOWN (a file never read, a directory never listed), a name a kept listing does not have is ENOENT. A file changed at the origin meanwhile is seen once the origin is back (log line, origin_back_total) and the attribute timeout passed. Then a start with the origin down (ganesha killed) comes up from the warm cache and serves the tree, and connects when the origin is started again; without a root handle kept, such a start fails with a clear message.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
trap 'kill -CONT "${ORIGIN_PID:-0}" 2>/dev/null; harness_cleanup' EXIT

data=$(harness_tmpdir origin-data)
mkdir -p "$data/d1/sub" "$data/d2" "$data/unlisted"
for i in $(seq 1 12); do
	head -c $((RANDOM * 5 + 1)) /dev/urandom >"$data/d1/f$i"
done
head -c 200000 /dev/urandom >"$data/d1/sub/deep.bin"
head -c 3000000 /dev/urandom >"$data/d2/big.bin"
head -c 70000 /dev/urandom >"$data/d1/uncached.bin"
head -c $((64 * 1048576)) /dev/urandom >"$data/d2/midread.bin"
echo inside >"$data/unlisted/x"
ln -s sub/deep.bin "$data/d1/link"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)/c
work=$(harness_tmpdir work)
OPTS="cache_dir=$cdir,actimeo=1,offline=2"
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || exit 1

# Warm: list the tree (not unlisted/), read every file but uncached.bin.
(cd "$data" && find . -path ./unlisted -prune -o -type f ! -name uncached.bin ! -name midread.bin -print | sort) >"$work/files"
[ "$(readlink "$mnt/d1/link")" = sub/deep.bin ] || bad "warm: readlink of d1/link"
total=0
while read -r f; do
	cmp -s "$data/$f" "$mnt/$f" || bad "warm read of $f: bytes differ"
	total=$((total + $(stat -c %s "$data/$f")))
done <"$work/files"
ls -R "$mnt/d1" "$mnt/d2" >/dev/null || bad "warm listing failed"
ls "$mnt" >/dev/null
df "$mnt" >/dev/null || bad "df before the stop failed"
gw_wait_metric "$cdir" cache_fill_bytes_total "$total" 30 || bad "fills did not complete ($total bytes)"

# A read in progress when the origin stops: its first MiB read, the rest
# not cached yet.
exec 3<"$mnt/d2/midread.bin"
head -c 1048576 <&3 >"$work/mid.head" || bad "the first MiB of midread.bin"
kill -STOP "$ORIGIN_PID" || { echo "FAIL: cannot stop the origin" >&2; exit 1; }
t0=$SECONDS
gw_wait_metric "$cdir" origin_lost 1 30 || bad "the gateway did not call the origin lost within 30 s"
echo "  lost after $((SECONDS - t0)) s" >&2
grep -q 'origin .* lost: no answer' "$GW_LOG" || bad "no log line for the lost origin"
# Changed at the origin while it is away (seen only once it is back).
head -c 5000 /dev/urandom >"$data/d1/f2.new"
cp "$data/d1/f2" "$work/f2.old"
sleep 1.2	# past actimeo: everything below would ask the origin

while read -r f; do
	want=$data/$f
	[ "$f" = ./d1/f2 ] && want=$work/f2.old
	out=$(timeout -k 5 30 cmp "$want" "$mnt/$f" 2>&1) || bad "offline: $f: $out"
done <"$work/files"
# One answer is one: readlink(2) of a regular file whose entry has
# expired, from a working directory inside (no other name is looked up),
# is two requests: a GETATTR of the directory (the kernel's permission
# check, its attributes expired too) and one LOOKUP (then EINVAL, no
# GETATTR of the file); the LOOKUP is answered from three things held (the
# directory's search right, the name, the file's attributes) and counted
# once (it was counted three times).
if n=$(
	cd "$mnt/d1/sub" || exit 1
	sleep 1.2
	a0=$(gw_metric "$cdir" offline_answers_total)
	err=$(timeout 30 readlink -v deep.bin 2>&1)
	case $err in *"Invalid argument"*) ;; *) echo "readlink: '$err', not EINVAL"; exit 1 ;; esac
	echo $(($(gw_metric "$cdir" offline_answers_total) - a0))
); then
	[ "$n" = 2 ] || bad "offline: a GETATTR and a LOOKUP counted $n offline answers, not 2"
else
	bad "offline: the lookup of d1/sub/deep.bin: $n"
fi
[ "$(cd "$mnt/d1" && timeout 30 ls | sort | tr '\n' ' ')" = "$(cd "$data/d1" && ls | grep -v f2.new | sort | tr '\n' ' ')" ] ||
	bad "offline: the listing of d1 differs: $(cd "$mnt/d1" && timeout 30 ls 2>&1 | tr '\n' ' ')"
[ "$(timeout 30 stat -c %s "$mnt/d2/big.bin")" = 3000000 ] || bad "offline: stat of a cached file"
[ "$(timeout 30 readlink "$mnt/d1/link" 2>&1)" = sub/deep.bin ] || bad "offline: readlink of d1/link: $(timeout 30 readlink "$mnt/d1/link" 2>&1)"
timeout 30 cmp -s "$data/d1/sub/deep.bin" "$mnt/d1/link" || bad "offline: reading through d1/link"
timeout 30 df "$mnt" >/dev/null || bad "offline: df failed"
# What is not held: at once, EHOSTDOWN.
err=$(timeout -k 5 30 cat "$mnt/d1/uncached.bin" 2>&1 >/dev/null)
case $err in *"Host is down"*) ;; *) bad "offline: a file never read: '$err', want 'Host is down'" ;; esac
err=$(timeout -k 5 30 ls "$mnt/unlisted" 2>&1 >/dev/null)
case $err in *"Host is down"*) ;; *) bad "offline: a directory never listed: '$err', want 'Host is down'" ;; esac
err=$(timeout -k 5 30 stat "$mnt/d1/no-such-name" 2>&1 >/dev/null)
case $err in *"No such file"*) ;; *) bad "offline: a name d1's kept listing lacks: '$err', want ENOENT" ;; esac
# The read in progress: what the gateway had fetched ahead is served, then
# at once EHOSTDOWN, never wrong bytes.
err=$(timeout -k 5 60 cat <&3 2>&1 >"$work/mid.rest")
exec 3<&-
case $err in *"Host is down"*) ;; *) bad "offline: the read in progress ended with '$err', want 'Host is down'" ;; esac
got=$(( $(stat -c %s "$work/mid.rest") + 1048576 ))
[ "$got" -lt $((64 * 1048576)) ] || bad "offline: the whole uncached file was read with the origin stopped?"
cat "$work/mid.head" "$work/mid.rest" | cmp -s - <(head -c "$got" "$data/d2/midread.bin") ||
	bad "offline: the $got bytes the read in progress got differ from the origin's"
echo "  offline: the read in progress got $got bytes, then 'Host is down'" >&2
[ "$(gw_metric "$cdir" origin_refused_total)" -gt 0 ] || bad "origin_refused_total did not move"
[ "$(gw_metric "$cdir" offline_answers_total)" -gt 0 ] || bad "offline_answers_total did not move"
echo "  offline: $(gw_metric "$cdir" offline_answers_total) answers from the cache, $(gw_metric "$cdir" origin_refused_total) calls refused" >&2

mv "$data/d1/f2.new" "$data/d1/f2"
kill -CONT "$ORIGIN_PID"
gw_wait_metric "$cdir" origin_back_total 1 30 || bad "the origin was not seen back within 30 s"
grep -q 'origin .* back after' "$GW_LOG" || bad "no log line for the origin back"
sleep 1.2
cmp -s "$data/d1/f2" "$mnt/d1/f2" || bad "after the origin is back: the file changed meanwhile is not the origin's"
cmp -s "$data/d1/uncached.bin" "$mnt/d1/uncached.bin" || bad "after the origin is back: uncached.bin"
cmp -s "$data/d2/midread.bin" "$mnt/d2/midread.bin" || bad "after the origin is back: midread.bin"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"

# A start without the origin, from the warm cache.
origin_stop origin
mount_gateway "$ORIGIN_URL" "$mnt" "$OPTS" || { bad "no start with the origin down and offline="; exit 1; }
grep -q 'starting without the origin' "$GW_LOG" || bad "no log line for the start without the origin"
[ "$(gw_metric "$cdir" origin_lost)" = 1 ] || bad "started without the origin, but origin_lost is not 1"
printf "./d1/uncached.bin\n./d2/midread.bin\n" >>"$work/files"
while read -r f; do
	out=$(timeout -k 5 30 cmp "$data/$f" "$mnt/$f" 2>&1) || bad "started offline: $f: $out"
done <"$work/files"
[ "$(cd "$mnt/d1" && timeout 30 ls | sort | tr '\n' ' ')" = "$(cd "$data/d1" && ls | sort | tr '\n' ' ')" ] ||
	bad "started offline: the listing of d1 differs"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
gw_wait_metric "$cdir" origin_back_total 1 40 || bad "the origin started again was not seen back within 40 s"
echo after >"$data/d1/made-after"
sleep 1.2
[ "$(timeout 30 cat "$mnt/d1/made-after" 2>&1)" = after ] || bad "after the origin came: a new file reads '$(timeout 30 cat "$mnt/d1/made-after" 2>&1)'"
unmount_gateway "$mnt" || bad "unmount / gateway exit (log: $GW_LOG)"

# No root handle kept (a new cache): the start fails, and says why.
origin_stop origin
out=$(timeout 60 "$CACHEGW" "$ORIGIN_URL" "$mnt" -f -o "cache_dir=$(harness_tmpdir cache2)/c,offline=2" 2>&1 </dev/null)
st=$?
[ $st != 0 ] && [ $st != 124 ] || bad "a start with no origin and nothing kept: exit $st"
case $out in *"no root handle of this export is kept"*) ;; *) bad "a start with no origin and nothing kept says: $out" ;; esac
is_mounted "$mnt" && bad "mounted anyway"
exit $fail
