#!/bin/bash
# Guest test: ganesha origin → cachegw → knfsd re-export (fsid=, as doc/reexport.md says) → kernel NFS clients over v3 and v4.2: tree and bytes equal the origin's, a program and its shared libraries run from the re-export, mmap reads equal the origin's, writes through the client land at the origin byte for byte; a directory of 3,000 names (CACHEGW_TEST_BIGDIR) listed by each client through knfsd costs the origin at most 1.2x the READDIRPLUS calls of one listing on the gateway mount.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start

data=$(harness_tmpdir origin-data)
fill_tree "$data" || { echo "fill_tree failed" >&2; exit 1; }
# A program with the shared libraries it loads, run from the re-export by
# its own dynamic loader (ld.so maps each library from the NFS mount).
prog=/usr/bin/sha256sum
mkdir -p "$data/prog/lib"
cp "$prog" "$data/prog/"
for l in $(ldd "$prog" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
	cp -L "$l" "$data/prog/lib/"
done
loader=$(basename "$(ldd "$prog" | awk '/ld-linux/ {print $1}')")
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1

vm_reexport_clients "$mnt" 7311 || exit 1

# The program's input is small (with the 33 MiB big.bin the step took
# ~6 s under TCG): what is tested is that it and its libraries run there.
want=$(cd "$data" && "$prog" edge_1m_plus_1 | cut -d' ' -f1)
# The v4.2 client compares the tree without hashing every file again (the
# bytes through v4.2 are compared below for big.bin, and by 20_many_clients
# through eight v4.2 mounts and by 40_fsx): 30 s less of the suite.
for c in "$c3" "$c4"; do
	v=$(basename "$c" | cut -d. -f1)
	how=
	[ "$c" = "$c4" ] && how=nohash
	step "$v: tree${how:+ (no hashes)} and bytes"
	if ! diff <(vm_manifest "$data" $how) <(timeout 300 bash -c "$(declare -f vm_manifest); vm_manifest '$c' $how") >"$c.diff" 2>&1; then
		bad "$v: the tree differs from the origin's: $(head -n 5 "$c.diff")"
	fi
	step "$v: exec from the re-export"
	got=$(cd "$c" && timeout 120 "./prog/lib/$loader" --library-path ./prog/lib ./prog/sha256sum edge_1m_plus_1 | cut -d' ' -f1)
	[ "$got" = "$want" ] || bad "$v: sha256sum run from the re-export printed '$got', want '$want'"
	step "$v: mmap reads"
	timeout 120 python3 - "$c/big.bin" "$data/big.bin" <<-'PY' || bad "$v: mmap read of big.bin differs from the origin's"
		import mmap, sys
		with open(sys.argv[1], "rb") as f, open(sys.argv[2], "rb") as g:
		    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
		    want = g.read()
		    # Pages out of order, as a program's loader touches them.
		    ps = 4096
		    n = (len(want) + ps - 1) // ps
		    for i in list(range(0, n, 7)) + list(range(n - 1, -1, -3)):
		        if m[i * ps:(i + 1) * ps] != want[i * ps:(i + 1) * ps]:
		            sys.exit("page %d differs" % i)
		    sys.exit(0 if m[:] == want else "whole file differs")
		PY
	step "$v: writes land at the origin"
	head -c $((8 << 20)) /dev/urandom >"$HARNESS_TMP/w.$v"
	timeout 300 dd if="$HARNESS_TMP/w.$v" of="$c/written.$v" bs=1M conv=fsync status=none ||
		bad "$v: dd through the client failed"
	cmp "$HARNESS_TMP/w.$v" "$data/written.$v" || bad "$v: the origin's written.$v differs from what the client wrote"
	printf 'appended\n' >>"$c/written.$v" || bad "$v: append failed"
	[ "$(tail -c 9 "$data/written.$v")" = appended ] || bad "$v: the append did not reach the origin"
done

# A big directory listed by kernel clients through knfsd: knfsd opens the
# directory for every READDIR a client sends and seeks to its cookie; the
# gateway reads it from the origin about once (its READDIRPLUS calls at
# most 1.2x those of one listing on its own mount), for NFSv3 and v4.2.
N=${CACHEGW_TEST_BIGDIR:-3000}	# 10000 by hand (doc/how-it-works.md); 3000 fit the suite
step "a directory of $N names through knfsd: about one origin listing"
for d in bigdir_gw bigdir_v3 bigdir_v4; do
	mkdir "$data/$d" && (cd "$data/$d" && seq -f "n%06g" 1 "$N" | xargs touch)
done
rdp() { cache_inspect stats --cache-dir "$cdir" | awk '$1 == "origin_readdirplus_calls_total" { print $2; exit }'; }
r0=$(rdp)
n=$(ls -f "$mnt/bigdir_gw" | grep -c '^n')
one=$(( $(rdp) - r0 ))
[ "$n" = "$N" ] || bad "the gateway mount lists $n of $N names"
[ "$one" -gt 3 ] || bad "one listing of $N names cost $one READDIRPLUS calls ('$r0' before): the count is not read"
for c in "$c3" "$c4"; do
	v=$(basename "$c" | cut -d. -f1)
	d=bigdir_v3
	[ "$c" = "$c4" ] && d=bigdir_v4
	r0=$(rdp)
	n=$(timeout 600 ls -f "$c/$d" | grep -c '^n')
	k=$(( $(rdp) - r0 ))
	echo "  $v: $n names listed through knfsd: $k READDIRPLUS at the origin (one listing on the gateway: $one)" >&2
	[ "$n" = "$N" ] || bad "$v: listed $n of $N names through knfsd"
	[ "$k" -le $(( (one * 12 + 9) / 10 )) ] || bad "$v: listing $N names through knfsd cost $k READDIRPLUS, one listing costs $one (want at most 1.2x)"
done

step "done"
exit $fail
