/* nodes_crash_test: a gateway killed (SIGKILL) at each step of a
 * compaction (before its temporary file is made, before each write and
 * the fsync of it, before the rename, before and after the directory's
 * fsync) leaves a nodes.log that opens with exactly the entries it had
 * (none lost, none removed back, no id handed out again), and an md.log
 * that opens with every record it had, undamaged; the leftover temporary
 * file is removed. */
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

#include "nodes_helpers.h"
#include "nodes_i.h"

#define NE 2000			/* entries at the start */
#define NM 100			/* md: nodes with a record at the start */

static char base[300], work[300];

static size_t handle(uint64_t i, uint8_t *h)
{
	memset(h, 0, 32);
	memcpy(h, &i, sizeof(i));
	memcpy(h + 16, "crash-test", 10);
	return 32;
}

static void copy_file(const char *from_dir, const char *to_dir,
		      const char *name)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cp %s/%s %s/%s", from_dir, name, to_dir,
		 name);
	CHECK_EQ(system(cmd), 0);
}

/* Run child(k) in a process of its own: true if it was killed (the k-th
 * step came), false if it ended by itself (there is no k-th step). */
static bool killed_at(int k, void (*child)(int k, int fd), int *out)
{
	int p[2], st;
	pid_t pid;

	CHECK(!pipe(p));
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		close(p[0]);
		child(k, p[1]);
		_exit(0);
	}
	close(p[1]);
	*out = 0;
	while (read(p[0], out, sizeof(*out)) == sizeof(*out))
		;	/* the last value the child reported */
	close(p[0]);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return false;
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	return true;
}

/* ---- nodes.log ---------------------------------------------------------- */

/* Remove entries 0, 1, ... (ids 2, 3, ...) until one of the removals
 * compacts the file, reporting each removal done. */
static void nodes_child(int k, int fd)
{
	struct nodes *t = t_nodes_open(work, false);
	struct nodes_stats st;

	t->log.kill_at = k;
	for (int i = 0; i < NE; i++) {
		CHECK_EQ(nodes_remove(t, NODES_FIRST_ID + (uint64_t)i), 0);
		nodes_stats(t, &st);
		if (st.compactions)
			_exit(0);	/* not killed: no k-th step */
		CHECK_EQ(write(fd, &i, sizeof(i)), (ssize_t)sizeof(i));
	}
	_exit(2);			/* never compacted */
}

static int nodes_rounds(void)
{
	struct nodes *t;
	struct nodes_stats st;
	uint8_t h[32];
	uint64_t id;
	int k, last;

	t = t_nodes_open(base, false);
	for (uint64_t i = 0; i < NE; i++)
		CHECK_EQ(nodes_add(t, h, handle(i, h), 1, &id, NULL), 1);
	nodes_close(t);
	for (k = 1; ; k++) {
		copy_file(base, work, NODES_FILE);
		if (!killed_at(k, nodes_child, &last))
			break;
		/* Removed: entries 0..last, and last + 1, whose record was
		 * written before its removal compacted the file. */
		t = t_nodes_open(work, false);
		CHECK(access(t_path("w/" NODES_TMP), F_OK) < 0);
		nodes_stats(t, &st);
		CHECK_EQ(st.entries, NE - (uint64_t)last - 2);
		CHECK(st.next_id >= NODES_FIRST_ID + NE);
		for (uint64_t i = 0; i < NE; i++) {
			int ret = nodes_find(t, h, handle(i, h), &id, NULL);

			if (i <= (uint64_t)last + 1) {
				CHECK_EQ(ret, -ENOENT);
			} else {
				CHECK_EQ(ret, 0);
				CHECK_EQ(id, NODES_FIRST_ID + i);
			}
		}
		CHECK_EQ(nodes_add(t, "new", 3, 1, &id, NULL), 1);
		CHECK(id >= NODES_FIRST_ID + NE);
		nodes_close(t);
	}
	return k - 1;
}

/* ---- md.log ------------------------------------------------------------- */

/* Put node 9's record again and again until the worker has compacted the
 * file, reporting each put done. */
static void md_child(int k, int fd)
{
	struct nodes_md *m = t_nodes_md_open(work, 7);
	struct nodes_md_stats st;
	uint8_t b[NODES_MD_BLOB_MAX];

	memset(b, 'x', sizeof(b));
	m->log.kill_at = k;
	for (int i = 1; ; i++) {
		CHECK_EQ(nodes_md_put(m, 9, 1, 0, (uint64_t)i, b, sizeof(b)),
			 0);
		CHECK_EQ(write(fd, &i, sizeof(i)), (ssize_t)sizeof(i));
		nodes_md_stats(m, &st);
		if (st.rewrites) {
			nodes_md_settle(m);
			_exit(0);	/* not killed: no k-th step */
		}
	}
}

static int md_rounds(void)
{
	struct nodes_md_stats st;
	struct nodes_md_rec r;
	struct nodes_md *m;
	int k, last;

	m = t_nodes_md_open(base, 7);
	for (uint64_t id = 100; id < 100 + NM; id++)
		CHECK_EQ(nodes_md_put(m, id, 1, 0, id, &id, sizeof(id)), 0);
	nodes_md_close(m);
	for (k = 1; ; k++) {
		copy_file(base, work, "md.log");
		if (!killed_at(k, md_child, &last))
			break;
		m = t_nodes_md_open(work, 7);
		CHECK(access(t_path("w/" MD_TMP), F_OK) < 0);
		nodes_md_stats(m, &st);
		CHECK(!st.started_afresh);
		/* Killed between two appends, or in one (a torn record). */
		CHECK(st.dropped_bytes < MD_REC_MAX);
		CHECK_EQ(st.records, NM + 1);
		for (uint64_t id = 100; id < 100 + NM; id++) {
			CHECK_EQ(nodes_md_get_one(m, id, 1, 0, &r), 0);
			CHECK_EQ(r.fetched_ns, id);
		}
		CHECK_EQ(nodes_md_get_one(m, 9, 1, 0, &r), 0);
		CHECK(r.fetched_ns >= (uint64_t)last);
		nodes_md_close(m);
	}
	return k - 1;
}

int main(void)
{
	int n;

	snprintf(base, sizeof(base), "%s", t_path("b"));
	snprintf(work, sizeof(work), "%s", t_path("w"));
	CHECK(!mkdir(base, 0700) && !mkdir(work, 0700));
#if !CACHEGW_FAULT_INJECTION
	printf("nodes_crash_test: skip (built without fault injection)\n");
	return T_SKIP;
#endif
	/* Steps: the temporary file, its write(s), its fsync, the rename,
	 * the directory's fsync, after it. */
	n = nodes_rounds();
	CHECK(n >= 6);
	printf("nodes.log: killed at each of %d steps\n", n);
	n = md_rounds();
	CHECK(n >= 6);
	printf("md.log: killed at each of %d steps\n", n);
	printf("nodes_crash_test: ok\n");
	return 0;
}
