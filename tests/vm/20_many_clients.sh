#!/bin/bash
# Guest test: 16 kernel NFS client mounts (nosharecache: 8 over v3, 8 over v4.2) of one knfsd re-export of one cachegw mount, 2 reader processes on each (1 in the second round), read the same files and files of their own at the same time, cold and then from the gateway's disk cache: every byte equals the origin's, the origin is read about once (not once per client), cache hits move, and the gateway's peak RSS grows by less than the bound below.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
vm_test_start

MOUNTS=16
PROCS=2			# reader processes per mount
# With an ASan build, its quarantine of freed memory (256 MiB by default) would read as
# growth; keep it small so that RSS reflects what the gateway holds (as in
# tests/integration/41_reexport_many.sh).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"

# The origin: shared/ (every reader reads all of it) and own/mNN/ (only
# mount NN's readers read it). Sizes around the 64 KiB cache block and
# the clients' 1 MiB rsize.
data=$(harness_tmpdir origin-data)
(
	set -e
	cd "$data"
	mkdir shared own
	i=0
	for s in 1 4095 65535 65536 65537 200000 $((1048576 - 1)) $((1048576 + 3)) $((1536 * 1024 + 17)); do
		head -c "$s" /dev/urandom >"shared/s$i"
		i=$((i + 1))
	done
	: >shared/empty
	for ((m = 0; m < MOUNTS; m++)); do
		printf -v d 'own/m%02d' "$m"
		mkdir "$d"
		head -c $((m * 4099 + 1)) /dev/urandom >"$d/a"
		head -c $((131072 + m * 8191)) /dev/urandom >"$d/b"
	done
) || { echo "cannot make the origin's files" >&2; exit 1; }
unique=$(find "$data" -type f -printf '%s\n' | awk '{ n += $1 } END { print n }')
shared_bytes=$(find "$data/shared" -type f -printf '%s\n' | awk '{ n += $1 } END { print n }')

origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
mnt=$(harness_tmpdir mnt)
cdir=$(harness_tmpdir cache)
mount_gateway "$ORIGIN_URL" "$mnt" "cache_dir=$cdir,allow_other" || exit 1

step "knfsd exports the gateway mount; $MOUNTS client mounts"
# As doc/reexport.md says: no delegations through a re-export.
echo 0 >/proc/sys/fs/leases-enable
knfsd_reexport "$mnt" 7321 || exit 1
# All at once, and without mount.nfs (-i: the kernel makes the MOUNT call
# itself): a process costs about a second under TCG.
clients=() mpids=()
for ((m = 0; m < MOUNTS; m++)); do
	printf -v c '%s/c%02d' "$HARNESS_TMP" "$m"
	clients+=("$c")
done
mkdir -p "${clients[@]}"
for ((m = 0; m < MOUNTS; m++)); do
	if ((m % 2 == 0)); then
		timeout 120 mount -i -t nfs -o vers=3,nolock,hard,nosharecache,addr=127.0.0.1 \
			"127.0.0.1:$mnt" "${clients[m]}" &
	else
		timeout 120 mount -i -t nfs -o vers=4.2,hard,nosharecache,addr=127.0.0.1,clientaddr=127.0.0.1 \
			127.0.0.1:/export "${clients[m]}" &
	fi
	mpids+=($!)
done
for p in "${mpids[@]}"; do wait "$p"; done
for c in "${clients[@]}"; do
	is_mounted "$c" || { bad "mount of $c failed"; exit 1; }
	_VM_NFS_MOUNTS+=("$c")
done
# 16 superblocks, not one shared: each mount is its own client cache.
n=$(awk -v d="$HARNESS_TMP/c" 'index($5, d) == 1 { print $3 }' /proc/self/mountinfo | sort -u | wc -l)
[ "$n" = "$MOUNTS" ] || bad "the $MOUNTS client mounts have $n distinct devices (nosharecache ignored?)"
# The shared files' names once (and the gateway's root) before the
# baseline: start-up and the first LOOKUPs are not growth under load.
ls "${clients[0]}/shared" >/dev/null
hwm0=$(vm_proc_kb "$GW_PID" VmHWM)
origin0=$(gw_metric "$cdir" origin_read_bytes_total)
info "gateway VmHWM before the readers: $hwm0 kB; origin data: $unique bytes ($shared_bytes shared)"

