#!/bin/bash
# tests/vm/run.sh — inside the guest (tools/vm run tests/vm/run.sh): run
# every tests/vm/[0-9]*.sh (or those named) against $CACHEGW, one line each
# "VMTEST PASS|FAIL|SKIP NAME (N s)", the log's tail after a failure.
# Exit status: 0 if none failed.
cd "$(dirname "$0")/../.." || exit 2
timeout_s=${CACHEGW_VM_TEST_TIMEOUT:-900}
failed=0
if [ $# -gt 0 ]; then
	tests=("$@")
else
	tests=(tests/vm/[0-9]*.sh)
fi
for t in "${tests[@]}"; do
	name=$(basename "$t" .sh)
	log=/tmp/vmtest-$name.log
	start=$SECONDS
	timeout -k 10 "$timeout_s" bash "$t" </dev/null >"$log" 2>&1
	rc=$?
	case $rc in
	0) st=PASS ;;
	77) st=SKIP ;;
	*) st=FAIL failed=1 ;;
	esac
	echo "VMTEST $st $name ($((SECONDS - start)) s${rc:+, exit $rc})"
	if [ $st = FAIL ]; then
		tail -n 40 "$log" | sed 's/^/    | /'
	else
		grep -E '^(---|  |ANCHOR )' "$log" | sed 's/^/    /'
	fi
done
exit $failed
