/* nodes_limit_test: a node-id table whose records name the last id there
 * is (2^62 - 1: a damaged file, or every id used) opens, keeps its
 * entries, refuses a new one with ENOSPC (the documented answer at a
 * limit) instead of handing out an id past the last, and opens again
 * after any number of restarts (an id counter at the limit is not a
 * damaged header). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "nodes_helpers.h"
#include "nodes_i.h"

static void check_find(struct nodes *t, const char *h, uint64_t want)
{
	uint64_t id = 0;

	CHECK_EQ(nodes_find(t, h, strlen(h), &id, NULL), 0);
	CHECK_EQ(id, want);
}

int main(void)
{
	const char *dir = t_tmpdir();
	uint8_t rec[REC_MAX];
	struct nodes_stats st;
	struct nodes *t;
	uint64_t id;
	size_t len;
	int fd;

	/* 1. A table with one entry; then a record of the last id, sealed
	 * as the table seals its records (a bug, or a hand, wrote it). */
	t = t_nodes_open(dir, false);
	CHECK_EQ(nodes_add(t, "a", 1, 1, &id, NULL), 1);
	CHECK_EQ(id, NODES_FIRST_ID);
	nodes_stats(t, &st);
	nodes_close(t);
	len = nlog_rec_encode(rec, st.generation, REC_ADD, NODES_ID_LIMIT - 1,
			      1, "b", 1);
	fd = open(t_path(NODES_FILE), O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, rec, len), (ssize_t)len);
	close(fd);

	/* 2. Both entries; no id left for a new one. */
	for (int round = 0; round < 3; round++) {
		t = t_nodes_open(dir, false);
		check_find(t, "a", NODES_FIRST_ID);
		check_find(t, "b", NODES_ID_LIMIT - 1);
		nodes_stats(t, &st);
		CHECK_EQ(st.next_id, NODES_ID_LIMIT);
		/* Before a create: no room (the origin is not asked to
		 * make a file the table could not name). */
		CHECK_EQ(nodes_room(t), -ENOSPC);
		CHECK_EQ(nodes_add(t, "c", 1, 1, &id, NULL), -ENOSPC);
		CHECK_EQ(nodes_find(t, "c", 1, &id, NULL), -ENOENT);
		CHECK_EQ(nodes_set_parent(t, NODES_FIRST_ID, 9), 0);
		nodes_close(t);
		/* 3. Read-only too, as cachegw-inspect opens it. */
		t = t_nodes_open(dir, true);
		check_find(t, "b", NODES_ID_LIMIT - 1);
		nodes_close(t);
	}
	printf("nodes_limit_test: ok\n");
	return 0;
}
