#!/bin/bash
# Install: `meson install --destdir` puts the binaries, the bench's parts, the unit and the man pages in place (each man page clean under `man --warnings`, every gateway option and inspect/bench command documented); the .deb built from a copy of the tree installs, an /etc/fstab line of type fuse.cachegw mounts the origin with `mount -a` (mount.fuse3 runs the packaged gateway, supervised: two processes, the serving one the supervisor's child), which serves the origin's bytes; the installed inspect and bench work; unmount and purge leave no process and no file; /etc/fstab is restored byte for byte.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
for b in dpkg-buildpackage dh apt-get dpkg-query meson jq man systemd-analyze findmnt flock mount.fuse3 fio; do
	command -v "$b" >/dev/null 2>&1 || { echo "SKIP: $b not installed" >&2; exit 77; }
done

ROOT=$_HARNESS_ROOT
PKGS=(cachegw cachegw-bench)
t0=$SECONDS
step() { echo "[48] $((SECONDS - t0))s: $*" >&2; }

# -------------------------------------------------------------- refuse
# Never touch someone else's install: a package of ours in any state, or a
# cachegw that mount.fuse3 would run instead of the packaged one (it runs
# "cachegw" from sh's default PATH).
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
	case $st in
	'' | 'unknown ok not-installed' | 'purge ok not-installed') ;;
	*) echo "SKIP: package $p is already on this machine ($st); not touching it" >&2; exit 77 ;;
	esac
done
on_path() { env -i /bin/sh -c 'for n in cachegw cachegw-inspect cachegw-bench; do command -v $n; done'; }
found=$(on_path)
if [ -n "$found" ]; then
	echo "SKIP: cachegw is already installed here ($(echo $found)); not touching it" >&2
	exit 77
fi

# One run at a time on this machine: it edits /etc/fstab.
exec 9</etc || exit 1
flock -n 9 || { echo "SKIP: another run of this test holds the lock on /etc" >&2; exit 77; }

