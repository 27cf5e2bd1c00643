# shellcheck shell=bash
# tests/lib/locks.sh — what the lock tests (53, 106, 110) share; sourced
# after tests/lib/test.sh. L is tests/lib/locker.py.
#
#   try MNT KIND TYPE START LEN FILE    a lock taken without waiting (then
#                                       let go): ok or the errno's name
#   getlk MNT KIND TYPE START LEN FILE  F_GETLK: "unlocked" or "r|w START LEN"
#   until_in FILE WORD                  wait (30 s) for WORD on a line of FILE
L=$(dirname "${BASH_SOURCE[0]}")/locker.py

try() {
	MODE=try timeout 60 "$PY" "$L" "$2" "$3" "$4" "$5" "$1/$6" 2>&1
}
getlk() {
	MODE=getlk timeout 60 "$PY" "$L" "$2" "$3" "$4" "$5" "$1/$6" 2>&1
}
until_in() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -qx "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
