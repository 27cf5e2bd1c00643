#!/bin/bash
# The rooms stay apart: each layer includes only its own headers, common/ and the interfaces of the layers below it (common/ < nfsclient/, cache/, nodes/, fleet/ < gateway/ < daemon/ < tools/), never a layer above or beside it, and never another layer's private header (cache_i.h, nodes_i.h, fleet_i.h, nfsc_i.h); inside gateway/ each room (base < keep < inode < cred < read < write < ops < handover, then start.c on top) includes its own files, base/gw_i.h, the public gateway.h and gw_state.h, and only the one header of each room below it, never a room above nor another file of a room (cred/groups.h); daemon/ reaches gateway/ through gateway.h and gw_state.h alone, never gw_i.h nor a room's header; daemon/takeover/ (the takeover's files) includes daemon.h and what daemon/ may, and the rest of daemon/ reaches it through takeover_i.h alone. And every file map is true (tests/lib/filemaps.sh: each .c file of cache/, nodes/, nfsclient/, each gateway/ room, daemon/, daemon/takeover/ and tools/inspect/ is named in its folder's map header, and each name there is a file). Shown to fail on doctored includes (each rule), a .c file no map names and a map naming a file that is gone.
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
# gateway/'s rooms from the bottom up, each with its one header.
rooms="base:gw_i.h keep:keep_i.h inode:inode_i.h cred:cred_i.h read:read_i.h
	write:write_i.h ops:ops_i.h handover:handover_i.h"
run_checks() { # TOP
	local t=$1 r=0 common below="" room lower
	common="config.h $(cd "$t/common" && ls -- *.h | tr '\n' ' ')"
	lower="$common nfsc.h cache.h nodes.h fleet.h"
	check "$t/fleet" $common || r=1
	check "$t/common" config.h || r=1
	check "$t/nfsclient" $common || r=1
	check "$t/cache" $common || r=1
	check "$t/nodes" $common || r=1
	for room in $rooms; do
		check "$t/gateway/${room%%:*}" $lower gateway.h gw_state.h \
			gw_i.h $below || r=1
		below="$below ${room#*:}"
	done
	[ "$(cd "$t/gateway" && ls -d -- */ | tr -d / | sort | tr '\n' ' ')" = \
	  "$(for room in $rooms; do echo "${room%%:*}"; done | sort | tr '\n' ' ')" ] ||
		{ echo "gateway/: a folder that is not a room of the list" >&2; r=1; }
	check "$t/gateway" $lower $below || r=1
	check "$t/daemon" $lower gateway.h gw_state.h takeover_i.h || r=1
	check "$t/daemon/takeover" $lower gateway.h gw_state.h daemon.h || r=1
	return $r
}
run_checks "$top" || bad "a layer includes a header it should not"

# The check fails on a layer reaching up (gateway/ -> daemon/) or into
# another's private header (gateway/ -> cache_i.h), on daemon/ reaching
# into gateway/'s rooms (gw_i.h, read_i.h), on a room reaching up
# (inode/ -> ops_i.h) and on a room reaching into another's private file
# (ops/ -> cred/groups.h).
copy=$(harness_tmpdir layers)
for d in common nfsclient cache nodes fleet gateway daemon; do cp -r "$top/$d" "$copy/"; done
mkdir -p "$copy/tools" && cp -r "$top/tools/inspect" "$copy/tools/"
# doctor FILE ANCHOR-INCLUDE NEW-INCLUDE WHAT: the check must name FILE.
doctor() {
	local f=$1 anchor=$2 new=$3 what=$4 out
	grep -qx "#include \"$anchor\"" "$copy/$f" || { bad "$f: no #include \"$anchor\""; return; }
	sed -i "s/^#include \"$anchor\"\$/#include \"$anchor\"\\n#include \"$new\"/" "$copy/$f"
	out=$(run_checks "$copy" 2>&1) && bad "$what passed the check"
	case $out in *"${f##*/} includes \"$new\""*) ;; *) bad "$what: '$out'" ;; esac
	cp "$top/$f" "$copy/$f"
}
doctor gateway/base/bdi.c gw_i.h daemon.h "gateway/ including daemon.h"
doctor gateway/read/fill_thread.c read_i.h cache_i.h "gateway/ including cache_i.h"
doctor daemon/metrics.c daemon.h gw_i.h "daemon/ including gw_i.h"
doctor daemon/metrics.c daemon.h read_i.h "daemon/ including a room's header"
doctor daemon/takeover/takeover_fds.c takeover_i.h gw_i.h "daemon/takeover/ including gw_i.h"
doctor gateway/inode/inode.c inode_i.h ops_i.h "a room including a room above it"
doctor gateway/ops/ops.c ops_i.h groups.h "a room including another room's private file"

# Every file map is true; the check fails on a .c file its folder's map
# does not name, and on a map naming a file that is not there.
maps=$top/tests/lib/filemaps.sh
out=$("$maps" "$top" 2>&1) || bad "a file map is not true: $out"
"$maps" "$copy" || bad "the file maps of the copy are not true"
echo 'int gw_unmapped;' >"$copy/nodes/unmapped.c"
out=$("$maps" "$copy" 2>&1) && bad "a .c file no map names passed the check"
case $out in *'nodes/unmapped.c: not in the map of nodes/nodes_i.h'*) ;; *) bad "a .c file no map names: '$out'" ;; esac
rm "$copy/nodes/unmapped.c"
echo 'int gw_unmapped;' >"$copy/gateway/read/unmapped.c"
out=$("$maps" "$copy" 2>&1) && bad "a room's .c file no map names passed the check"
case $out in *'gateway/read/unmapped.c: not in the map of gateway/read/read_i.h'*) ;; *) bad "a room's .c file no map names: '$out'" ;; esac
rm "$copy/gateway/read/unmapped.c"
rm "$copy/daemon/metrics.c"
out=$("$maps" "$copy" 2>&1) && bad "a map naming a missing file passed the check"
case $out in *'daemon/daemon.h maps metrics.c: no such file'*) ;; *) bad "a map naming a missing file: '$out'" ;; esac
exit $fail