FSTAB=/etc/fstab
FSTAB_SAVED=
FSTAB_EXISTED=
INSTALLED=
MNT=
pkg_pids() { # pids whose executable is one of the package's programs
	local e p
	for e in /proc/[0-9]*/exe; do
		p=$(readlink "$e" 2>/dev/null) || continue
		case $p in
		/usr/bin/cachegw | /usr/bin/cachegw-inspect | /usr/libexec/cachegw/* | \
			"/usr/bin/cachegw (deleted)" | "/usr/bin/cachegw-inspect (deleted)")
			e=${e#/proc/}
			echo "${e%/exe}"
			;;
		esac
	done
}
fstab_restore() {
	[ -n "$FSTAB_SAVED" ] || return 0
	if [ -n "$FSTAB_EXISTED" ]; then
		cmp -s "$FSTAB_SAVED" "$FSTAB" || cat "$FSTAB_SAVED" >"$FSTAB"
		cmp -s "$FSTAB_SAVED" "$FSTAB" || { echo "FAIL: could not restore $FSTAB" >&2; return 1; }
	else
		rm -f "$FSTAB"
	fi
	FSTAB_SAVED=
}
pkg_purge() {
	[ -n "$INSTALLED" ] || return 0
	timeout 120 apt-get -o DPkg::Lock::Timeout=60 -o Dpkg::Options::=--force-unsafe-io \
		purge -y -q "${PKGS[@]}" \
		</dev/null >>"$tmp/purge.log" 2>&1 ||
		timeout 60 dpkg --purge "${PKGS[@]}" >>"$tmp/purge.log" 2>&1
	INSTALLED=
}
pkg_cleanup() {
	local rc=$? p
	trap - INT TERM
	if [ -n "$MNT" ] && is_mounted "$MNT"; then
		umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	for p in $(pkg_pids); do
		echo "[48] cleanup: stopping $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100))" >&2
		pid_stop "$p" 10
	done
	fstab_restore || rc=1
	pkg_purge
	harness_cleanup
	exit $rc
}
trap pkg_cleanup EXIT
tmp=$(harness_tmpdir pkg)

# -------------------------------------------------------------- 1. meson install --destdir
# The build the test runs against, installed as `meson install` does it.
gwbuild=$(cd "$(dirname "$CACHEGW")/.." && pwd)
if [ ! -f "$gwbuild/meson-private/coredata.dat" ]; then
	bad "$gwbuild (from \$CACHEGW) is not a meson build directory"
	exit 1
fi
step "meson install --destdir from $gwbuild"
dest=$tmp/destdir
timeout 300 meson install -C "$gwbuild" --destdir "$dest" --quiet >"$tmp/meson-install.log" 2>&1 ||
	{ bad "meson install --destdir failed"; tail -n 20 "$tmp/meson-install.log" >&2; }
meson introspect --buildoptions "$gwbuild" >"$tmp/buildoptions.json" || bad "meson introspect failed"
opt() { jq -r --arg n "$1" '.[] | select(.name == $n) | .value' "$tmp/buildoptions.json"; }
abs() { case $2 in /*) echo "$2" ;; *) echo "$1/$2" ;; esac; }
prefix=$(opt prefix)
bindir=$(abs "$prefix" "$(opt bindir)")
libexecdir=$(abs "$prefix" "$(opt libexecdir)")
datadir=$(abs "$prefix" "$(opt datadir)")
mandir=$(abs "$prefix" "$(opt mandir)")
unitdir=$(opt systemdsystemunitdir)
[ -n "$unitdir" ] || unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null)
[ -n "$unitdir" ] || unitdir=/lib/systemd/system
for f in "$bindir/cachegw" "$bindir/cachegw-inspect" "$bindir/cachegw-bench" \
	"$libexecdir/cachegw/cachegw-bench-nfsread"; do
	[ -f "$dest$f" ] && [ -x "$dest$f" ] || bad "meson install: $f missing or not executable"
done
for f in "$datadir/cachegw/origin.sh" "$mandir/man8/cachegw.8" "$mandir/man8/cachegw-inspect.8" \
	"$mandir/man1/cachegw-bench.1" "$unitdir/cachegw@.service" \
	"$datadir/doc/cachegw/examples/cachegw.conf.example"; do
	[ -f "$dest$f" ] || bad "meson install: $f missing"
done
# Everything meson says it installs is there.
while IFS= read -r f; do
	[ -e "$dest$f" ] || bad "meson install: $f (in meson introspect --installed) missing"
done < <(meson introspect --installed "$gwbuild" | jq -r '.[]')
grep -q "^ExecStart=$bindir/cachegw " "$dest$unitdir/cachegw@.service" ||
	bad "the unit does not start $bindir/cachegw: $(grep ExecStart= "$dest$unitdir/cachegw@.service")"

# Man pages: no warning from man/groff, the sections a reader looks for,
# and no option or command left out.
for page in man8/cachegw.8 man8/cachegw-inspect.8 man1/cachegw-bench.1; do
	f=$dest$mandir/$page
	[ -f "$f" ] || continue
	w=$(man --warnings -l "$f" 2>&1 >/dev/null)
	[ -z "$w" ] || bad "man --warnings -l $page: $w"
	for s in NAME SYNOPSIS DESCRIPTION OPTIONS FILES 'EXIT STATUS' EXAMPLES 'SEE ALSO'; do
		grep -q "^\.SH \"\{0,1\}$s\"\{0,1\}\$" "$f" || bad "$page has no $s section"
	done
	MANWIDTH=200 man -l "$f" 2>/dev/null | col -bx >"$tmp/${page#*/}.txt"
