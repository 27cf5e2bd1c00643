/* takeover_state.c - the takeover state (gateway/gw_state.h): the memfd the
 * first process makes and maps, mapped again by each successor it is
 * passed to, and its descriptor, passed on at a handover. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "takeover_i.h"
#include "gw_state.h"

static int state_fd = -1;

int gw_state_create(void)
{
	struct gw_state *st;
	int fd = memfd_create("cachegw-state", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)GW_STATE_SIZE) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	st = mmap(NULL, GW_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		  0);
	if (st == MAP_FAILED) {
		int e = errno;

		close(fd);
		return -e;
	}
	st->magic = GW_STATE_MAGIC;
	st->version = GW_STATE_VERSION;
	gw_state = st;
	state_fd = fd;
	return 0;
}

int gw_state_open(int fd, char *err, size_t len)
{
	struct gw_state *st;
	struct stat sb;

	if (fstat(fd, &sb) < 0)
		sb.st_size = 0;
	if ((size_t)sb.st_size != GW_STATE_SIZE) {
		snprintf(err, len, "the takeover state passed is not of this "
			 "version (%lld bytes, %zu expected)",
			 (long long)sb.st_size, GW_STATE_SIZE);
		return -EINVAL;
	}
	st = mmap(NULL, GW_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		  0);
	if (st == MAP_FAILED) {
		snprintf(err, len, "cannot map the takeover state: %s",
			 strerror(errno));
		return -errno;
	}
	if (st->magic != GW_STATE_MAGIC || st->version != GW_STATE_VERSION ||
	    !st->negotiated || !st->init_len ||
	    st->init_len > GW_STATE_INIT_MAX) {
		snprintf(err, len, "the takeover state passed is damaged or of "
			 "another version (%u, this is %u)", st->version,
			 GW_STATE_VERSION);
		munmap(st, GW_STATE_SIZE);
		return -EINVAL;
	}
	gw_state = st;
	state_fd = fd;
	return 0;
}

int gw_state_upgrade(int fd, char *err, size_t len)
{
	struct gw_state *st;
	struct stat sb;
	int ret = 0;

	if (fstat(fd, &sb) < 0)
		sb.st_size = 0;
	if ((size_t)sb.st_size != GW_STATE_SIZE_PREV) {
		snprintf(err, len, "the takeover state passed is not of state "
			 "version %u (%lld bytes, %zu expected)",
			 GW_STATE_VERSION_PREV, (long long)sb.st_size,
			 GW_STATE_SIZE_PREV);
		return -EINVAL;
	}
	/* Grown from exactly the old size: the lock records read as zeros
	 * (no lock owners), and stay unallocated until written. */
	if (ftruncate(fd, (off_t)GW_STATE_SIZE) < 0) {
		ret = -errno;
		snprintf(err, len, "cannot grow the takeover state to version "
			 "%u: %s", GW_STATE_VERSION, strerror(errno));
		return ret;
	}
	/* The fixed part only: the records are not touched. */
	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		  0);
	if (st == MAP_FAILED) {
		ret = -errno;
		snprintf(err, len, "cannot map the takeover state: %s",
			 strerror(errno));
		return ret;
	}
	if (st->magic != GW_STATE_MAGIC ||
	    st->version != GW_STATE_VERSION_PREV) {
		snprintf(err, len, "the takeover state passed is damaged or of "
			 "another version (%u, %u expected)", st->version,
			 GW_STATE_VERSION_PREV);
		ret = -EINVAL;
	} else
		st->version = GW_STATE_VERSION;
	munmap(st, sizeof(*st));
	return ret;
}

int gw_state_fd(void)
{
	return state_fd;
}

void gw_state_close(void)
{
	if (gw_state)
		munmap(gw_state, GW_STATE_SIZE);
	gw_state = NULL;
	if (state_fd >= 0)
		close(state_fd);
	state_fd = -1;
}
