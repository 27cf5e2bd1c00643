# shellcheck shell=bash
# tools/lib/deps.sh — Debian 12 packages cachegw needs to build, test,
# package (debian/: dpkg-buildpackage, debhelper) and demo; installs the
# missing ones with apt-get (as root).  Sourced by tools/test and tools/demo.

CACHEGW_DEPS=(
	build-essential pkg-config meson ninja-build
	libfuse3-dev fuse3 libnfs-dev libnfs-utils liburing-dev libxxhash-dev
	libpq-dev postgresql-15
	nfs-ganesha nfs-ganesha-vfs rpcbind nfs-common
	fio e2fsprogs util-linux gnuplot-nox clang libclang-rt-14-dev
	curl prometheus
	debhelper dpkg-dev man-db jq strace btrfs-progs
	# gdb: backtraces of a hung gateway (tests/lib/test.sh, the watchdog)
	gdb
)

# Print the packages of "$@" (default: CACHEGW_DEPS) that are not installed.
deps_missing() {
	local p
	[ $# -gt 0 ] || set -- "${CACHEGW_DEPS[@]}"
	for p in "$@"; do
		if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
			printf '%s\n' "$p"
		fi
	done
}

# Install whatever is missing; quiet when nothing is.  Returns non-zero if
# packages are missing and cannot be installed.
deps_ensure() {
	local missing
	if ! command -v dpkg-query >/dev/null 2>&1; then
		echo "deps: not a Debian system (no dpkg-query); install the equivalents of: ${CACHEGW_DEPS[*]}" >&2
		return 1
	fi
	mapfile -t missing < <(deps_missing "$@")
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing packages (run as root to install): ${missing[*]}" >&2
		return 1
	fi
	echo "Installing missing packages: ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get update -q >/dev/null; then
		echo "deps: apt-get update failed" >&2
		return 1
	fi
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null >&2; then
		echo "deps: apt-get install failed" >&2
		return 1
	fi
	mapfile -t missing < <(deps_missing "$@")
	if [ ${#missing[@]} -gt 0 ]; then
		echo "deps: still missing after install: ${missing[*]}" >&2
		return 1
	fi
}
