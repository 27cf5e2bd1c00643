#!/bin/bash
# Through an origin whose replies are rewritten (tests/lib/hostile_proxy.py): a directory whose READDIRPLUS holds names with '/', empty, a second '.'/'..' and 256 bytes lists its good names and exactly those (a 255-byte name among them), with a log line; READLINK targets of 4096 and 5000 bytes give ENAMETOOLONG while 4095 reads whole; an origin whose FSINFO says rtmax=wtmax=1 is refused at mount with a clear message, and at rtmax 8192 (the least libnfs takes) a 16 MiB file reads back right in at most 2x2048 READs.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

MiB=1048576

data=$(harness_tmpdir origin-data)
mkdir "$data/d" "$data/links"
long255=$(printf 'n%.0s' $(seq 255))
good="good_a good_b $long255"
for f in $good hostile_slash hostile_empty hostile_dot hostile_dotdot hostile_long; do
	echo "$f" >"$data/d/$f"
done
ln -s hostile_len_4095 "$data/links/ok4095"
ln -s hostile_len_4096 "$data/links/n4096"
ln -s hostile_len_5000 "$data/links/n5000"
head -c $((16 * MiB)) /dev/urandom >"$data/big.bin"
test_origin "$data"
counts=$HARNESS_TMP/proxy.counts
test_proxy hostile_proxy.py --names --readlink --fsinfo 8192 --count-file "$counts"
test_mount

# 1. The listing: the good names, each once; "." and ".." once each.
want=$(printf '%s\n' $good | sort)
for round in 1 2; do
	got=$(timeout 30 python3 -c 'import os,sys; print("\n".join(sorted(os.listdir(sys.argv[1]))))' "$mnt/d" 2>&1)
	[ "$got" = "$want" ] || bad "round $round: listing of d is '$(echo $got | cut -c1-200)', want the good names only"
	dots=$(timeout 30 ls -fa "$mnt/d" 2>&1 | grep -cx '\.\|\.\.')
	[ "$dots" = 2 ] || bad "round $round: '.' and '..' appear $dots times in ls -fa, want 2"
done
for f in $good; do
	[ "$(cat "$mnt/d/$f" 2>&1)" = "$f" ] || bad "d/$(echo "$f" | cut -c1-20): reads '$(cat "$mnt/d/$f" 2>&1 | cut -c1-60)'"
done
grep -q "skipped .* entries from the origin" "$GW_LOG" || bad "no log line about the skipped names"

# 2. READLINK: a target longer than PATH_MAX - 1 is ENAMETOOLONG, never cut.
cat >"$HARNESS_TMP/rl.py" <<-'PY'
	import errno, os, sys
	for name in sys.argv[2:]:
	    try:
	        t = os.readlink(os.path.join(sys.argv[1], name))
	        print(name, "len", len(t), "x" if t == "x" * len(t) else "other")
	    except OSError as e:
	        print(name, errno.errorcode[e.errno])
PY
got=$(timeout 30 python3 "$HARNESS_TMP/rl.py" "$mnt/links" ok4095 n4096 n5000 2>&1 | tr '\n' ';')
[ "$got" = "ok4095 len 4095 x;n4096 ENAMETOOLONG;n5000 ENAMETOOLONG;" ] ||
	bad "readlink: got '$got', want 'ok4095 len 4095 x;n4096 ENAMETOOLONG;n5000 ENAMETOOLONG;'"

# 3. FSINFO rtmax = 8192, the smallest libnfs 4.0 accepts (a smaller one
#    is refused at mount, below): 16 MiB is 2048 READs (4096 allowed), not
#    millions.
r0=$(awk '$1 == "READ" { print $2 }' "$counts")
[ "$(timeout 120 sha256sum <"$mnt/big.bin" | cut -d' ' -f1)" = "$(sha256sum <"$data/big.bin" | cut -d' ' -f1)" ] ||
	bad "big.bin reads back wrong (or not within 120 s) with rtmax=8192"
r1=$(awk '$1 == "READ" { print $2 }' "$counts")
reads=$(( ${r1:-0} - ${r0:-0} ))
{ [ "$reads" -ge 1 ] && [ "$reads" -le 4096 ]; } || bad "16 MiB took $reads READs at the origin, want 1..4096"
echo "16 MiB with rtmax=8192: $reads READs" >&2

# 4. FSINFO rtmax = wtmax = 1: the mount is refused, with the reason.
pport1=$((ORIGIN_NFS_PORT + 6))
python3 "$(dirname "$0")/../lib/hostile_proxy.py" "$pport1" "$ORIGIN_NFS_PORT" \
	--fsinfo 1 >"$HARNESS_TMP/proxy1.log" 2>&1 </dev/null &
harness_register_pid $!
for ((i = 0; i < 100; i++)); do
	_port_listening "$pport1" && break
	sleep 0.1
done
mnt1=$(harness_tmpdir mnt1)
log0=$GW_LOG pid0=$GW_PID
if mount_gateway "nfs://127.0.0.1/origin?nfsport=$pport1&mountport=$ORIGIN_MNT_PORT" "$mnt1" "cache_dir=$(harness_tmpdir cache1)" 2>/dev/null; then
	bad "a mount through an origin with rtmax=1 succeeded"
	unmount_gateway "$mnt1"
else
	grep -q "max rsize of 1\|FSINFO rtmax 1" "$GW_LOG" || bad "the refused mount does not say why: $(tail -2 "$GW_LOG")"
fi
GW_LOG=$log0 GW_PID=$pid0 GW_MNT=$mnt

unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
