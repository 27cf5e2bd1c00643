/* nodes_helpers.h - shared helpers of the nodes/ unit tests: opening the
 * node-id table and its per-node records, the test ending (exit 1) with a
 * message if that fails; checks and temp dirs from check.h. */
#ifndef CACHEGW_NODES_HELPERS_H
#define CACHEGW_NODES_HELPERS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nodes.h"

/* t_nodes_open: the node-id table in dir (read-only if ro). */
static inline struct nodes *t_nodes_open(const char *dir, bool ro)
{
	struct nodes *t;
	char err[256] = "";
	int ret = nodes_open(dir, ro, &t, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "nodes_open: %d: %s\n", ret, err);
		exit(1);
	}
	return t;
}

/* t_nodes_md_open: the per-node records (md.log) in dir, of table
 * generation gen. */
static inline struct nodes_md *t_nodes_md_open(const char *dir, uint32_t gen)
{
	struct nodes_md *m;
	char err[256] = "";
	int ret = nodes_md_open(dir, gen, &m, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "nodes_md_open: %d: %s\n", ret, err);
		exit(1);
	}
	return m;
}

/* t_nodes_check_found: handle h (len bytes), for which nodes_find gave ret
 * and id, is in the table as want_id, and want_id maps back to h with
 * parent want_parent. */
static inline void t_nodes_check_found(struct nodes *t, const uint8_t *h,
				       size_t len, int ret, uint64_t id,
				       uint64_t want_id, uint64_t want_parent)
{
	uint8_t back[NODES_HANDLE_MAX];
	size_t blen = sizeof(back);
	uint64_t parent = 0;

	CHECK_EQ(ret, 0);
	CHECK_EQ(id, want_id);
	CHECK_EQ(nodes_get(t, id, back, &blen, &parent, NULL), 0);
	CHECK_EQ(blen, len);
	CHECK(!memcmp(back, h, len));
	CHECK_EQ(parent, want_parent);
}

#endif