# One python process forks MOUNTS*PROCS readers (a fork costs far less than
# an exec under TCG). Reader (m, p) reads every shared file and mount m's
# own files, in an order of its own, 64 KiB at a time, and compares each
# file's sha256 with the origin's. All start together. Prints one line per
# bad file and "reads N" with the number of files read.
readers() { # ROUND PROCS
	timeout 400 python3 - "$data" "$1" "$2" "$mnt" "${clients[@]}" <<-'PY'
	import hashlib, os, sys
	data, rnd, procs, gw, mounts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
	def sha(p):
	    h = hashlib.sha256()
	    with open(p, "rb") as f:
	        while True:
	            b = f.read(65536)
	            if not b:
	                return h.hexdigest()
	            h.update(b)
	shared = sorted("shared/" + n for n in os.listdir(os.path.join(data, "shared")))
	want = {}
	for m in range(len(mounts)):
	    own = "own/m%02d" % m
	    for n in os.listdir(os.path.join(data, own)):
	        want[own + "/" + n] = None
	for f in shared:
	    want[f] = None
	for f in want:
	    want[f] = sha(os.path.join(data, f))
	if rnd > 1:
	    # Drop the pages of every file, on the gateway mount (knfsd reads
	    # through it) and in every client mount, so that the gateway has
	    # to serve all of it again.
	    for top in [gw] + mounts:
	        for f in want:
	            fd = os.open(os.path.join(top, f), os.O_RDONLY)
	            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
	            os.close(fd)
	go_r, go_w = os.pipe()
	res_r, res_w = os.pipe()
	kids = []
	for m, mnt in enumerate(mounts):
	    own = sorted(f for f in want if f.startswith("own/m%02d/" % m))
	    for p in range(procs):
	        pid = os.fork()
	        if pid == 0:
	            os.close(go_w)
	            os.close(res_r)
	            files = shared + own
	            k = (m * procs + p + rnd) % len(files)
	            files = files[k:] + files[:k]
	            if p % 2:
	                files.reverse()
	            os.read(go_r, 1)            # wait for the start
	            out = []
	            for f in files:
	                try:
	                    got = sha(os.path.join(mnt, f))
	                except OSError as e:
	                    got = "error " + (e.strerror or str(e))
	                if got != want[f]:
	                    out.append("BAD mount %d (%s) reader %d: %s: %s\n" % (m, mnt, p, f, got))
	            out.append("reads %d\n" % len(files))
	            os.write(res_w, "".join(out).encode())
	            os._exit(0)
	        kids.append(pid)
	os.close(res_w)
	os.close(go_r)
	os.close(go_w)                      # all readers start now
	out = b""
	while True:
	    b = os.read(res_r, 65536)
	    if not b:
	        break
	    out += b
	st = 0
	for pid in kids:
	    _, s = os.waitpid(pid, 0)
	    if s:
	        st = 1
	        print("BAD reader pid %d exited with status %d" % (pid, s))
	sys.stdout.write(out.decode())
	sys.exit(st)
	PY
}

check_round() { # ROUND OUTPUT-FILE PROCS
	local nbad reads
	nbad=$(grep -c '^BAD' "$2")
	reads=$(awk '$1 == "reads" { n += $2 } END { print n + 0 }' "$2")
	want=$((MOUNTS * $3 * ($(ls "$data/shared" | wc -l) + 2)))
	info "round $1: $reads files read by $((MOUNTS * $3)) readers, $nbad wrong"
	[ "$nbad" = 0 ] || bad "round $1: $nbad files read wrong or failed: $(grep -m 5 '^BAD' "$2")"
	[ "$reads" = "$want" ] || bad "round $1: $reads files read, want $want"
}

