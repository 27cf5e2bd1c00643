/* nodes_test: the node-id table keeps every mapping across restart, SIGKILL, torn/garbage/damaged files and threads, and never reuses an id. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nodes_helpers.h"

#define N 2000			/* handles of the single-threaded parts */
#define THREADS 4
#define PER_THREAD 5000

static char dir[64];
static char logpath[128];
static uint64_t ids[N];		/* id of handle i, 0 if not in the table */
static uint64_t parents[N];
static uint64_t max_seen;	/* largest id ever handed out */
static pid_t owner;		/* the process that removes dir */

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *f)
{
	(void)st; (void)flag; (void)f;
	return remove(p);
}

static void cleanup(void)
{
	if (dir[0] && getpid() == owner)	/* not in a forked child */
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Handle i ("salt" makes another family): 1..64 bytes, unique per i. */
static size_t mk_handle(uint32_t i, uint32_t salt, uint8_t *h)
{
	size_t len = 8 + (i * 7 + salt) % 57;
	uint64_t x = ((uint64_t)salt << 32 | i) * 0x9E3779B97F4A7C15ull + 1;

	for (size_t k = 0; k < len; k++) {
		x ^= x >> 29;
		x *= 0xBF58476D1CE4E5B9ull;
		h[k] = (uint8_t)(x >> 56);
	}
	memcpy(h, &i, 4);	/* unique */
	memcpy(h + 4, &salt, 4);
	return len;
}

static struct nodes *topen(bool ro)
{
	return t_nodes_open(dir, ro);
}

static struct nodes_stats tstats(struct nodes *t)
{
	struct nodes_stats st;

	nodes_stats(t, &st);
	return st;
}

static uint64_t add(struct nodes *t, uint32_t i, uint32_t salt,
		    uint64_t parent, int expect)
{
	uint8_t h[NODES_HANDLE_MAX];
	size_t len = mk_handle(i, salt, h);
	uint64_t id = 0;
	uint32_t gen = 0;

	CHECK_EQ(nodes_add(t, h, len, parent, &id, &gen), expect);
	CHECK(gen != 0);
	CHECK(id >= 2);
	if (expect == 1) {
		CHECK(id > max_seen);
		max_seen = id;
	}
	return id;
}

/* Every handle i maps to ids[i] both ways (or is absent if ids[i] == 0).
 * Returns how many are present. */
static uint64_t verify_all(struct nodes *t)
{
	uint64_t live = 0;

	for (uint32_t i = 0; i < N; i++) {
		uint8_t h[NODES_HANDLE_MAX];
		size_t len = mk_handle(i, 0, h);
		uint64_t id = 0;
		int ret = nodes_find(t, h, len, &id, NULL);

		if (!ids[i]) {
			CHECK_EQ(ret, -ENOENT);
			continue;
		}
		live++;
		t_nodes_check_found(t, h, len, ret, id, ids[i], parents[i]);
	}
	return live;
}

static void file_truncate_by(off_t n)
{
	struct stat st;

	CHECK(!stat(logpath, &st));
	CHECK(!truncate(logpath, st.st_size - n));
}

static void file_append(const void *buf, size_t len)
{
	int fd = open(logpath, O_WRONLY | O_APPEND);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* 1. add/find/get round trip, bad input, set_parent, remove. */
static void test_basic(void)
{
	struct nodes *t = topen(false);
	uint8_t h[NODES_HANDLE_MAX + 1], back[NODES_HANDLE_MAX];
	size_t blen;
	uint64_t id, parent;
	uint32_t gen = 0, gen2 = 0;

	for (uint32_t i = 0; i < N; i++) {
		parents[i] = i ? ids[(i - 1) / 2] : NODES_ROOT_ID;
		ids[i] = add(t, i, 0, parents[i], 1);
	}
	for (uint32_t i = 0; i < N; i += 97)
		CHECK_EQ(add(t, i, 0, 12345, 0), ids[i]);	/* no change */
	verify_all(t);

	memset(h, 7, sizeof(h));
	CHECK_EQ(nodes_find(t, h, 0, &id, NULL), -EINVAL);
	CHECK_EQ(nodes_find(t, h, sizeof(h), &id, NULL), -EINVAL);
	CHECK_EQ(nodes_add(t, h, sizeof(h), 1, &id, NULL), -EINVAL);
	CHECK_EQ(nodes_find(t, h, 9, &id, NULL), -ENOENT);
	blen = sizeof(back);
	CHECK_EQ(nodes_get(t, NODES_ROOT_ID, back, &blen, NULL,
				 NULL), -ENOENT);
	CHECK_EQ(nodes_get(t, 0, back, &blen, NULL, NULL), -ENOENT);
	CHECK_EQ(nodes_get(t, max_seen + 1, back, &blen, NULL, NULL),
		 -ENOENT);
	blen = 3;
	CHECK_EQ(nodes_get(t, ids[5], back, &blen, NULL, NULL), -ERANGE);
	CHECK_EQ(blen, mk_handle(5, 0, h));
	blen = sizeof(back);
	CHECK_EQ(nodes_get(t, ids[5], back, &blen, &parent, &gen), 0);
	CHECK_EQ(nodes_find(t, back, blen, &id, &gen2), 0);
	CHECK(gen && gen == gen2 && gen == tstats(t).generation);

	/* Parents change; a removed handle comes back with a new id. */
	for (uint32_t i = 1; i < N; i += 3) {
		parents[i] = ids[0];
		CHECK_EQ(nodes_set_parent(t, ids[i], parents[i]), 0);
	}
	CHECK_EQ(nodes_set_parent(t, max_seen + 10, 2), -ENOENT);
	for (uint32_t i = 0; i < N; i += 5) {
		CHECK_EQ(nodes_remove(t, ids[i]), 0);
		CHECK_EQ(nodes_remove(t, ids[i]), -ENOENT);
		blen = sizeof(back);
		CHECK_EQ(nodes_get(t, ids[i], back, &blen, NULL, NULL),
			 -ENOENT);
		ids[i] = 0;
	}
	CHECK_EQ(verify_all(t), tstats(t).entries);
	for (uint32_t i = 0; i < N; i += 10) {
		ids[i] = add(t, i, 0, parents[i], 1);	/* fresh id */
	}
	CHECK_EQ(verify_all(t), tstats(t).entries);
	CHECK_EQ(tstats(t).skipped_bytes, 0);
	nodes_close(t);
}

/* 2. close/open keeps every mapping; ids go on beyond all handed out;
 * readonly opens read but do not write; a second writer is refused. */
static void test_restart(void)
{
	struct nodes *t = topen(false), *ro, *t2;
	char err[256];
	uint32_t gen = tstats(t).generation;
	uint64_t id;
	uint8_t h[NODES_HANDLE_MAX];
	size_t len;

	verify_all(t);
	CHECK_EQ(tstats(t).generation, gen);
	CHECK_EQ(tstats(t).skipped_bytes, 0);
	CHECK(tstats(t).next_id > max_seen);
	CHECK_EQ(nodes_open(dir, false, &t2, err, sizeof(err)), -EBUSY);
	ro = topen(true);
	verify_all(ro);
	len = mk_handle(1, 99, h);
	CHECK_EQ(nodes_add(ro, h, len, 1, &id, NULL), -EROFS);
	CHECK_EQ(nodes_remove(ro, ids[1]), -EROFS);
	CHECK_EQ(nodes_set_parent(ro, ids[1], 5), -EROFS);
	nodes_close(ro);
	for (uint32_t i = 0; i < 100; i++)
		add(t, i, 1, 1, 1);
	nodes_close(t);
	t = topen(false);
	verify_all(t);
	for (uint32_t i = 0; i < 100; i++)
		CHECK(add(t, i, 1, 1, 0) <= max_seen);
	add(t, 100, 1, 1, 1);
	nodes_close(t);
}

/* 3. A child adds entries, reports each through a pipe and dies by
 * SIGKILL without closing; every reported entry is there afterwards. */
static void test_sigkill(void)
{
	const uint32_t kids = 3000;
	int pfd[2], status;
	uint64_t got[3000] = { 0 }, rec[2];
	struct nodes *t;
	uint32_t n = 0;
	pid_t pid;

	CHECK(!pipe(pfd));
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		close(pfd[0]);
		t = topen(false);
		for (uint32_t i = 0; i < kids; i++) {
			rec[0] = i;
			rec[1] = add(t, i, 2, 7, 1);
			if (write(pfd[1], rec, sizeof(rec)) != sizeof(rec))
				_exit(1);
		}
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	close(pfd[1]);
	while (read(pfd[0], rec, sizeof(rec)) == sizeof(rec)) {
		CHECK(rec[0] < kids);
		got[rec[0]] = rec[1];
		n++;
	}
	close(pfd[0]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_EQ(n, kids);

	t = topen(false);
	verify_all(t);
	for (uint32_t i = 0; i < kids; i++) {
		uint8_t h[NODES_HANDLE_MAX];
		size_t len = mk_handle(i, 2, h);
		uint64_t id;

		CHECK_EQ(nodes_find(t, h, len, &id, NULL), 0);
		CHECK_EQ(id, got[i]);
		if (id > max_seen)
			max_seen = id;
	}
	add(t, 0, 3, 1, 1);	/* beyond everything the child handed out */
	nodes_close(t);
}

/* 4. A torn last record and garbage after it are ignored and cut off; the
 * torn record's id is not handed out again. */
static void test_torn_and_garbage(void)
{
	struct nodes *t = topen(false);
	uint8_t junk[1000], h[NODES_HANDLE_MAX];
	uint64_t torn_id, id;
	size_t len;

	torn_id = add(t, 1, 4, 1, 1);
	nodes_close(t);
	file_truncate_by(5);

	t = topen(false);
	CHECK(tstats(t).skipped_bytes > 0);
	verify_all(t);
	len = mk_handle(1, 4, h);
	CHECK_EQ(nodes_find(t, h, len, &id, NULL), -ENOENT);
	CHECK(add(t, 2, 4, 1, 1) > torn_id);
	nodes_close(t);
	t = topen(false);		/* the tail was cut: clean now */
	CHECK_EQ(tstats(t).skipped_bytes, 0);
	nodes_close(t);

	srand(5);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	junk[0] = 0xA1;			/* looks like an ADD record */
	junk[1] = 32;
	file_append(junk, sizeof(junk));
	memset(junk, 0, sizeof(junk));	/* and a hole of zeros */
	file_append(junk, sizeof(junk));
	t = topen(false);
	CHECK_EQ(tstats(t).skipped_bytes, 2 * sizeof(junk));
	CHECK(!tstats(t).compacted);
	verify_all(t);
	add(t, 3, 4, 1, 1);
	nodes_close(t);
	t = topen(false);
	CHECK_EQ(tstats(t).skipped_bytes, 0);
	verify_all(t);
	nodes_close(t);
}

/* 5. A damaged byte in the middle loses only the record it hits, never
 * makes a wrong mapping, and open rewrites the file. */
static void test_mid_damage(void)
{
	struct nodes *t;
	struct stat st;
	uint8_t b;
	uint32_t lost = 0;
	int fd;

	CHECK(!stat(logpath, &st));
	fd = open(logpath, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &b, 1, st.st_size / 2), 1);
	b ^= 0x10;
	CHECK_EQ(pwrite(fd, &b, 1, st.st_size / 2), 1);
	close(fd);

	t = topen(false);
	CHECK(tstats(t).skipped_bytes > 0);
	CHECK(tstats(t).compacted);
	for (uint32_t i = 0; i < N; i++) {
		uint8_t h[NODES_HANDLE_MAX];
		size_t len = mk_handle(i, 0, h);
		uint64_t id;
		int ret = nodes_find(t, h, len, &id, NULL);

		if (!ids[i]) {
			CHECK_EQ(ret, -ENOENT);
			continue;
		}
		if (ret == -ENOENT) {
			lost++;
			ids[i] = 0;
			continue;
		}
		CHECK_EQ(ret, 0);
		CHECK_EQ(id, ids[i]);
	}
	CHECK(lost <= 1);
	CHECK(tstats(t).next_id > max_seen);
	nodes_close(t);
	t = topen(false);
	CHECK_EQ(tstats(t).skipped_bytes, 0);
	CHECK(!tstats(t).compacted);
	verify_all(t);
	nodes_close(t);
}

/* 6. Compaction after many removals keeps the live set and the counter. */
static void test_compaction(void)
{
	struct nodes *t = topen(false);
	struct nodes_stats st;
	uint64_t before, most = 0, bound;

	/* Removals: the file is rewritten while the table runs, so it stays
	 * within twice the live size (or the slack) plus a record. */
	for (uint32_t i = 0; i < 20000; i++) {
		uint64_t id = add(t, i, 6, 1, 1);

		CHECK_EQ(nodes_set_parent(t, id, 3), 0);
		CHECK_EQ(nodes_remove(t, id), 0);
		st = tstats(t);
		if (st.file_bytes > most)
			most = st.file_bytes;
	}
	st = tstats(t);
	CHECK(st.compactions >= 1);
	bound = 2 * st.live_bytes > st.live_bytes + (64u << 10) ?
		2 * st.live_bytes : st.live_bytes + (64u << 10);
	if (most > bound + 3 * 90) {
		fprintf(stderr, "log grew to %llu bytes, bound %llu\n",
			(unsigned long long)most, (unsigned long long)bound);
		CHECK(!"run-time compaction keeps the log bounded");
	}
	verify_all(t);
	/* Parent changes are not compacted while running: at open. */
	for (uint32_t i = 0; i < 20000; i++) {
		uint32_t k = 0;

		while (!ids[k])
			k++;
		CHECK_EQ(nodes_set_parent(t, ids[k], 3 + (i & 1)), 0);
		CHECK_EQ(nodes_set_parent(t, ids[k], parents[k]), 0);
	}
	before = tstats(t).file_bytes;
	nodes_close(t);
	t = topen(false);
	st = tstats(t);
	CHECK(st.compacted);
	CHECK(st.file_bytes < before / 4);
	CHECK_EQ(st.file_bytes, st.live_bytes);
	CHECK(st.next_id > max_seen);
	verify_all(t);
	add(t, 20000, 6, 1, 1);
	nodes_close(t);
}

/* 6b. Room: bytes allocated beyond the file's end for the next records;
 * a walk sees every live entry once, with its handle. */
static void test_room_and_list(void)
{
	struct nodes *t = topen(false);
	static struct nodes_ent ents[100];
	static uint8_t seen[N];
	uint64_t cursor = 0, walked = 0, live;
	struct stat st;
	size_t n;

	CHECK_EQ(nodes_room(t), 0);
	CHECK(!stat(logpath, &st));
	/* Allocated ahead (st_blocks counts KEEP_SIZE allocations). */
	CHECK((uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size + (16u << 10));
	live = verify_all(t);
	while ((n = nodes_list(t, &cursor, ents, 100)) > 0) {
		for (size_t k = 0; k < n; k++) {
			uint8_t h[NODES_HANDLE_MAX];
			uint32_t i;

			walked++;
			for (i = 0; i < N && ids[i] != ents[k].id; i++)
				;
			if (i == N) {	/* added by another part: skip */
				walked--;
				continue;
			}
			CHECK(!seen[i]);
			seen[i] = 1;
			CHECK_EQ(ents[k].hlen, mk_handle(i, 0, h));
			CHECK(!memcmp(ents[k].h, h, ents[k].hlen));
		}
	}
	CHECK_EQ(walked, live);
	CHECK_EQ(nodes_list(t, &cursor, ents, 100), 0);
	nodes_close(t);
}

/* 7. Failed writes add nothing and lose nothing. */
static void test_faults(void)
{
	struct nodes *t = topen(false);
	uint8_t h[NODES_HANDLE_MAX];
	size_t len = mk_handle(7, 7, h);
	uint32_t live = 1;
	uint64_t id;

	nodes_inject_error(t, EIO, 1);
	CHECK_EQ(nodes_add(t, h, len, 1, &id, NULL), -EIO);
	CHECK_EQ(nodes_find(t, h, len, &id, NULL), -ENOENT);
	while (!ids[live])
		live++;
	nodes_inject_error(t, -ENOSPC, 1);
	CHECK_EQ(nodes_remove(t, ids[live]), -ENOSPC);
	/* The injection is used up: these reach the disk. */
	CHECK_EQ(nodes_set_parent(t, ids[live], 99), 0);
	CHECK_EQ(nodes_set_parent(t, ids[live], parents[live]), 0);
	nodes_inject_error(t, EIO, -1);
	CHECK_EQ(nodes_set_parent(t, ids[live], 99), -EIO);
	nodes_inject_error(t, 0, 0);
	add(t, 7, 7, 1, 1);
	verify_all(t);
	CHECK_EQ(nodes_sync(t), 0);
	/* A failed fsync: the table rewrites itself from memory at the next
	 * change, which then succeeds (nodes_fault_test goes further). While
	 * the rewrite fails too, changes fail with its error. */
	nodes_inject_error(t, EIO, 1);
	CHECK_EQ(nodes_sync(t), -EIO);
	len = mk_handle(8, 7, h);
	nodes_inject_error(t, EIO, 1);
	CHECK_EQ(nodes_add(t, h, len, 1, &id, NULL), -EIO);
	CHECK_EQ(nodes_find(t, h, len, &id, NULL), -ENOENT);
	verify_all(t);
	nodes_close(t);
	t = topen(false);
	verify_all(t);
	CHECK_EQ(nodes_find(t, h, len, &id, NULL), -ENOENT);
	nodes_close(t);
}

/* 8. Not a table: a clear error, nothing loaded. A new table gets a new
 * generation. */
static void test_bad_file(void)
{
	struct nodes *t;
	char err[256] = "";
	uint32_t gen;
	int fd;

	t = topen(false);
	gen = tstats(t).generation;
	nodes_close(t);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "hello, world\n", 13), 13);
	close(fd);
	CHECK_EQ(nodes_open(dir, false, &t, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "nodes.log"));
	CHECK_EQ(nodes_open(dir, true, &t, err, sizeof(err)), -EBADMSG);
	unlink(logpath);
	CHECK_EQ(nodes_open(dir, true, &t, err, sizeof(err)), -ENOENT);
	t = topen(false);
	CHECK(tstats(t).generation != gen);
	CHECK_EQ(tstats(t).entries, 0);
	CHECK_EQ(tstats(t).next_id, 2);
	nodes_close(t);
}

struct worker {
	struct nodes *t;
	uint32_t salt;
	uint64_t ids[PER_THREAD];
	int failed;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;

	for (uint32_t i = 0; i < PER_THREAD; i++) {
		uint8_t h[NODES_HANDLE_MAX];
		size_t len = mk_handle(i, w->salt, h);
		uint64_t id, id2;

		if (nodes_add(w->t, h, len, 1, &id, NULL) != 1 ||
		    nodes_find(w->t, h, len, &id2, NULL) || id != id2) {
			w->failed = 1;
			break;
		}
		w->ids[i] = id;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* 9. Four threads add distinct handles: all ids unique, all survive. */
static void test_threads(void)
{
	static struct worker w[THREADS];
	static uint64_t all[THREADS * PER_THREAD];
	struct nodes *t = topen(false);
	pthread_t th[THREADS];

	for (int k = 0; k < THREADS; k++) {
		w[k].t = t;
		w[k].salt = 100 + (uint32_t)k;
		CHECK(!pthread_create(&th[k], NULL, worker_run, &w[k]));
	}
	for (int k = 0; k < THREADS; k++) {
		CHECK(!pthread_join(th[k], NULL));
		CHECK(!w[k].failed);
		memcpy(all + k * PER_THREAD, w[k].ids, sizeof(w[k].ids));
	}
	qsort(all, THREADS * PER_THREAD, sizeof(all[0]), cmp_u64);
	for (size_t i = 0; i < THREADS * PER_THREAD; i++) {
		CHECK(all[i] >= 2);
		CHECK(!i || all[i] != all[i - 1]);
	}
	nodes_close(t);
	t = topen(true);
	for (int k = 0; k < THREADS; k++) {
		for (uint32_t i = 0; i < PER_THREAD; i++) {
			uint8_t h[NODES_HANDLE_MAX];
			size_t len = mk_handle(i, w[k].salt, h);
			uint64_t id;

			CHECK_EQ(nodes_find(t, h, len, &id, NULL), 0);
			CHECK_EQ(id, w[k].ids[i]);
		}
	}
	nodes_close(t);
}

int main(void)
{
	strcpy(dir, "/tmp/nodes-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 77;
	}
	owner = getpid();
	atexit(cleanup);
	snprintf(logpath, sizeof(logpath), "%s/%s", dir, NODES_FILE);

	test_basic();
	test_restart();
	test_sigkill();
	test_torn_and_garbage();
	test_mid_damage();
	test_compaction();
	test_room_and_list();
	test_faults();
	test_bad_file();
	test_threads();
	printf("nodes_test: ok\n");
	return 0;
}