done
# The rendered pages name every option and command.
man_checks() {
	txt=$tmp/cachegw.8.txt
	grep -q '^SIGNALS' "$txt" || bad "cachegw.8 has no SIGNALS section"
	# Every name of gw_opt_table (daemon/opts_table.c), as "name=" (an
	# option with a value) or "name" (a flag, its negation, a word).
	rows=$(sed -n '/gw_opt_table\[\] = {/,/^};/p' "$ROOT/daemon/opts_table.c")
	opts=$(echo "$rows" | grep -oE '\b(STR|SIZEW?|NUMW?|CHOICE|KEY)\("[^"]+"' | sed 's/.*("//; s/"$/=/'
		echo "$rows" | grep -oE '\b(FLAGW?|WORD)\("[^"]+"' | sed 's/.*("//; s/"$//'
		echo "$rows" | grep -oE '\bFLAGW?\("[^"]+", *[a-z_]+, *[A-Za-z0-9_]+, *"[^"]+"' | sed 's/.*"\([^"]*\)"$/\1/')
	[ "$(echo "$opts" | wc -l)" -gt 40 ] || bad "could not read the options of daemon/opts_table.c"
	for o in $opts; do
		case $o in
		*=) re="(^|[^A-Za-z0-9_-])$o" ;;
		*) re="(^|[^A-Za-z0-9_-])$o([^A-Za-z0-9_=]|\$)" ;;
		esac
		grep -qE -- "$re" "$txt" || bad "cachegw.8 does not document '$o'"
	done
	grep -qE '^ *nfs://[^ ]+ +/[^ ]+ +fuse\.cachegw +[^ ]+ +0 +0' "$txt" || bad "cachegw.8 has no /etc/fstab example line"
	for c in $("$(dirname "$CACHEGW")/../tools/inspect/cachegw-inspect" --help | awk '/^  [a-z]+ /{ print $1 }'); do
		grep -q "cachegw-inspect $c" "$tmp/cachegw-inspect.8.txt" || bad "cachegw-inspect.8 does not document '$c'"
	done
	for o in $("$ROOT/tools/bench/cachegw-bench" --help | grep -oE -- '^  --[a-z-]+' | sort -u) \
		$("$ROOT/tools/bench/cachegw-bench" --help | awk '/^Commands/ { c = 1; next } /^Options/ { c = 0 } c && /^  [a-z]+ / { print $1 }'); do
		grep -q -- "$o" "$tmp/cachegw-bench.1.txt" || bad "cachegw-bench.1 does not document '$o'"
	done
}
if [ -s "$tmp/cachegw.8.txt" ] && [ -s "$tmp/cachegw-inspect.8.txt" ] && [ -s "$tmp/cachegw-bench.1.txt" ]; then
	man_checks
fi

# -------------------------------------------------------------- 2. the .deb
# dpkg-buildpackage writes into the parent directory: build in a copy.
step "dpkg-buildpackage"
src=$tmp/deb/cachegw
mkdir -p "$src"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
		tar -C "$ROOT" --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$src" -xf -
else
	tar -C "$ROOT" --exclude='./build*' --exclude=./.git --exclude='./obj-*' -cf - . | tar -C "$src" -xf -
fi
[ -f "$src/debian/control" ] || { bad "no debian/control in the copy of the tree"; exit 1; }
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2 noautodbgsym" timeout 600 \
	dpkg-buildpackage -us -uc -b) </dev/null >"$tmp/dpkg-buildpackage.log" 2>&1
rc=$?
step "dpkg-buildpackage exited $rc"
[ $rc = 0 ] || { bad "dpkg-buildpackage failed ($rc)"; tail -n 30 "$tmp/dpkg-buildpackage.log" >&2; exit 1; }
if grep -q 'warning:' "$tmp/dpkg-buildpackage.log"; then
	bad "warnings in the package build:"
	grep 'warning:' "$tmp/dpkg-buildpackage.log" | head -n 10 >&2
fi
debs=()
for p in "${PKGS[@]}"; do
	d=$(ls "$tmp/deb/${p}_"*.deb 2>/dev/null | head -n 1)
	[ -n "$d" ] || { bad "no ${p}_*.deb built"; exit 1; }
	debs+=("$d")
done

# -------------------------------------------------------------- 3. install, fstab, mount -a
data=$tmp/origin-data
mkdir -p "$data/dir/sub"
_rand "$data/big.bin" $((6 * 1048576 + 4321))
for i in $(seq 1 20); do _rand "$data/dir/f$i" $((i * 777)); done
_rand "$data/dir/sub/deep" 100000
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
MNT=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
glog=$tmp/gateway.log

step "apt-get install ${debs[*]##*/}"
INSTALLED=1	# from here on, the trap purges
# --force-unsafe-io: no fsync per unpacked file (a test install; the
# machine's disk is shared).
timeout 180 apt-get -o DPkg::Lock::Timeout=60 -o Dpkg::Options::=--force-unsafe-io \
	install -y -q --no-install-recommends "${debs[@]}" \
	</dev/null >"$tmp/install.log" 2>&1 ||
	{ bad "apt-get install of the packages failed"; tail -n 20 "$tmp/install.log" >&2; exit 1; }
