#!/bin/bash
# Through an origin whose attributes are rewritten (tests/lib/hostile_proxy.py) to say size 2^64-1 or 2^63 for chosen files: opening a file the mount already read, and stat/open of one it never saw, fail with EOVERFLOW (as stat/open do locally for a size off_t cannot hold) with a log line; the directory still lists, other files read right, and the gateway neither crashes nor trips ASan.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"

sum() { timeout 30 sha256sum <"$1" | cut -d' ' -f1; }

data=$(harness_tmpdir origin-data)
head -c 300000 /dev/urandom >"$data/known.bin"
head -c 300000 /dev/urandom >"$data/fresh.bin"
head -c 300000 /dev/urandom >"$data/other.bin"
test_origin "$data"
sizes=$HARNESS_TMP/sizes
: >"$sizes"
test_proxy hostile_proxy.py --size-file "$sizes"
test_mount

# The mount knows known.bin (looked up, opened, read, cached).
[ "$(sum "$mnt/known.bin")" = "$(sum "$data/known.bin")" ] || bad "known.bin reads wrong before the lie"

# From now on the origin says 2^64-1 for known.bin and 2^63 for fresh.bin.
printf '%s=18446744073709551615\n%s=9223372036854775808\n' \
	"$(stat -c %i "$data/known.bin")" "$(stat -c %i "$data/fresh.bin")" >"$sizes"

cat >"$HARNESS_TMP/try.py" <<-'PY'
	import errno, os, sys
	op, path = sys.argv[1], sys.argv[2]
	try:
	    if op == "stat":
	        os.stat(path)
	    else:
	        fd = os.open(path, os.O_RDONLY)
	        os.read(fd, 4096)
	        os.close(fd)
	    print("ok")
	except OSError as e:
	    print(errno.errorcode[e.errno])
PY
try() { timeout 30 python3 "$HARNESS_TMP/try.py" "$@" 2>&1; }
got=$(try read "$mnt/known.bin")
[ "$got" = EOVERFLOW ] || bad "open+read of known.bin (origin says 2^64-1): '$got', want EOVERFLOW"
got=$(try stat "$mnt/fresh.bin")
[ "$got" = EOVERFLOW ] || bad "stat of fresh.bin (origin says 2^63): '$got', want EOVERFLOW"
got=$(try read "$mnt/fresh.bin")
[ "$got" = EOVERFLOW ] || bad "open+read of fresh.bin (origin says 2^63): '$got', want EOVERFLOW"
pid_alive "$GW_PID" || bad "the gateway died"
grep -q "larger than 2^63-1: attributes refused" "$GW_LOG" || bad "no log line about the refused size"

# The rest of the tree is served as before.
got=$(timeout 30 ls "$mnt" 2>&1 | tr '\n' ' ')
[ "$got" = "fresh.bin known.bin other.bin " ] || bad "listing: '$got', want 'fresh.bin known.bin other.bin '"
[ "$(sum "$mnt/other.bin")" = "$(sum "$data/other.bin")" ] || bad "other.bin reads wrong"

# The origin tells the truth again: known.bin reads right.
: >"$sizes"	# its size changes: the proxy sees it at once
[ "$(sum "$mnt/known.bin")" = "$(sum "$data/known.bin")" ] || bad "known.bin reads wrong once the origin tells the truth"

unmount_gateway "$mnt" || bad "unmount (log: $GW_LOG)"
exit $fail
