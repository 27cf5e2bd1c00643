/* nodes_fault_test: after a failed write or fdatasync the node-id table reports the real errno (never ENOMEM), recovers once the fault is gone, and a reopen shows every mapping that succeeded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodes_helpers.h"

#define H 64			/* handles */

static uint64_t ids[H];		/* id of handle i, 0: not in the table */
static uint64_t parents[H];
static uint64_t max_seen;

static size_t mk(uint32_t i, uint8_t *h)
{
	size_t len = 8 + i % 40;

	memset(h, 0xc5, len);
	memcpy(h, &i, 4);
	return len;
}

/* Add handle i; expect the result want (1 added, or -errno). */
static void add(struct nodes *t, uint32_t i, int want)
{
	uint8_t h[NODES_HANDLE_MAX];
	size_t len = mk(i, h);
	uint64_t id = 0;
	int ret = nodes_add(t, h, len, 100 + i, &id, NULL);

	if (ret != want)
		fprintf(stderr, "add(%u): %d (%s), expected %d\n", i, ret,
			strerror(ret < 0 ? -ret : 0), want);
	CHECK(ret != -ENOMEM);
	CHECK_EQ(ret, want);
	if (ret == 1) {
		CHECK(id > max_seen);	/* never an id handed out before */
		max_seen = id;
		ids[i] = id;
		parents[i] = 100 + i;
	}
}

static void verify(struct nodes *t)
{
	for (uint32_t i = 0; i < H; i++) {
		uint8_t h[NODES_HANDLE_MAX];
		size_t len = mk(i, h);
		uint64_t id = 0;
		int ret = nodes_find(t, h, len, &id, NULL);

		if (!ids[i]) {
			CHECK_EQ(ret, -ENOENT);
			continue;
		}
		t_nodes_check_found(t, h, len, ret, id, ids[i], parents[i]);
	}
}

static struct nodes *topen(const char *dir)
{
	return t_nodes_open(dir, false);
}

int main(void)
{
	const char *dir = t_tmpdir();
	struct nodes *t = topen(dir);
	struct nodes_stats st;

	/* 1. A failed write: that add fails with EIO, the next one works. */
	nodes_inject_error(t, EIO, 1);
	add(t, 0, -EIO);
	add(t, 0, 1);
	add(t, 1, 1);

	/* 2. A failed fdatasync: after it the table used to refuse every
	 *    change until restart. It must rewrite itself and go on. */
	nodes_inject_error(t, EIO, 1);
	CHECK_EQ(nodes_sync(t), -EIO);
	add(t, 2, 1);
	add(t, 3, 1);
	CHECK_EQ(nodes_set_parent(t, ids[1], 7), 0);
	parents[1] = 7;
	CHECK_EQ(nodes_sync(t), 0);
	verify(t);

	/* 3. The disk stays bad (ENOSPC) for a while: every change fails
	 *    with ENOSPC, nothing is lost, nothing half-added. */
	nodes_inject_error(t, EIO, 1);
	CHECK_EQ(nodes_sync(t), -EIO);
	nodes_inject_error(t, ENOSPC, -1);
	add(t, 4, -ENOSPC);
	add(t, 5, -ENOSPC);
	CHECK_EQ(nodes_remove(t, ids[2]), -ENOSPC);
	CHECK_EQ(nodes_set_parent(t, ids[3], 9), -ENOSPC);
	CHECK_EQ(nodes_sync(t), -ENOSPC);
	verify(t);
	/* The disk is back: the next change recovers the table. */
	nodes_inject_error(t, 0, 0);
	add(t, 4, 1);
	CHECK_EQ(nodes_remove(t, ids[2]), 0);
	ids[2] = 0;
	for (uint32_t i = 10; i < H; i++)
		add(t, i, 1);
	CHECK_EQ(nodes_sync(t), 0);
	verify(t);

	/* 4. A fdatasync that fails at the first add of a batch (the id
	 *    reservation): that add fails with EIO, the next one works. */
	nodes_stats(t, &st);
	nodes_close(t);
	t = topen(dir);
	verify(t);
	nodes_inject_sync_error(t, EIO, 1);
	add(t, 6, -EIO);
	add(t, 6, 1);
	add(t, 7, 1);

	/* 5. A failed fdatasync at close: the reopened table still has
	 *    every mapping that was added. */
	nodes_inject_sync_error(t, EIO, 1);
	CHECK_EQ(nodes_sync(t), -EIO);
	add(t, 8, 1);
	nodes_close(t);
	t = topen(dir);
	verify(t);
	nodes_stats(t, &st);
	CHECK(st.next_id > max_seen);
	add(t, 9, 1);
	nodes_close(t);
	return 0;
}