step "round 1: $((MOUNTS * PROCS)) readers, cold gateway cache"
readers 1 "$PROCS" >"$HARNESS_TMP/round1" 2>&1 || bad "round 1: the readers failed: $(grep -v '^reads' "$HARNESS_TMP/round1" | head -n 5)"
check_round 1 "$HARNESS_TMP/round1" "$PROCS"
pid_alive "$GW_PID" || { bad "the gateway died in round 1: $(tail -n 20 "$GW_LOG")"; exit 1; }
origin1=$(gw_metric "$cdir" origin_read_bytes_total)
hit1=$(gw_metric "$cdir" cache_hit_bytes_total)
fetched=$((origin1 - origin0))
info "round 1: the gateway read $fetched bytes from the origin"
# Every byte was read from the origin at least once, and not once per
# client: concurrent misses of a block wait for one fetch, and knfsd reads
# through the FUSE mount's one page cache. (Twice the data allows for a
# block fetched again after the kernel dropped its pages.)
[ "$fetched" -ge "$unique" ] || bad "round 1: only $fetched bytes read from the origin, less than the $unique bytes served"
[ "$fetched" -le $((2 * unique)) ] || bad "round 1: $fetched bytes read from the origin for $unique bytes of files: fetched per client?"

# Round 2 with one reader per mount (16 clients still; the round took 70 s
# of the suite's critical path with two).
step "round 2: the pages dropped (fadvise), the gateway serves its disk cache; $MOUNTS readers"
readers 2 1 >"$HARNESS_TMP/round2" 2>&1 || bad "round 2: the readers failed: $(grep -v '^reads' "$HARNESS_TMP/round2" | head -n 5)"
check_round 2 "$HARNESS_TMP/round2" 1
pid_alive "$GW_PID" || { bad "the gateway died in round 2: $(tail -n 20 "$GW_LOG")"; exit 1; }
origin2=$(gw_metric "$cdir" origin_read_bytes_total)
hit2=$(gw_metric "$cdir" cache_hit_bytes_total)
info "round 2: $((hit2 - hit1)) bytes from the disk cache, $((origin2 - origin1)) from the origin"
[ $((hit2 - hit1)) -ge "$unique" ] || bad "round 2: only $((hit2 - hit1)) bytes of cache hits for $unique bytes of files"
[ $((origin2 - origin1)) -le $((unique / 4)) ] || bad "round 2: $((origin2 - origin1)) bytes read from the origin again"

# The bound: the gateway keeps no state per NFS client (knfsd is its only
# FUSE client), so its peak RSS under 32 readers on 16 mounts may grow by
# what it can hold at once: the data set itself (7.3 MiB), the data
# buffers of the reads in flight (8 nfsd threads, 1 MiB each, plus the
# kernel's FUSE readahead), ASan's 16 MiB quarantine, allocator slack.
# 64 MiB covers all of it; a gateway that buffered per client (16 x the
# data) or leaked per request (several thousand FUSE reads) would not fit.
hwm1=$(vm_proc_kb "$GW_PID" VmHWM)
info "gateway VmHWM: $hwm0 kB before, $hwm1 kB after ($(((hwm1 - hwm0) / 1024)) MiB more; bound 64 MiB)"
[ -n "$hwm1" ] && [ $((hwm1 - hwm0)) -le $((64 * 1024)) ] ||
	bad "the gateway's peak RSS grew by $(((hwm1 - hwm0) / 1024)) MiB under the readers (bound 64 MiB)"

step "unmount"
timeout 120 umount -i "${clients[@]}" || bad "umount of the client mounts failed"
_VM_NFS_MOUNTS=()
exportfs -ua
timeout 30 rpc.nfsd 0
umount -l "${_VM_BINDS[@]}" 2>/dev/null
_VM_BINDS=()
unmount_gateway "$mnt" || bad "the gateway did not stop cleanly (log: $GW_LOG)"
step "done"
exit $fail
