#!/bin/bash
# Writing a tree: an untar (GNU tar as root, 160 files averaging ~9 KB and 4 of 200 KB, in 16 directories, varied modes, owners and mtimes) through the gateway, written through and with `writeback`, gives the origin and the mount the same names, types, sizes, modes, owners, mtimes and bytes as the same untar on a local directory; creating a file costs no GETATTR of its directory (the CREATE's wcc gives its attributes) and, with lookupcache=all, no LOOKUP in a directory the gateway made (names known absent), and with `writeback` a small file flushed whole goes FILE_SYNC, so its close makes no COMMIT (COMMITs only for the files over 64 KiB); the origin calls by procedure are printed.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh" inspect
test_require_cmd tar

NFILES=160 NDIRS=16 NBIG=4
data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
test_origin "$data"

# The tarball, the same at every run (seeded): files spread over the
# directories, one in 40 of 200 KB, every fifth owned by 1234.
"$PY" - "$work/t.tar" "$NFILES" "$NDIRS" <<'PY' || { echo "FAIL: making the tarball" >&2; exit 1; }
import io, random, sys, tarfile
out, n, nd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(33)
dirs = ["t"] + ["t/d%02d" % i if i % 4 else "t/d%02d/e%d" % (i - 1, i) for i in range(1, nd)]
files = {d: [] for d in dirs}
for i in range(n):
    size = 200000 + i if i % 40 == 39 else int(rng.expovariate(1 / 9000))
    ti = tarfile.TarInfo("%s/f%03d.c" % (dirs[i % len(dirs)], i))
    ti.size = size
    ti.mode = [0o644, 0o600, 0o755, 0o640][i % 4]
    ti.mtime = 1600000000 + i * 977
    if i % 5 == 3:
        ti.uid = ti.gid = 1234
    files[dirs[i % len(dirs)]].append((ti, rng.randbytes(size)))
# Depth first (sorted paths), each directory before what it holds, as tar
# makes archives: tar then sets each directory's mtime once it is done.
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    for k, d in enumerate(sorted(dirs)):
        ti = tarfile.TarInfo(d)
        ti.type = tarfile.DIRTYPE
        ti.mode = [0o755, 0o750, 0o700][k % 3]
        ti.mtime = 1700000000 + k * 61
        t.addfile(ti)
        for ti, b in files[d]:
            t.addfile(ti, io.BytesIO(b))
PY

# NAME DIR: type, mode, owner, size, mtime of each entry under DIR, and a
# hash of each file's bytes, one line per path, sorted.
manifest() {
	"$PY" - "$1" <<'PY'
import hashlib, os, stat, sys
top = sys.argv[1]
for root, dirs, files in os.walk(top):
    for name in sorted(dirs + files):
        p = os.path.join(root, name)
        st = os.lstat(p)
        h = "-"
        if stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                h = hashlib.sha256(f.read()).hexdigest()[:16]
        print(os.path.relpath(p, top), oct(st.st_mode), st.st_uid, st.st_gid,
              st.st_size if stat.S_ISREG(st.st_mode) else 0, st.st_mtime_ns, h)
PY
}
local_dir=$(harness_tmpdir local)
tar -xf "$work/t.tar" -C "$local_dir" || bad "local untar failed"
manifest "$local_dir" | sort >"$work/local"
[ "$(grep -c '\.c ' "$work/local")" = "$NFILES" ] || bad "the local untar has $(grep -c '\.c ' "$work/local") files, want $NFILES"

st() { awk -v n="$1" '$1 == n { print $2; exit }' "$2"; }
# untar MODE OPTS: untar through a mount with OPTS into the origin's
# subdirectory MODE; compare; the origin calls by procedure in $work/MODE.calls.
untar() {
	local mode=$1 opts=$2 p
	mkdir "$data/$mode"
	test_mount "$opts"
	cache_inspect stats --cache-dir "$cdir" >"$work/$mode.s0" || bad "$mode: stats failed"
	tar -xf "$work/t.tar" -C "$mnt/$mode" || bad "$mode: untar through the gateway failed"
	cache_inspect stats --cache-dir "$cdir" >"$work/$mode.s1" || bad "$mode: stats failed"
	manifest "$mnt/$mode" | sort >"$work/$mode.mnt"
	gw_check
	unmount_gateway || bad "$mode: unmount failed"
	manifest "$data/$mode" | sort >"$work/$mode.origin"
	diff "$work/local" "$work/$mode.mnt" >"$work/$mode.d1" ||
		bad "$mode: the mount differs from a local untar: $(head -n 4 "$work/$mode.d1")"
	diff "$work/local" "$work/$mode.origin" >"$work/$mode.d2" ||
		bad "$mode: the origin differs from a local untar: $(head -n 4 "$work/$mode.d2")"
	: >"$work/$mode.calls"
	for p in lookup create mkdir write setattr commit getattr access; do
		echo "$p $(($(st "origin_${p}_calls_total" "$work/$mode.s1") - $(st "origin_${p}_calls_total" "$work/$mode.s0")))" >>"$work/$mode.calls"
	done
	echo "$mode: $(($(st origin_calls_total "$work/$mode.s1") - $(st origin_calls_total "$work/$mode.s0"))) origin calls for $NFILES files in $NDIRS directories: $(tr '\n' ' ' <"$work/$mode.calls")"
}
calls() { awk -v p="$2" '$1 == p { print $2 }' "$work/$1.calls"; }

untar through lookupcache=all
untar writeback writeback,lookupcache=all
for mode in through writeback; do
	# A directory's attributes come with each CREATE and MKDIR: at most
	# one GETATTR per directory, not one per file.
	[ "$(calls $mode getattr)" -le "$NDIRS" ] ||
		bad "$mode: $(calls $mode getattr) GETATTRs for $NFILES files in $NDIRS directories, want <= $NDIRS"
	[ "$(calls $mode create)" = "$NFILES" ] || bad "$mode: $(calls $mode create) CREATEs, want $NFILES"
	# The kernel's LOOKUP before each create, in a directory the
	# gateway made: answered without the origin (names known absent).
	[ "$(calls $mode lookup)" -le "$NDIRS" ] ||
		bad "$mode: $(calls $mode lookup) LOOKUPs for $NFILES files in $NDIRS directories, want <= $NDIRS"
done
# Each small file flushed as one FILE_SYNC WRITE: COMMITs only for the big ones.
[ "$(calls writeback commit)" -le "$NBIG" ] ||
	bad "writeback: $(calls writeback commit) COMMITs for $NFILES files ($NBIG over 64 KiB), want <= $NBIG"
exit $fail
