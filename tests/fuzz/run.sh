#!/bin/bash
# tests/fuzz/run.sh — build the fuzz targets (a clang ASan+UBSan build
# directory of their own, -Dfuzz=true) and run each: first every input of
# its seed corpus (tests/fuzz/corpus/<target>/), then libFuzzer's own
# mutations until SECONDS have passed in all (the corpus run included).
# Prints one line per target, "PASS fuzz/<target> (...)" or
# "FAIL fuzz/<target> (...)" followed by the end of its log, as tools/test
# reports them; exit 0 if every target passed.
#
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS]     (build-fuzz, 7)
#
# New inputs libFuzzer finds go to a scratch corpus, not to the committed
# one; a crash leaves its input in LOGDIR (BUILD_DIR/fuzz-logs) as
# crash-<sha1> (or leak-, timeout-, oom-): replay it with
# BUILD_DIR/tests/fuzz/<target> FILE, add it to the corpus as a regression
# seed once it is fixed. CACHEGW_FUZZ_TARGETS runs only those named;
# CACHEGW_FUZZ_ARGS adds libFuzzer options.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${1:-build-fuzz}
SECS=${2:-7}
LOGDIR=$BUILD/fuzz-logs
ALL="fuzz_nodes_log fuzz_md_log fuzz_cache_conf fuzz_cache_meta fuzz_origin_root fuzz_silly_names fuzz_handle_key"
TARGETS=${CACHEGW_FUZZ_TARGETS:-$ALL}

# Largest input per target: a few dozen records of the logs, an object's
# header, presence page and a few blocks' checksums.
max_len() {
	case $1 in
	fuzz_nodes_log | fuzz_md_log | fuzz_cache_meta) echo 8192 ;;
	*) echo 2048 ;;
	esac
}

if ! command -v clang >/dev/null 2>&1; then
	echo "SKIP fuzz (no clang: apt-get install clang libclang-rt-14-dev)"
	exit 0
fi
mkdir -p "$BUILD" || exit 1
blog=$BUILD/fuzz-build.log
{
	if [ ! -f "$BUILD/build.ninja" ]; then
		CC=clang meson setup "$BUILD" -Dfuzz=true -Dtests=false \
			-Db_sanitize=address,undefined -Db_lundef=false
	fi &&
		meson compile -C "$BUILD" $TARGETS
} >"$blog" 2>&1
if [ $? -ne 0 ]; then
	echo "FAIL fuzz (build: $blog)"
	tail -n 30 "$blog" | sed 's/^/    | /'
	exit 1
fi
mkdir -p "$LOGDIR" || exit 1
# The targets write, fsync and rename their files at every input: on
# tmpfs when there is one (the disk would set the pace).
SCRATCH=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && SCRATCH=/dev/shm

rc=0
for t in $TARGETS; do
	log=$LOGDIR/$t.log
	scratch=$(mktemp -d "$SCRATCH/cachegw-fuzz-$t.XXXXXX") || exit 1
	rm -f "$LOGDIR/$t".crash-* "$LOGDIR/$t".leak-* "$LOGDIR/$t".timeout-* \
		"$LOGDIR/$t".oom-* "$LOGDIR/$t".slow-unit-* 2>/dev/null
	# The targets make their scratch cache directories under TMPDIR.
	TMPDIR=$scratch \
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$BUILD/tests/fuzz/$t" "$scratch" "$ROOT/tests/fuzz/corpus/$t" \
		-max_total_time="$SECS" -max_len="$(max_len "$t")" \
		-timeout=20 -rss_limit_mb=2048 -close_fd_mask=2 -print_final_stats=1 \
		-artifact_prefix="$LOGDIR/$t." ${CACHEGW_FUZZ_ARGS:-} \
		</dev/null >"$log" 2>&1
	st=$?
	rm -rf --one-file-system "$scratch"
	runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
	cov=$(grep -aoE '(DONE|INITED|pulse|NEW|REDUCE) *cov: [0-9]+' "$log" | grep -o '[0-9]*$' | tail -n 1)
	seeds=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
	note="$seeds seeds, ${runs:-?} runs, cov ${cov:-?}, ${SECS} s"
	if [ $st -eq 0 ] && ! grep -aq 'ERROR: libFuzzer\|ERROR: AddressSanitizer\|runtime error:' "$log"; then
		echo "PASS fuzz/$t ($note)"
	else
		echo "FAIL fuzz/$t ($note; exit $st; input: $(ls "$LOGDIR/$t".* 2>/dev/null | grep -v '\.log$' | head -n 1))"
		grep -a -A 30 'ERROR: \|runtime error:\|SUMMARY: \|check failed' "$log" | head -n 40 | sed 's/^/    | /'
		rc=1
	fi
done
exit $rc