for p in "${PKGS[@]}"; do
	[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || bad "$p is not installed"
done
dpkg -L "${PKGS[@]}" >"$tmp/files" 2>/dev/null
for f in /usr/bin/cachegw /usr/bin/cachegw-inspect /usr/bin/cachegw-bench \
	/usr/libexec/cachegw/cachegw-bench-nfsread /usr/share/cachegw/origin.sh \
	/lib/systemd/system/cachegw@.service /usr/share/man/man8/cachegw.8.gz \
	/usr/share/man/man8/cachegw-inspect.8.gz /usr/share/man/man1/cachegw-bench.1.gz; do
	grep -qx "$f" "$tmp/files" && [ -e "$f" ] || bad "the packages did not install $f"
done
[ "$(env -i /bin/sh -c 'command -v cachegw')" = /usr/bin/cachegw ] || bad "mount.fuse3 would not run /usr/bin/cachegw"
v=$(/usr/bin/cachegw --version 2>&1)
[ "$v" = "cachegw $(dpkg-query -W -f='${Version}' cachegw)" ] || bad "cachegw --version says '$v'"
# Fault injection is for tests: the package is built without it, so the
# CACHEGW_INJECT_* variables are not even named in its binaries (the build
# under test has them, which shows the check can see them).
[ "$(strings "$CACHEGW" | grep -c CACHEGW_INJECT_)" -gt 0 ] ||
	bad "the test build $CACHEGW names no CACHEGW_INJECT_ variable (is the check blind?)"
for b in /usr/bin/cachegw /usr/bin/cachegw-inspect; do
	n=$(strings "$b" | grep -c CACHEGW_INJECT_)
	[ "$n" = 0 ] || bad "$b (packaged) still reads fault injection variables: $(strings "$b" | grep CACHEGW_INJECT_ | head -n 3 | tr '\n' ' ')"
done
for page in cachegw cachegw-inspect cachegw-bench; do
	w=$(man --warnings "$page" 2>&1 >/dev/null)
	[ -z "$w" ] || bad "man --warnings $page (installed): $w"
done
# The unit as systemd reads it (this machine's systemd is not running).
udir=$tmp/units
mkdir -p "$udir"
cp /lib/systemd/system/cachegw@.service "$udir/"
ln -s cachegw@.service "$udir/cachegw@test.service"
w=$(systemd-analyze verify --man=no "$udir/cachegw@test.service" 2>&1)
[ -z "$w" ] || bad "systemd-analyze verify cachegw@test.service: $w"

# Everything is in place; now the fstab line.
FSTAB_SAVED=$tmp/fstab.saved
if [ -e "$FSTAB" ]; then
	FSTAB_EXISTED=1
	cp -p "$FSTAB" "$FSTAB_SAVED"
	fstab_stat=$(stat -c '%a %u %g' "$FSTAB")
else
	: >"$FSTAB_SAVED"
fi
{
	[ -s "$FSTAB" ] && [ -n "$(tail -c 1 "$FSTAB")" ] && echo
	printf '%s %s fuse.cachegw cache_dir=%s,supervise,allow_other,_netdev,noatime,logfile=%s,x-systemd.mount-timeout=30 0 0\n' \
		"$ORIGIN_URL" "$MNT" "$cdir" "$glog"
} >>"$FSTAB"
step "mount (fstab: $(tail -n 1 "$FSTAB"))"
# Other fuse.cachegw lines are not ours to mount: then only this one.
if [ "$(grep -c '^[^#]*[[:space:]]fuse\.cachegw[[:space:]]' "$FSTAB")" = 1 ]; then
	timeout 60 mount -a -t fuse.cachegw >"$tmp/mount.log" 2>&1 || bad "mount -a -t fuse.cachegw failed: $(cat "$tmp/mount.log")"
else
	timeout 60 mount "$MNT" >"$tmp/mount.log" 2>&1 || bad "mount $MNT failed: $(cat "$tmp/mount.log")"
fi
harness_register_mount "$MNT"
is_mounted "$MNT" || { bad "nothing mounted at $MNT"; cat "$glog" >&2 2>/dev/null; exit 1; }
[ "$(findmnt -n -o FSTYPE -M "$MNT")" = fuse.cachegw ] || bad "$MNT is $(findmnt -n -o FSTYPE -M "$MNT"), not fuse.cachegw"
# Supervised (the default in the background; the fstab line says so
# too): the supervisor, and the serving process its child.
gw=$(pkg_pids)
[ "$(echo "$gw" | wc -w)" = 2 ] || bad "want two packaged gateway processes (a supervisor and the serving one), found: '$gw'"
for p in $gw; do
	harness_register_pid "$p"
	[ "$(readlink "/proc/$p/exe")" = /usr/bin/cachegw ] || bad "the gateway runs $(readlink "/proc/$p/exe")"
done
set -- $gw
if [ $# = 2 ]; then
	pp1=$(awk '{ print $4 }' "/proc/$1/stat") pp2=$(awk '{ print $4 }' "/proc/$2/stat")
	[ "$pp1" = "$2" ] || [ "$pp2" = "$1" ] || bad "neither gateway process is the other's parent ($1: $pp1, $2: $pp2)"
fi

# The origin's bytes through the mount.
diff -r "$data" "$MNT" >"$tmp/diff" 2>&1 || { bad "the mount differs from the origin"; head "$tmp/diff" >&2; }
# The packaged inspect asks the packaged gateway: what was read came from
# the origin and went into the cache (fills finish after the reads: wait).
total=$(find "$data" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
for _ in $(seq 50); do
	timeout 30 /usr/bin/cachegw-inspect stats --cache-dir "$cdir" >"$tmp/stats" 2>&1 ||
		{ bad "cachegw-inspect stats failed: $(cat "$tmp/stats")"; break; }
	ord=$(awk '$1 == "origin_read_bytes_total" { print $2 }' "$tmp/stats")
	fill=$(awk '$1 == "cache_fill_bytes_total" { print $2 }' "$tmp/stats")
	[ "${fill:-0}" -ge "$total" ] && break
	sleep 0.2
done
[ "${ord:-0}" -ge "$total" ] || bad "origin_read_bytes_total is '${ord:-}' after reading $total bytes"
[ "${fill:-0}" -ge "$total" ] || bad "cache_fill_bytes_total is '${fill:-}' after reading $total bytes"

# The packaged bench finds its parts (gateway, inspect, nfsread, harness)
# where the package put them, not in this tree.
step "installed cachegw-bench"
bw=$(harness_tmpdir bench)
env -u CACHEGW -u CACHEGW_INSPECT -u CACHEGW_NFSREAD -u CACHEGW_HARNESS \
	CACHEGW_BENCH_NFS_PORT="$REEXPORT_NFS_PORT" CACHEGW_BENCH_MNT_PORT="$REEXPORT_MNT_PORT" \
	timeout -k 10 120 /usr/bin/cachegw-bench readahead --size 1M --small-files 10 --quiet \
	--workdir "$bw" </dev/null >"$tmp/bench.out" 2>"$tmp/bench.err" ||
	{ bad "installed cachegw-bench readahead failed"; tail -n 20 "$tmp/bench.err" >&2; }
grep -q '^# gateway /usr/bin/cachegw: cachegw ' "$tmp/bench.out" || bad "installed bench did not use /usr/bin/cachegw: $(grep '^# gateway' "$tmp/bench.out")"
[ "$(grep -c '^[0-9]*[KM]  *\(small_heads\|big_file\) ' "$tmp/bench.out")" = 8 ] || bad "installed bench printed no table"
n=$(timeout 30 /usr/libexec/cachegw/cachegw-bench-nfsread "$ORIGIN_URL" dir 2>&1)
[[ $n == *"files=21 "* ]] || bad "installed cachegw-bench-nfsread: '$n', want files=21"

# -------------------------------------------------------------- 4. unmount, purge
step "umount, purge"
umount "$MNT" || bad "umount $MNT failed"
for p in $gw; do
	pid_wait_exit "$p" 20 || bad "gateway $p still running 20 s after umount"
done
fstab_restore || fail=1
if [ -n "$FSTAB_EXISTED" ]; then
	[ "$(stat -c '%a %u %g' "$FSTAB")" = "$fstab_stat" ] || bad "$FSTAB mode/owner changed"
fi
pkg_purge
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
	case $st in '' | *not-installed) ;; *) bad "$p is still '$st' after purge" ;; esac
done
while IFS= read -r f; do
	[ -d "$f" ] && continue
	[ -e "$f" ] || [ -L "$f" ] && bad "$f is still there after purge"
done <"$tmp/files"
left=$(pkg_pids)
[ -z "$left" ] || bad "packaged processes still running after purge: $left"
[ -z "$(on_path)" ] || bad "a cachegw is still on PATH after purge"
is_mounted "$MNT" && bad "$MNT still mounted"
step "done"
exit $fail
