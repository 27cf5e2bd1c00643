/* gw_remember_test: a directory listing kept in md.log (gateway/keep/
 * kept_names.c) comes back whole after a restart, and a kept listing whose
 * count of names is damaged (0xFFFFFFFF, or any count larger than a kept
 * listing may be) is refused, online and offline, without reading or
 * writing past what was allocated for it (run under ASan); kept
 * attributes (kept_md.c) come back to a new inode, those with a time no NFSv3 origin
 * gives (seconds outside 32 bits unsigned) are refused, and nothing
 * computes with them (UBSan: a signed overflow in the attribute timeout). */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "keep_i.h"
#include "nodes_helpers.h"

/* Where a kept listing's (MD_LISTED) count of names is (kept_names.c's
 * struct md_listed: size, mtime and ctime seconds, their nanoseconds, then
 * n): the test damages that field as a bad disk or an edit would. */
#define LISTED_N_OFF 32

static struct gw gw;
static struct gw_opts opts;
static struct gw_inode dir;

static void md_reopen(const char *d, uint32_t gen)
{
	nodes_md_close(gw.md);
	gw.md = t_nodes_md_open(d, gen);
	/* A restart: what was kept before it is what the gateway uses. */
	gw.md_epoch = gw_md_now_ns();
}

/* Set the kept listing's count of names to n. */
static void damage_count(const char *d, uint32_t gen, uint32_t n)
{
	struct nodes_md_rec r;

	CHECK_EQ(nodes_md_get_one(gw.md, dir.nodeid, MD_LISTED, 0, &r), 0);
	CHECK(r.len >= LISTED_N_OFF + 4);
	memcpy(r.blob + LISTED_N_OFF, &n, 4);
	CHECK_EQ(nodes_md_put(gw.md, dir.nodeid, MD_LISTED, 0, r.fetched_ns,
			      r.blob, r.len), 0);
	md_reopen(d, gen);
}

static int listing(bool offline, struct nfsc_dirlist *out)
{
	struct timespec *at = NULL;
	int ret = gw_md_listing(&gw, &dir, NULL, offline, out, &at);

	/* When each entry's attributes were fetched: one per entry. */
	CHECK(ret ? !at : at != NULL);
	free(at);
	return ret;
}

int main(void)
{
	static const uint32_t bad[] = { 0xFFFFFFFFu, 0xFFFFFFFEu, 0xFFFFFF80u,
					65537 };
	const char *d = t_tmpdir();
	struct nfsc_dirent ents[2] = {
		{ .name = (char *)".", .fileid = 100 },
		{ .name = (char *)"..", .fileid = 99 },
	};
	struct nfsc_dirlist l = { .ents = ents, .n = 2, .cap = 2 };
	struct nfsc_attr ver = { .type = NFSC_DIR, .mode = 0755, .size = 4096 };
	struct nfsc_dirlist out;
	struct nodes_stats ns;

	opts.acdirmin = opts.acdirmax = 3600;
	opts.acregmin = opts.acregmax = 3600;
	gw.o = &opts;
	gw.nodes = t_nodes_open(d, false);
	nodes_stats(gw.nodes, &ns);
	gw.md = t_nodes_md_open(d, ns.generation);
	gw.md_epoch = gw_md_now_ns();
	pthread_mutex_init(&dir.lock, NULL);
	dir.nodeid = 5;

	/* 1. An empty directory listed from the origin, kept by the real
	 * writer; after a restart it is served from md.log: "." and ".."
	 * only. */
	gw_md_note_listing(&gw, &dir, &ver, &l);
	md_reopen(d, ns.generation);
	CHECK_EQ(listing(false, &out), 0);
	CHECK_EQ(out.n, 2);
	CHECK(!strcmp(out.ents[0].name, "."));
	CHECK_EQ(out.ents[0].fileid, 100);
	CHECK(!strcmp(out.ents[1].name, ".."));
	CHECK_EQ(out.ents[1].fileid, 99);
	nfsc_dirlist_free(&out);

	/* 2. Its count damaged: refused (the origin is asked instead), and
	 * nothing past the allocations touched. 0xFFFFFFFF wrapped n + 1 and
	 * n + 2 to 0 and 1: a one-entry array got "." and "..". */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		damage_count(d, ns.generation, bad[i]);
		CHECK_EQ(listing(false, &out), -ENOENT);
		CHECK_EQ(out.n, 0);
		CHECK_EQ(listing(true, &out), -ENOENT);
		CHECK_EQ(out.n, 0);
	}

	/* 3. The count put right again: served again. */
	damage_count(d, ns.generation, 0);
	CHECK_EQ(listing(false, &out), 0);
	CHECK_EQ(out.n, 2);
	nfsc_dirlist_free(&out);

	/* 4. Attributes kept when an inode is freed come back to the next
	 * start's inode of that node-id; with an mtime or ctime no origin
	 * gives, they do not (asked again). */
	{
		static const int64_t bad_s[] = { INT64_MIN, -1,
						 (int64_t)UINT32_MAX + 1,
						 INT64_MAX };
		struct gw_inode ino;
		struct nfsc_attr a;

		for (size_t i = 0; i <= sizeof(bad_s) / sizeof(bad_s[0]); i++) {
			memset(&ino, 0, sizeof(ino));
			pthread_mutex_init(&ino.lock, NULL);
			ino.nodeid = 7;
			ino.attr = (struct nfsc_attr){ .type = NFSC_REG,
						       .mode = 0644, .size = 5 };
			clock_gettime(CLOCK_REALTIME, &ino.attr.mtime);
			ino.attr.ctime = ino.attr.mtime;
			if (i < sizeof(bad_s) / sizeof(bad_s[0]))
				ino.attr.mtime.tv_sec = bad_s[i];
			ino.attr_valid = true;
			clock_gettime(CLOCK_MONOTONIC, &ino.attr_at);
			gw_md_keep_inode(&gw, &ino);
			pthread_mutex_destroy(&ino.lock);
			md_reopen(d, ns.generation);

			memset(&ino, 0, sizeof(ino));
			pthread_mutex_init(&ino.lock, NULL);
			ino.nodeid = 7;
			gw_md_attach(&gw, &ino);
			if (i < sizeof(bad_s) / sizeof(bad_s[0])) {
				CHECK(!ino.attr_valid);
				CHECK_EQ(gw_md_attr_any(&gw, 7, &a), -ENOENT);
			} else {
				CHECK(ino.attr_valid);
				CHECK_EQ(ino.attr.size, 5);
				CHECK_EQ(gw_md_attr_any(&gw, 7, &a), 0);
			}
			pthread_mutex_destroy(&ino.lock);
		}
	}

	nodes_md_close(gw.md);
	nodes_close(gw.nodes);
	pthread_mutex_destroy(&dir.lock);
	printf("gw_remember_test: ok\n");
	return 0;
}
