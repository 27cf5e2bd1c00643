/* nodes_md_test: the per-node records (md.log) come back after a reopen
 * with their fetch times, replace one another by (node, kind, key), are
 * forgotten with their node, survive a torn tail, never come from another
 * table's file, stay bounded on disk under rewrites (which no put waits
 * for, and which keep what was put meanwhile) and in number. */
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>

#include "nodes_helpers.h"

#define NN 1000

static const char *dir;

static struct nodes_md *mopen(uint32_t gen)
{
	return t_nodes_md_open(dir, gen);
}

static void blob_of(uint64_t id, uint64_t key, uint8_t *b, size_t *len)
{
	*len = (size_t)(id % 90) + 1;
	for (size_t i = 0; i < *len; i++)
		b[i] = (uint8_t)(id * 31 + key * 7 + i);
}

/* Node id has ATTR (kind 1, key 0) and ACCESS (kind 2) keys 1, 2. */
static void put_node(struct nodes_md *m, uint64_t id, uint64_t salt)
{
	uint8_t b[NODES_MD_BLOB_MAX];
	size_t len;

	for (uint64_t key = 0; key < 3; key++) {
		blob_of(id + salt, key, b, &len);
		CHECK_EQ(nodes_md_put(m, id, key ? 2 : 1, key, id * 1000 + key,
				      b, len), 0);
	}
}

static void check_node(struct nodes_md *m, uint64_t id, uint64_t salt,
		       bool present)
{
	struct nodes_md_rec r[8];
	size_t n = nodes_md_get(m, id, r, 8);
	bool seen[3] = { false, false, false };

	if (!present) {
		CHECK_EQ(n, 0);
		return;
	}
	CHECK_EQ(n, 3);
	for (size_t i = 0; i < n; i++) {
		uint8_t b[NODES_MD_BLOB_MAX];
		size_t len;

		CHECK(r[i].key < 3);
		CHECK(!seen[r[i].key]);
		seen[r[i].key] = true;
		CHECK_EQ(r[i].kind, r[i].key ? 2 : 1);
		CHECK_EQ(r[i].fetched_ns, id * 1000 + r[i].key);
		blob_of(id + salt, r[i].key, b, &len);
		CHECK_EQ(r[i].len, len);
		CHECK(!memcmp(r[i].blob, b, len));
	}
}

static uint64_t file_size(void)
{
	struct stat st;

	CHECK(!stat(t_path("md.log"), &st));
	return (uint64_t)st.st_size;
}

