/* nfsc_origin_test: nfsclient/ against a real NFSv3 origin (the URL in
 * CACHEGW_TEST_ORIGIN_URL, its export dir in CACHEGW_TEST_ORIGIN_DIR; run
 * by tests/integration/90_nfsclient.sh, which starts nfs-ganesha; exit 77
 * without them). What a user of the layer relies on: bad URLs and exports
 * refused with -EINVAL / -ENOENT and a reason; LOOKUP, GETATTR, CREATE,
 * WRITE + COMMIT, READ, READDIRPLUS, REMOVE round trips whose bytes and
 * names match the export's directory; errors as errno (ENOENT, ESTALE for
 * a removed file's handle, EACCES for another user); the per-procedure
 * counters move by what was sent. */
#include <stdint.h>

#include "check.h"
#include "nfsc.h"

#define P_GETATTR 1
#define P_LOOKUP 3
#define P_ACCESS 4
#define P_READ 6
#define P_WRITE 7
#define P_CREATE 8
#define P_REMOVE 12
#define P_READDIRPLUS 17
#define P_COMMIT 21

static struct nfsc *n;
static const char *dir;		/* the export, as a local directory */

static uint64_t calls(unsigned proc)
{
	struct nfsc_proc_stat st;

	nfsc_proc_stat(n, proc, &st);
	return st.calls;
}

static void write_all(const struct nfsc_cred *cr, const struct nfsc_fh *fh,
		      const char *buf, uint32_t len)
{
	struct nfsc_waiter w;
	struct nfsc_post post, cpost;
	uint32_t written = 0;
	uint8_t verf[8], cverf[8];

	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	if (nfsc_write_async(n, -1, cr, fh, 0, len, buf, false, &written, verf,
			     &post, nfsc_waiter_done, &w))
		CHECK(!"nfsc_write_async queued");
	CHECK_EQ(nfsc_waiter_wait(&w), 0);
	CHECK_EQ(written, len);
	CHECK_EQ(nfsc_commit(n, cr, fh, cverf, &cpost), 0);
	CHECK(!memcmp(verf, cverf, 8));	/* no restart in between */
}

