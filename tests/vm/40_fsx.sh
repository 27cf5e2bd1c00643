#!/bin/bash
# Guest test: fsx (reads, writes, truncates, mapped reads and MAP_SHARED writes, fsync, close/reopen, O_DIRECT reads) through the kernel NFS client over NFSv3 and NFSv4.2 → knfsd → the cachegw mount → ganesha origin, once on a write-through mount and once on a -o writeback one: every op matches fsx's model, and the files then equal the origin's bytes, read at the origin, through the gateway mount and through the client after a remount.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start
FSX=${CACHEGW_FSX:-$_HARNESS_ROOT/build/tests/fsx/fsx}
[ -x "$FSX" ] || { echo "SKIP: fsx not built ($FSX)" >&2; exit 77; }
# Fixed seeds, so that a failure replays. Under TCG an op costs about 35 ms
# of guest time through four layers (the whole test: 77 s at 1200 ops on the
# idle host, 167 s at 1000 with its two cores busy; 700 keeps the suite in
# its budget: CACHEGW_FSX_OPS=1000 or more runs longer sequences).
read -r -a seeds <<<"${CACHEGW_FSX_SEEDS:-1 2}"
ops=${CACHEGW_FSX_OPS:-700}
# The -o writeback pass (the kernel's FUSE write-back cache under knfsd):
# fewer ops, its writes land in the page cache (700 ops took 19 s there).
wb_ops=${CACHEGW_FSX_WB_OPS:-400}
# Generous: with the host loaded (other jobs beside CI) 1000 ops took 306 s.
fsx_tmo=${CACHEGW_FSX_TIMEOUT:-600}

data=$(harness_tmpdir origin-data)
work=$(harness_tmpdir work)
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
knfsd_start || exit 1

# fsx_pass LABEL FSID OPS [GATEWAY OPTS]: a gateway mount of its own,
# exported by knfsd (v3 as its path, v4.2 as /LABEL under the pseudo
# root), one fsx per client version at once (two vCPUs; the gateway serves
# both files together). -d: O_DIRECT reads, and after every op the whole
# file read with O_DIRECT too, around the client's page cache: what the
# server side holds, not only the client's pages.
fsx_pass() {
	local label=$1 fsid=$2 n=$3 extra=${4:-} mnt cdir c3 c4 root=/run/nfs4root
	local files=() pids=() outs=() i c v s f rc where out
	mnt=$(harness_tmpdir "mnt-$label")
	cdir=$(harness_tmpdir "cache-$label")
	local gw_opts=cache_dir=$cdir,allow_other${extra:+,$extra}${CACHEGW_FSX_GW_OPTS:+,$CACHEGW_FSX_GW_OPTS}
	mount_gateway "$ORIGIN_URL" "$mnt" "$gw_opts" || { bad "$label: the gateway did not mount"; return; }
	step "$label: gateway -o $gw_opts, exported by knfsd"
	knfsd_export "$mnt" "$fsid" no_root_squash || { bad "$label: exportfs"; return; }
	mkdir -p "$root"
	mountpoint -q "$root" || mount -t tmpfs -o mode=755 nfs4root "$root" || { bad "$label: v4 root"; return; }
	exportfs -o rw,no_subtree_check,fsid=0,crossmnt,sync "127.0.0.1:$root" || { bad "$label: v4 root export"; return; }
	mkdir -p "$root/$label"
	mount --bind "$mnt" "$root/$label" || { bad "$label: bind"; return; }
	_VM_BINDS+=("$root/$label")
	knfsd_export "$root/$label" $((fsid + 1)) no_root_squash || { bad "$label: exportfs v4"; return; }
	c3=$(harness_tmpdir "client-v3-$label")
	c4=$(harness_tmpdir "client-v42-$label")
	nfs_mount "127.0.0.1:$mnt" "$c3" vers=3,nolock || { bad "$label: v3 mount"; return; }
	nfs_mount "127.0.0.1:/$label" "$c4" vers=4.2 || { bad "$label: v4.2 mount"; return; }
	i=0
	for c in "$c3" "$c4"; do
		v=$(basename "$c" | cut -d- -f2)
		s=${seeds[i % ${#seeds[@]}]}
		i=$((i + 1))
		f=fsx.$label.$v.$s
		step "$label, $v: fsx -S $s -N $n -c 20 -d"
		timeout "$fsx_tmo" "$FSX" -S "$s" -N "$n" -c 20 -d "$c/$f" >"$work/$f.out" 2>&1 &
		pids+=($!)
		files+=("$f")
		outs+=("$label, $v: fsx -S $s -N $n -c 20 -d")
	done
	for ((i = 0; i < ${#pids[@]}; i++)); do
		wait "${pids[i]}"
		rc=$?
		if [ $rc -eq 124 ]; then
			bad "${outs[i]} did not finish within $fsx_tmo s (killed; no wrong byte seen before):"
		elif [ $rc -ne 0 ]; then
			bad "${outs[i]} failed:"
		fi
		if [ $rc -ne 0 ]; then
			head -n 80 "$work/${files[i]}.out" >&2
		fi
		echo "  $(tail -n 1 "$work/${files[i]}.out")" >&2
	done
	step "$label: fsx done"

	# The client's close flushed everything (in write-back mode: knfsd's
	# COMMIT, the gateway's fsync): the origin, the gateway and a fresh
	# client mount all hold the bytes fsx checked.
	step "$label: the files at the origin, through the gateway, through a new client mount"
	timeout 60 umount "$c3" || bad "umount $c3"
	nfs_mount "127.0.0.1:$mnt" "$c3" vers=3,nolock || { bad "$label: v3 remount"; return; }
	for f in "${files[@]}"; do
		for where in "$c3" "$mnt"; do
			out=$(timeout 120 cmp "$data/$f" "$where/$f" 2>&1) ||
				bad "$f: $where differs from the origin: $out"
		done
	done
	sanitizer_check "$GW_LOG" || bad "$label: sanitizer report in the gateway's log"
}

fsx_pass through 7411 "$ops"
fsx_pass writeback 7421 "$wb_ops" writeback

step "done"
exit $fail
