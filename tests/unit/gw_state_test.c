/* gw_state_test: the takeover state across versions
 * (daemon/takeover/takeover_state.c, gateway/gw_state.h): the layout of
 * state version 2 (as released, x86_64) is the start of this one's; a
 * version 2 state handed over is converted (grown by the lock records,
 * none taken, every record and intent kept) and then opens as this
 * version's; a state of another size or version is not converted, and an
 * unconverted one does not open. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "gw_state.h"
#include "takeover_i.h"

/* A state as a process of version ver made it, of size bytes. */
static int state_of(uint32_t ver, size_t size)
{
	struct gw_state *st;
	int fd = memfd_create("gw_state_test", MFD_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	st = mmap(NULL, GW_STATE_LOCKS_OFF, PROT_READ | PROT_WRITE,
		  MAP_SHARED, fd, 0);
	CHECK(st != MAP_FAILED);
	st->magic = GW_STATE_MAGIC;
	st->version = ver;
	st->init_len = 40;
	st->negotiated = 1;
	st->generation = 7;
	st->intents[3].key = 0x1234;
	st->recs[5].id = 77;
	st->recs[GW_STATE_SLOTS - 1].id = 78;
	munmap(st, GW_STATE_LOCKS_OFF);
	return fd;
}

int main(void)
{
	char err[256];
	struct stat sb;
	uint32_t i;
	int fd;

	/* 1. Version 2's layout, as its binaries have it. */
#if defined(__x86_64__)
	CHECK_EQ(offsetof(struct gw_state, intents), 616);
	CHECK_EQ(offsetof(struct gw_state, recs), 12904);
	CHECK_EQ(sizeof(struct gw_hrec), 120);
	CHECK_EQ(GW_STATE_SIZE_PREV, 503329384);
#endif
	CHECK(GW_STATE_SIZE > GW_STATE_SIZE_PREV);

	/* 2. Converted: this version's, with what version 2 kept. */
	fd = state_of(GW_STATE_VERSION_PREV, GW_STATE_SIZE_PREV);
	CHECK_EQ(gw_state_open(fd, err, sizeof(err)), -EINVAL);
	CHECK_EQ(gw_state_upgrade(fd, err, sizeof(err)), 0);
	CHECK_EQ(fstat(fd, &sb), 0);
	CHECK_EQ(sb.st_size, GW_STATE_SIZE);
	CHECK_EQ(gw_state_open(fd, err, sizeof(err)), 0);
	CHECK_EQ(gw_state->version, GW_STATE_VERSION);
	CHECK_EQ(gw_state->generation, 7);
	CHECK_EQ(gw_state->intents[3].key, 0x1234);
	CHECK_EQ(gw_state->recs[5].id, 77);
	CHECK_EQ(gw_state->recs[GW_STATE_SLOTS - 1].id, 78);
	for (i = 0; i < GW_STATE_LOCKS; i++)
		CHECK_EQ(gw_state_locks(gw_state)[i].nodeid, 0);
	/* Converted once: not again. */
	CHECK_EQ(gw_state_upgrade(fd, err, sizeof(err)), -EINVAL);
	gw_state_close();

	/* 3. Not converted: another version in version 2's size, or this
	 * version's size. */
	fd = state_of(1, GW_STATE_SIZE_PREV);
	CHECK_EQ(gw_state_upgrade(fd, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "version") != NULL);
	close(fd);
	fd = state_of(GW_STATE_VERSION, GW_STATE_SIZE);
	CHECK_EQ(gw_state_upgrade(fd, err, sizeof(err)), -EINVAL);
	CHECK_EQ(fstat(fd, &sb), 0);
	CHECK_EQ(sb.st_size, GW_STATE_SIZE);
	close(fd);
	return 0;
}