int main(void)
{
	struct nodes_md_stats st;
	struct nodes_md *m;
	uint64_t before;
	int fd;

	dir = t_tmpdir();
	/* 1. Records in, back out; a put replaces. */
	m = mopen(7);
	for (uint64_t id = 2; id < NN; id++)
		put_node(m, id, 0);
	put_node(m, 5, 1);	/* replaces node 5's three records */
	for (uint64_t id = 2; id < NN; id++)
		check_node(m, id, id == 5, true);
	check_node(m, NN + 5, 0, false);
	CHECK_EQ(nodes_md_put(m, 0, 1, 0, 0, "x", 1), -EINVAL);
	CHECK_EQ(nodes_md_put(m, 3, 0, 0, 0, "x", 1), -EINVAL);
	CHECK_EQ(nodes_md_put(m, 3, 1, 0, 0, "x", NODES_MD_BLOB_MAX + 1),
		 -EINVAL);
	nodes_md_stats(m, &st);
	CHECK_EQ(st.records, 3 * (NN - 2));
	CHECK_EQ(st.nodes, NN - 2);
	nodes_md_close(m);

	/* 2. A reopen: all of it, with fetch times; drops stay dropped. */
	m = mopen(7);
	for (uint64_t id = 2; id < NN; id++)
		check_node(m, id, id == 5, true);
	for (uint64_t id = 2; id < NN; id += 2)
		CHECK_EQ(nodes_md_drop(m, id), 0);
	CHECK_EQ(nodes_md_drop(m, NN + 7), 0);	/* nothing to drop */
	for (uint64_t id = 2; id < NN; id++)
		check_node(m, id, id == 5, id & 1);
	put_node(m, 4, 3);	/* a dropped node comes back */
	nodes_md_close(m);
	m = mopen(7);
	nodes_md_stats(m, &st);
	CHECK(st.clean);	/* closed: its last record says so */
	for (uint64_t id = 2; id < NN; id++)
		check_node(m, id, id == 5 ? 1 : id == 4 ? 3 : 0,
			   (id & 1) || id == 4);
	nodes_md_close(m);

	/* 3. A torn tail (a crash mid-append): dropped and cut; the rest
	 * stays. */
	before = file_size();
	fd = open(t_path("md.log"), O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "\x01\x05torn", 6), 6);
	close(fd);
	m = mopen(7);
	nodes_md_stats(m, &st);
	CHECK_EQ(st.dropped_bytes, 6);
	CHECK(!st.clean);	/* a torn tail: not a clean close */
	CHECK_EQ(file_size(), before);
	check_node(m, 7, 0, true);
	put_node(m, 7, 0);
	nodes_md_close(m);
	/* Without its clean mark (a record after the last put): not clean
	 * either. */
	CHECK(!truncate(t_path("md.log"), (off_t)(file_size() - 40)));
	m = mopen(7);
	nodes_md_stats(m, &st);
	CHECK(!st.clean);
	CHECK_EQ(st.dropped_bytes, 0);
	nodes_md_close(m);
	before = file_size();

	/* 4. Damage in the middle: what follows it is dropped (asked again
	 * of the origin), nothing wrong is read, no crash. */
	fd = open(t_path("md.log"), O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "\xff\xff\xff\xff", 4, (off_t)(before / 2)), 4);
	close(fd);
	m = mopen(7);
	nodes_md_stats(m, &st);
	CHECK(st.dropped_bytes > 0);
	CHECK(st.records < 3 * (NN - 2));
	for (uint64_t id = 2; id < NN; id++) {
		struct nodes_md_rec r[8];
		size_t n = nodes_md_get(m, id, r, 8);

		/* Before the damage: whole and right (4 and 5 were put
		 * twice: either version may be the last one read). */
		if (n == 3 && id != 4 && id != 5)
			check_node(m, id, 0, true);
	}
	nodes_md_close(m);

	/* 4b. Only one kind kept (what a gateway keeps after a crash). */
	m = mopen(7);
	CHECK_EQ(nodes_md_retain(m, 2), 0);
	{
		struct nodes_md_rec r[8];
		size_t n = nodes_md_get(m, 7, r, 8);

		for (size_t i = 0; i < n; i++)
			CHECK_EQ(r[i].kind, 2);
	}
	nodes_md_stats(m, &st);
	CHECK(st.records > 0);
	nodes_md_close(m);
	m = mopen(7);
	nodes_md_stats(m, &st);
	CHECK(st.clean);
	CHECK(st.records > 0);
	nodes_md_close(m);

	/* 5. Another table's file (another generation): started afresh. */
	m = mopen(8);
	nodes_md_stats(m, &st);
	CHECK(st.started_afresh);
	CHECK_EQ(st.records, 0);
	check_node(m, 7, 0, false);

	/* 6. One record rewritten 100000 times: the file stays bounded
	 * (once the compaction asked for last is done). */
	for (uint64_t i = 0; i < 100000; i++)
		CHECK_EQ(nodes_md_put(m, 9, 1, 0, i, "abcdefgh", 8), 0);
	nodes_md_settle(m);
	nodes_md_stats(m, &st);
	CHECK(st.rewrites >= 1);
	CHECK(st.file_bytes <= (2u << 20));
	CHECK_EQ(st.records, 1);

	/* 6a. A compaction runs on a thread of its own: held after it wrote
	 * its new file, before the rename, puts, gets and drops go on (they
	 * would wait for it if it ran on the caller's thread, as it did:
	 * this test then never ends). Let go, md.log is the new file plus
	 * what was put and dropped meanwhile. */
	{
		struct nodes_md_rec r;
		uint64_t r0, i;

		nodes_md_stats(m, &st);
		r0 = st.rewrites;
		nodes_md_hold_rewrites(m, true);
		for (i = 0; !st.rewriting; i++) {
			CHECK_EQ(nodes_md_put(m, 9, 1, 0, i, "abcdefgh", 8), 0);
			nodes_md_stats(m, &st);
		}
		while (!st.held) {	/* the worker reaches the hold */
			usleep(1000);
			nodes_md_stats(m, &st);
		}
		for (uint64_t id = 20; id < 120; id++)
			put_node(m, id, 5);
		CHECK_EQ(nodes_md_drop(m, 21), 0);
		CHECK_EQ(nodes_md_put(m, 9, 1, 0, 777777, "changed!", 8), 0);
		check_node(m, 22, 5, true);
		check_node(m, 21, 5, false);
		nodes_md_stats(m, &st);
		CHECK(st.held);
		CHECK_EQ(st.rewrites, r0);
		nodes_md_hold_rewrites(m, false);
		nodes_md_settle(m);
		nodes_md_stats(m, &st);
		CHECK_EQ(st.rewrites, r0 + 1);
		CHECK_EQ(st.file_bytes, file_size());
		CHECK(st.file_bytes < (1u << 20));
		nodes_md_close(m);
		m = mopen(8);
		for (uint64_t id = 20; id < 120; id++)
			check_node(m, id, 5, id != 21);
		CHECK_EQ(nodes_md_get_one(m, 9, 1, 0, &r), 0);
		CHECK_EQ(r.fetched_ns, 777777);
		CHECK(!memcmp(r.blob, "changed!", 8));
		for (uint64_t id = 20; id < 120; id++)
			CHECK_EQ(nodes_md_drop(m, id), 0);
		nodes_md_stats(m, &st);
		CHECK_EQ(st.records, 1);

		/* The same, with puts whose appends fail meanwhile (a file
		 * size limit: EFBIG): they are kept in memory only, so the
		 * rewrite writes everything from memory, and they are in
		 * md.log after it. */
		{
			struct rlimit rl, lim;

			nodes_md_settle(m);
			nodes_md_stats(m, &st);
			r0 = st.rewrites;
			nodes_md_hold_rewrites(m, true);
			for (i = 0; !st.rewriting; i++) {
				CHECK_EQ(nodes_md_put(m, 9, 1, 0, i, "abcdefgh",
						      8), 0);
				nodes_md_stats(m, &st);
			}
			while (!st.held) {
				usleep(1000);
				nodes_md_stats(m, &st);
			}
			signal(SIGXFSZ, SIG_IGN);
			CHECK_EQ(getrlimit(RLIMIT_FSIZE, &rl), 0);
			lim = rl;
			lim.rlim_cur = file_size();
			CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
			for (uint64_t id = 200; id < 210; id++) {
				uint8_t b[NODES_MD_BLOB_MAX];
				size_t len;

				blob_of(id + 6, 0, b, &len);
				CHECK_EQ(nodes_md_put(m, id, 1, 0, id * 1000, b,
						      len), -EFBIG);
			}
			CHECK_EQ(setrlimit(RLIMIT_FSIZE, &rl), 0);
			nodes_md_hold_rewrites(m, false);
			nodes_md_settle(m);
			nodes_md_stats(m, &st);
			CHECK_EQ(st.rewrites, r0 + 1);
			nodes_md_close(m);
			m = mopen(8);
			for (uint64_t id = 200; id < 210; id++) {
				uint8_t b[NODES_MD_BLOB_MAX];
				size_t len;

				CHECK_EQ(nodes_md_get_one(m, id, 1, 0, &r), 0);
				blob_of(id + 6, 0, b, &len);
				CHECK_EQ(r.len, len);
				CHECK(!memcmp(r.blob, b, len));
				CHECK_EQ(nodes_md_drop(m, id), 0);
			}
		}
	}

	/* 6b. A directory's entries: found by key, apart from the node's
	 * own records, kept across a reopen, forgotten with the node. */
	CHECK_EQ(nodes_md_put(m, 11, 1, 0, 5, "attr", 4), 0);
	for (uint64_t k = 1; k <= 20000; k++)
		CHECK_EQ(nodes_md_put(m, 11, NODES_MD_DENT, k * 977, k, &k,
				      sizeof(k)), 0);
	{
		struct nodes_md_rec r[4];

		CHECK_EQ(nodes_md_get(m, 11, r, 4), 1);	/* its own only */
		CHECK_EQ(r[0].kind, 1);
		nodes_md_close(m);
		m = mopen(8);
		CHECK_EQ(nodes_md_get(m, 11, r, 4), 1);
		for (uint64_t k = 1; k <= 20000; k++) {
			uint64_t v;

			CHECK_EQ(nodes_md_get_one(m, 11, NODES_MD_DENT,
						  k * 977, &r[0]), 0);
			memcpy(&v, r[0].blob, sizeof(v));
			CHECK_EQ(v, k);
			CHECK_EQ(r[0].fetched_ns, k);
		}
		CHECK_EQ(nodes_md_get_one(m, 11, NODES_MD_DENT, 5, &r[0]),
			 -ENOENT);
		CHECK_EQ(nodes_md_drop(m, 11), 0);
		CHECK_EQ(nodes_md_get_one(m, 11, NODES_MD_DENT, 977, &r[0]),
			 -ENOENT);
		CHECK_EQ(nodes_md_get(m, 11, r, 4), 0);
		nodes_md_stats(m, &st);
		CHECK_EQ(st.records, 1);	/* node 9's */
	}

	/* 7. At most NODES_MD_MAX records: the rest refused, counted. */
	for (uint64_t id = 10; id < 10 + NODES_MD_MAX; id++) {
		int ret = nodes_md_put(m, id, 1, 0, 0, NULL, 0);

		if (ret == -ENOSPC)
			break;
		CHECK_EQ(ret, 0);
	}
	CHECK_EQ(nodes_md_put(m, 1u << 30, 1, 0, 0, NULL, 0), -ENOSPC);
	nodes_md_stats(m, &st);
	CHECK_EQ(st.records, NODES_MD_MAX);
	CHECK(st.full >= 1);
	nodes_md_close(m);
	printf("nodes_md_test: ok\n");
	return 0;
}
