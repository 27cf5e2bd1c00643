#!/bin/bash
# tests/lib/filemaps.sh [TOP] - every file map is true: each folder's map
# header (the list below) opens with a comment naming its .c files, one a
# line (" * name.c: what it owns" or " *   name.c  what it owns"); every .c
# file of the folder is named there and every name there is a file of the
# folder. Prints each mismatch and exits 1 if there is one; test 52 runs it.
# A new folder with .c files gets a line here.
set -uo pipefail
top=${1:-$(cd "$(dirname "$0")/../.." && pwd)}

maps=(
	"cache cache_i.h"
	"nodes nodes_i.h"
	"fleet fleet_i.h"
	"nfsclient nfsc_i.h"
	"gateway gateway.h"
	"gateway/base gw_i.h"
	"gateway/keep keep_i.h"
	"gateway/inode inode_i.h"
	"gateway/cred cred_i.h"
	"gateway/read read_i.h"
	"gateway/write write_i.h"
	"gateway/ops ops_i.h"
	"gateway/handover handover_i.h"
	"daemon daemon.h"
	"daemon/takeover takeover_i.h"
	"tools/inspect inspect_i.h"
)

# map_names HEADER: the names of the header's map (its opening comment, up
# to the first "*/").
map_names() {
	sed -n '1,/\*\//p' "$1" |
		sed -nE 's/^ \*[[:space:]]+([A-Za-z0-9_]+\.c)(:|[[:space:]]).*/\1/p' |
		sort -u
}

ok=0
for m in "${maps[@]}"; do
	set -- $m
	dir=$top/$1 hdr=$top/$1/$2
	if [ ! -f "$hdr" ]; then
		echo "$1/: no map header $2" >&2
		ok=1
		continue
	fi
	named=$(map_names "$hdr")
	for f in "$dir"/*.c; do
		[ -e "$f" ] || continue
		f=${f##*/}
		grep -qxF "$f" <<<"$named" ||
			{ echo "$1/$f: not in the map of $1/$2" >&2; ok=1; }
	done
	while read -r f; do
		[ -n "$f" ] || continue
		[ -f "$dir/$f" ] ||
			{ echo "$1/$2 maps $f: no such file in $1/" >&2; ok=1; }
	done <<<"$named"
done
exit $ok
