#!/bin/bash
# nfsclient/ on its own against a real origin: tests/unit/nfsc_origin_test (C, no mocks) refuses bad URLs and exports with a reason, round-trips LOOKUP, GETATTR, CREATE, WRITE+COMMIT, READ, READDIRPLUS, SETATTR, ACCESS and REMOVE with bytes and names checked in the export's directory, maps errors to errno (ENOENT, EEXIST, ESTALE, EACCES) and counts calls by procedure.
set -uo pipefail
. "$(dirname "$0")/../lib/test.sh"
bin=$(dirname "$CACHEGW")/../tests/unit/nfsc_origin_test
[ -x "$bin" ] || { echo "SKIP: $bin not built" >&2; exit 77; }
data=$(harness_tmpdir origin-data)
chmod 0777 "$data"
origin_start origin "$data" "$ORIGIN_NFS_PORT" "$ORIGIN_MNT_PORT" || exit 1
CACHEGW_TEST_ORIGIN_URL=$ORIGIN_URL CACHEGW_TEST_ORIGIN_DIR=$data "$bin" || bad "nfsc_origin_test: exit $?"
exit $fail
