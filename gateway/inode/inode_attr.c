/* inode_attr.c - what an inode knows of its file: the origin's attributes
 * (kept only when newer than what they replace), whether they are still
 * fresh, and the name a regular file was last found by.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inode_i.h"
#include "keep_i.h"

void gw_inode_set_attr(struct gw_inode *ino, const struct nfsc_attr *attr)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	ino->attr = *attr;
	clock_gettime(CLOCK_MONOTONIC, &ino->attr_at);
	ino->attr_valid = true;
	ino->attr_gen++;
	pthread_mutex_unlock(&ino->lock);
}

uint64_t gw_inode_attr_gen(struct gw_inode *ino)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	uint64_t gen;

	pthread_mutex_lock(&ino->lock);
	gen = ino->attr_gen;
	pthread_mutex_unlock(&ino->lock);
	return gen;
}

bool gw_inode_set_attr_since_locked(struct gw_inode *ino,
				    const struct nfsc_attr *attr, uint64_t gen)
{
	GW_ASSERT_HELD(&ino->lock);
	if (ino->attr_gen != gen)
		return false;
	ino->attr = *attr;
	clock_gettime(CLOCK_MONOTONIC, &ino->attr_at);
	ino->attr_valid = true;
	ino->attr_gen++;
	return true;
}

bool gw_inode_set_attr_since(struct gw_inode *ino,
			     const struct nfsc_attr *attr, uint64_t gen)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	bool set;

	pthread_mutex_lock(&ino->lock);
	set = gw_inode_set_attr_since_locked(ino, attr, gen);
	pthread_mutex_unlock(&ino->lock);
	return set;
}

/* LOOKUP and READDIRPLUS replies may have been answered before a WRITE
 * whose post-op attributes we already hold: never step back in ctime. */
void gw_inode_set_attr_if_newer(struct gw_inode *ino,
				const struct nfsc_attr *attr)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	if (!ino->attr_valid || !gw_attr_newer(&ino->attr, attr)) {
		ino->attr = *attr;
		clock_gettime(CLOCK_MONOTONIC, &ino->attr_at);
		ino->attr_valid = true;
		ino->attr_gen++;
	}
	pthread_mutex_unlock(&ino->lock);
}

void gw_inode_invalidate_attr(struct gw *gw, struct gw_inode *ino)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	ino->attr_valid = false;
	ino->attr_dropped = true;
	gw_dirknown_free(ino->known);	/* changed: not known how */
	ino->known = NULL;
	pthread_mutex_unlock(&ino->lock);
	gw_md_note_changed(gw, ino);
}

double gw_inode_ttl_left(struct gw *gw, struct gw_inode *ino)
{
	double left = 0;

	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	if (ino->attr_valid)
		left = gw_attr_ttl_left(gw, &ino->attr, &ino->attr_at);
	pthread_mutex_unlock(&ino->lock);
	return left;
}

void gw_inode_note_fresh(struct gw_inode *ino, pid_t tid)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	ino->fresh_tid = tid;
	ino->fresh_gen = ino->attr_gen;
	clock_gettime(CLOCK_MONOTONIC, &ino->fresh_at);
	pthread_mutex_unlock(&ino->lock);
}

/* The kernel checks a file's attributes on the way to an OPEN: a LOOKUP
 * when its entry expired, a GETATTR when its attributes did (its
 * permission check, default_permissions). Each comes to the gateway
 * after the open(2) began, so the origin's answer to it is as good a
 * close-to-open check as a GETATTR of the OPEN's own; asking again would
 * double the calls of every open of a file whose attributes the kernel
 * let go (a tree read more slowly than acregmin). FUSE does not say which
 * system call a request serves: the same thread, the attributes
 * unchanged since, and a short time (a stat(2) by the same thread just
 * before its open(2) looks the same, and is taken for the open's check)
 * tell it; used once. */
bool gw_inode_take_fresh(struct gw_inode *ino, pid_t tid,
			 struct nfsc_attr *a)
{
	bool taken = false;

	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	if (ino->fresh_tid && ino->fresh_tid == tid && ino->attr_valid &&
	    ino->fresh_gen == ino->attr_gen &&
	    gw_elapsed_since(&ino->fresh_at) < GW_CTO_JOIN_SEC) {
		*a = ino->attr;
		taken = true;
	}
	ino->fresh_tid = 0;
	pthread_mutex_unlock(&ino->lock);
	return taken;
}

int gw_inode_cached_attr(struct gw *gw, struct gw_inode *ino,
			 struct nfsc_attr *out)
{
	GW_ASSERT_NOT_HELD(&ino->lock);
	int ret = -ENODATA;

	pthread_mutex_lock(&ino->lock);
	if (ino->attr_valid &&
	    gw_elapsed_since(&ino->attr_at) < gw_attr_ttl(gw, &ino->attr)) {
		*out = ino->attr;
		ret = 0;
	}
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

void gw_inode_note_name(struct gw_inode *ino, uint64_t dir, const char *name,
			const struct nfsc_attr *a)
{
	char *n, *old;
	bool same;

	if (!a || a->type != NFSC_REG || ino->nodeid == FUSE_ROOT_ID)
		return;
	pthread_mutex_lock(&ino->lock);
	same = ino->name && ino->name_dir == dir && !strcmp(ino->name, name);
	pthread_mutex_unlock(&ino->lock);
	if (same || !(n = strdup(name)))
		return;
	pthread_mutex_lock(&ino->lock);
	old = ino->name;
	ino->name = n;
	ino->name_dir = dir;
	pthread_mutex_unlock(&ino->lock);
	free(old);
}

char *gw_inode_refused_name(struct gw_inode *ino, uint64_t *dir)
{
	char *n = NULL;

	pthread_mutex_lock(&ino->lock);
	if (ino->write_refused && !ino->opens && !ino->opening && ino->name) {
		n = strdup(ino->name);
		*dir = ino->name_dir;
		ino->write_refused = false;
	}
	pthread_mutex_unlock(&ino->lock);
	return n;
}

/* Fill a fuse_entry_param for ino with attributes a. */
void gw_make_entry(struct gw *gw, struct gw_inode *ino,
		       const struct nfsc_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino->nodeid;
	e->generation = gw_node_generation(gw, ino->nodeid);
	gw_attr_to_stat(a, ino->nodeid, &e->attr);
	e->attr_timeout = gw_attr_ttl(gw, a);
	e->entry_timeout = gw->o->acdirmin;
}