int main(void)
{
	const char *url = getenv("CACHEGW_TEST_ORIGIN_URL");
	struct nfsc_cred root = { 0 }, user = { .uid = 1000, .gid = 1000 };
	struct nfsc_opts o = { .nconnect = 2 };
	struct nfsc_fh fh, fh2;
	struct nfsc_attr a;
	struct nfsc_created c;
	struct nfsc_sattr sa = { .set_mode = true, .mode = 0644 };
	struct nfsc_dirlist list = { 0 };
	struct nfsc_post post;
	char err[256] = "", buf[8192], path[512];
	uint64_t before;
	uint32_t granted = 0;
	bool has_attr;
	bool seen = false;
	ssize_t got;
	FILE *f;

	dir = getenv("CACHEGW_TEST_ORIGIN_DIR");
	if (!url || !dir) {
		fprintf(stderr, "SKIP: CACHEGW_TEST_ORIGIN_URL/_DIR not set "
			"(tests/integration/90_nfsclient.sh sets them)\n");
		return T_SKIP;
	}

	/* 1. Refused at the door, with a reason. */
	CHECK_EQ(nfsc_open("http://example/x", &o, &n, err, sizeof(err)),
		 -EINVAL);
	CHECK(err[0]);
	{
		char bad[512];
		const char *q = strchr(url + 6, '/');

		CHECK(q);
		snprintf(bad, sizeof(bad), "%.*s/no-such-export%s",
			 (int)(q - url), url, strchr(q, '?') ? strchr(q, '?') :
			 "");
		err[0] = 0;
		CHECK_EQ(nfsc_open(bad, &o, &n, err, sizeof(err)), -ENOENT);
		CHECK(err[0]);
	}

	/* 2. The export. */
	CHECK_EQ(nfsc_open(url, &o, &n, err, sizeof(err)), 0);
	CHECK_EQ(nfsc_start(n), 0);
	CHECK_EQ(nfsc_getattr(n, &root, nfsc_root(n), &a), 0);
	CHECK_EQ(a.type, NFSC_DIR);

	/* 3. LOOKUP: a file made in the directory, a name that is not. */
	snprintf(path, sizeof(path), "%s/given", dir);
	f = fopen(path, "w");
	CHECK(f);
	fputs("bytes from the origin\n", f);
	fclose(f);
	before = calls(P_LOOKUP);
	CHECK_EQ(nfsc_lookup(n, &root, nfsc_root(n), "given", &fh, &a,
			     &has_attr), 0);
	CHECK(has_attr);
	CHECK_EQ(a.type, NFSC_REG);
	CHECK_EQ(a.size, 22);
	CHECK_EQ(nfsc_lookup(n, &root, nfsc_root(n), "not-there", &fh2, &a,
			     &has_attr), -ENOENT);
	CHECK_EQ(calls(P_LOOKUP) - before, 2);

	/* 4. READ: the export's bytes. */
	before = calls(P_READ);
	got = nfsc_pread(n, &root, &fh, buf, sizeof(buf), 0, &a, &has_attr);
	CHECK_EQ(got, 22);
	CHECK(!memcmp(buf, "bytes from the origin\n", 22));
	CHECK(calls(P_READ) > before);

	/* 5. CREATE, WRITE + COMMIT: the export's file has the bytes. */
	before = calls(P_CREATE);
	CHECK_EQ(nfsc_create(n, &root, nfsc_root(n), "made", &sa, true, &c),
		 0);
	CHECK(c.has_fh);
	CHECK_EQ(calls(P_CREATE) - before, 1);
	{
		struct nfsc_created c2;

		CHECK_EQ(nfsc_create(n, &root, nfsc_root(n), "made", &sa, true,
				     &c2), -EEXIST);
	}
	before = calls(P_WRITE) + calls(P_COMMIT);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)('a' + i % 26);
	write_all(&root, &c.fh, buf, sizeof(buf));
	CHECK(calls(P_WRITE) + calls(P_COMMIT) - before >= 2);
	{
		char back[sizeof(buf)];

		snprintf(path, sizeof(path), "%s/made", dir);
		f = fopen(path, "r");
		CHECK(f);
		CHECK_EQ(fread(back, 1, sizeof(back), f), sizeof(back));
		fclose(f);
		CHECK(!memcmp(back, buf, sizeof(buf)));
	}

	/* 6. READDIRPLUS: the names and handles of the directory. */
	before = calls(P_READDIRPLUS);
	CHECK_EQ(nfsc_readdir_all(n, &root, nfsc_root(n), &list, 0), 0);
	CHECK(calls(P_READDIRPLUS) > before);
	for (size_t i = 0; i < list.n; i++)
		if (!strcmp(list.ents[i].name, "made")) {
			seen = true;
			CHECK(list.ents[i].has_fh);
			CHECK_EQ(list.ents[i].fh.len, c.fh.len);
			CHECK(!memcmp(list.ents[i].fh.data, c.fh.data,
				      c.fh.len));
		}
	CHECK(seen);
	nfsc_dirlist_free(&list);

	/* 7. Another user: a 0600 root file is refused (ACCESS grants no
	 * read, READ answers EACCES). */
	CHECK_EQ(nfsc_setattr(n, &root, &fh, &(struct nfsc_sattr){
		.set_mode = true, .mode = 0600 }, &post), 0);
	before = calls(P_ACCESS);
	CHECK_EQ(nfsc_access(n, &user, &fh, 0x1 /* READ */, &granted, &post),
		 0);
	CHECK_EQ(granted & 0x1, 0);
	CHECK_EQ(calls(P_ACCESS) - before, 1);
	CHECK_EQ(nfsc_pread(n, &user, &fh, buf, 16, 0, &a, &has_attr),
		 -EACCES);

	/* 8. REMOVE: the export loses the name; the handle is stale. */
	before = calls(P_REMOVE);
	CHECK_EQ(nfsc_remove(n, &root, nfsc_root(n), "made"), 0);
	CHECK_EQ(calls(P_REMOVE) - before, 1);
	snprintf(path, sizeof(path), "%s/made", dir);
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
	before = calls(P_GETATTR);
	CHECK_EQ(nfsc_getattr(n, &root, &c.fh, &a), -ESTALE);
	CHECK_EQ(calls(P_GETATTR) - before, 1);
	{
		struct nfsc_proc_stat st;

		nfsc_proc_stat(n, P_GETATTR, &st);
		CHECK(st.errors >= 1);
	}
	CHECK_EQ(nfsc_remove(n, &root, nfsc_root(n), "made"), -ENOENT);

	nfsc_close(n);
	printf("nfsc_origin_test: ok\n");
	return 0;
}
