#!/bin/bash
# The rooms stay apart: each layer includes only its own headers, common/ and the interfaces of the layers below it (common/ < nfsclient/, cache/, nodes/ < gateway/ < daemon/ < tools/), never a layer above or beside it, and never another layer's private header (cache_i.h, nodes_i.h, nfsc_i.h, read_i.h); and every file map is true (tests/lib/filemaps.sh: each .c file of cache/, nodes/, nfsclient/, gateway/, daemon/ is named in its folder's map header, and each name there is a file). Shown to fail on a doctored include, a .c file no map names and a map naming a file that is gone.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)

# check DIR ALLOWED-HEADERS...: every #include "x" in DIR/*.[ch] is a file
# of DIR itself or one of the allowed ones.
check() {
	local dir=$1 f h ok=0
	shift
	for f in "$dir"/*.[ch]; do
		while read -r h; do
			[ -e "$dir/$h" ] && continue
			case " $* " in *" $h "*) continue ;; esac
			echo "$f includes \"$h\": not its layer's, nor one below" >&2
			ok=1
		done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
	done
	return $ok
}
run_checks() { # TOP
	local t=$1 r=0 common
	common="config.h $(cd "$t/common" && ls -- *.h | tr '\n' ' ')"
	check "$t/common" config.h || r=1
	check "$t/nfsclient" $common || r=1
	check "$t/cache" $common || r=1
	check "$t/nodes" $common || r=1
	for room in "$t"/gateway "$t"/gateway/*/; do
		check "${room%/}" $common nfsc.h cache.h nodes.h gw_i.h \
			keep_i.h inode_i.h cred_i.h read_i.h write_i.h ops_i.h \
			handover_i.h groups.h gw_state.h gateway.h || r=1
	done
	check "$t/daemon" $common nfsc.h cache.h nodes.h gw_i.h gw_state.h \
		gateway.h || r=1
	return $r
}
run_checks "$top" || bad "a layer includes a header it should not"

# The check fails on a layer reaching up (gateway/ -> daemon/) or into
# another's private header (gateway/ -> cache_i.h).
copy=$(harness_tmpdir layers)
for d in common nfsclient cache nodes gateway daemon; do cp -r "$top/$d" "$copy/"; done
sed -i 's/^#include "gw_i.h"$/#include "gw_i.h"\n#include "daemon.h"/' "$copy/gateway/base/bdi.c"
out=$(run_checks "$copy" 2>&1) && bad "gateway/ including daemon.h passed the check"
case $out in *'bdi.c includes "daemon.h"'*) ;; *) bad "gateway/ including daemon.h: '$out'" ;; esac
cp "$top/gateway/base/bdi.c" "$copy/gateway/base/bdi.c"
sed -i 's/^#include "gw_i.h"$/#include "gw_i.h"\n#include "cache_i.h"/' "$copy/gateway/read/fill_thread.c"
out=$(run_checks "$copy" 2>&1) && bad "gateway/ including cache_i.h passed the check"
case $out in *'fill_thread.c includes "cache_i.h"'*) ;; *) bad "gateway/ including cache_i.h: '$out'" ;; esac

# Every file map is true; the check fails on a .c file its folder's map
# does not name, and on a map naming a file that is not there.
maps=$top/tests/lib/filemaps.sh
out=$("$maps" "$top" 2>&1) || bad "a file map is not true: $out"
cp "$top/gateway/read/fill_thread.c" "$copy/gateway/read/fill_thread.c"
"$maps" "$copy" || bad "the file maps of the copy are not true"
echo 'int gw_unmapped;' >"$copy/nodes/unmapped.c"
out=$("$maps" "$copy" 2>&1) && bad "a .c file no map names passed the check"
case $out in *'nodes/unmapped.c: not in the map of nodes/nodes_i.h'*) ;; *) bad "a .c file no map names: '$out'" ;; esac
rm "$copy/nodes/unmapped.c"
rm "$copy/daemon/metrics.c"
out=$("$maps" "$copy" 2>&1) && bad "a map naming a missing file passed the check"
case $out in *'daemon/daemon.h maps metrics.c: no such file'*) ;; *) bad "a map naming a missing file: '$out'" ;; esac
exit $fail
