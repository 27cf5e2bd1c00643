/* gw_dirknown_test: names known absent (gateway/inode/dirknown.c), with
 * the gateway's own objects. A directory made is empty for its maker; a
 * name made with a chained wcc (pre-op = the last post-op) joins it and
 * is never answered absent, thousands of them too; a wcc that does not
 * chain, or none, forgets; so do attributes seen that are not the last
 * change's, their lifetime's end, and a change not known
 * (gw_inode_invalidate_attr); another credential is not answered. */
#include "inode_i.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"

static struct nfsc_attr version(uint64_t size, long ns)
{
	struct nfsc_attr a = { .type = NFSC_DIR, .mode = 0755, .uid = 7,
			       .size = size };

	clock_gettime(CLOCK_REALTIME, &a.mtime);
	a.mtime.tv_nsec = ns;
	a.ctime = a.mtime;
	return a;
}

static struct nfsc_post chained(const struct nfsc_attr *pre,
				const struct nfsc_attr *post)
{
	struct nfsc_post w = { .has_attr = true, .attr = *post,
			       .has_pre = true };

	w.pre.size = pre->size;
	w.pre.mtime = pre->mtime;
	w.pre.ctime = pre->ctime;
	return w;
}

int main(void)
{
	struct gw_opts opts = { 0 };
	struct gw gw = { 0 };
	struct gw_inode dir;
	struct nfsc_cred me = { .uid = 7, .gid = 7 }, other = { .uid = 8,
								 .gid = 7 };
	struct nfsc_attr v0 = version(0, 100), v1 = version(1, 200), v2, vx;
	struct nfsc_post w;
	char name[32];
	unsigned i;
	bool all;

	opts.acdirmin = opts.acdirmax = 60;
	gw.o = &opts;
	memset(&dir, 0, sizeof(dir));
	pthread_mutex_init(&dir.lock, NULL);
	dir.attr = v0;
	dir.attr_valid = true;
	clock_gettime(CLOCK_MONOTONIC, &dir.attr_at);

	/* Not made here: nothing known. */
	CHECK(!gw_dirknown_absent(&gw, &dir, "a", &me));
	/* Made with a mode its maker may not search (the origin would say
	 * EACCES): nothing known. */
	vx = v0;
	vx.uid = 7;
	vx.mode = 0644;
	gw_dirknown_made(&dir, &vx, &me);
	CHECK(dir.known == NULL);
	/* Made: empty, for its maker only. */
	gw_dirknown_made(&dir, &v0, &me);
	CHECK(gw_dirknown_absent(&gw, &dir, "a", &me));
	CHECK(!gw_dirknown_absent(&gw, &dir, "a", &other));
	/* A name made, chained: it is not absent, others are. */
	w = chained(&v0, &v1);
	gw_dirknown_added(&dir, "a", &w, &me);
	CHECK(!gw_dirknown_absent(&gw, &dir, "a", &me));
	CHECK(gw_dirknown_absent(&gw, &dir, "b", &me));
	CHECK(dir.attr.size == 1);	/* the reply's attributes taken */
	/* 5000 more, each chained: every one found, a new one absent. */
	v2 = v1;
	for (i = 0; i < 5000; i++) {
		vx = version(v2.size + 1, (long)(300 + i));
		w = chained(&v2, &vx);
		snprintf(name, sizeof(name), "f%u", i);
		gw_dirknown_added(&dir, name, &w, &me);
		v2 = vx;
	}
	all = true;
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		all = all && !gw_dirknown_absent(&gw, &dir, name, &me);
	}
	CHECK(all);
	CHECK(gw_dirknown_absent(&gw, &dir, "f5000", &me));
	/* Attributes seen that are not the last change's: forgotten. */
	pthread_mutex_lock(&dir.lock);
	dir.attr = version(9999, 1);
	pthread_mutex_unlock(&dir.lock);
	CHECK(!gw_dirknown_absent(&gw, &dir, "zz", &me));
	CHECK(dir.known == NULL);

	/* A wcc that does not chain (someone changed it between): gone. */
	gw_dirknown_made(&dir, &v0, &me);
	dir.attr = v0;
	w = chained(&v1, &v2);
	gw_dirknown_added(&dir, "x", &w, &me);
	CHECK(dir.known == NULL);
	CHECK(!gw_dirknown_absent(&gw, &dir, "y", &me));
	/* No pre-op attributes: gone too. */
	gw_dirknown_made(&dir, &v0, &me);
	dir.attr = v0;
	w = chained(&v0, &v1);
	w.has_pre = false;
	gw_dirknown_added(&dir, "x", &w, &me);
	CHECK(dir.known == NULL);
	/* A change whose outcome is not known (REMOVE, RENAME): gone. */
	gw_dirknown_made(&dir, &v0, &me);
	dir.attr = v0;
	CHECK(gw_dirknown_absent(&gw, &dir, "y", &me));
	gw_inode_invalidate_attr(&gw, &dir);
	CHECK(dir.known == NULL);
	CHECK(!gw_dirknown_absent(&gw, &dir, "y", &me));
	/* The lifetime's end: gone. */
	gw_dirknown_made(&dir, &v0, &me);
	dir.attr = v0;
	dir.attr_valid = true;
	clock_gettime(CLOCK_MONOTONIC, &dir.attr_at);
	dir.attr_at.tv_sec -= 61;
	CHECK(!gw_dirknown_absent(&gw, &dir, "y", &me));
	CHECK(dir.known == NULL);
	/* A refused change: forgotten on request. */
	gw_dirknown_made(&dir, &v0, &me);
	clock_gettime(CLOCK_MONOTONIC, &dir.attr_at);
	CHECK(gw_dirknown_absent(&gw, &dir, "y", &me));
	gw_dirknown_forget(&dir);
	CHECK(!gw_dirknown_absent(&gw, &dir, "y", &me));
	pthread_mutex_destroy(&dir.lock);
	return 0;
}
