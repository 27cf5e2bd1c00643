/* access.c - what the origin lets a user do with a file.
 *
 * With default_permissions the kernel checks mode bits itself, but only
 * the origin knows root squash, ACLs and id mapping. So open asks ACCESS
 * (as the caller) before any byte is served, cached data included;
 * answers are kept per inode and credential (uid, gid and supplementary
 * groups: the origin may grant through any of them) for the attribute
 * timeout.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gw_i.h"

#define ACC_READ	0x0001
#define ACC_LOOKUP	0x0002
#define ACC_MODIFY	0x0004
#define ACC_EXTEND	0x0008
#define ACC_DELETE	0x0010
#define ACC_EXECUTE	0x0020

static uint32_t mask_to_nfs(int mask, bool dir)
{
	uint32_t m = 0;

	if (mask & R_OK)
		m |= ACC_READ;
	if (mask & W_OK)
		m |= dir ? (ACC_MODIFY | ACC_EXTEND | ACC_DELETE) :
			   (ACC_MODIFY | ACC_EXTEND);
	if (mask & X_OK)
		m |= dir ? ACC_LOOKUP : ACC_EXECUTE;
	return m;
}

static double now_mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* FNV-1a of the group list, in the order the kernel gave it. Two lists
 * that collide (2^-64) would share answers; the order matters only in
 * that the same set in another order misses the cache. */
static uint64_t groups_hash(const struct nfsc_cred *cr)
{
	uint64_t h = 0xcbf29ce484222325ull ^ cr->ngroups;

	for (uint32_t i = 0; i < cr->ngroups && i < NFSC_NGROUPS_MAX; i++) {
		h ^= cr->groups[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* A cached answer for this credential that covers every bit of want. */
static bool cached(struct gw *gw, struct gw_inode *ino,
		   const struct nfsc_cred *cr, uint32_t want, int *ret)
{
	uint64_t groups = groups_hash(cr);
	double now = now_mono();
	bool hit = false;
	unsigned i;

	pthread_mutex_lock(&ino->lock);
	for (i = 0; i < GW_ACCESS_SLOTS; i++) {
		struct gw_access *a = &ino->access[i];

		if (!a->valid || a->uid != cr->uid || a->gid != cr->gid ||
		    a->groups != groups || now - a->at > gw_attr_ttl(gw, &ino->attr) ||
		    (a->asked & want) != want)
			continue;
		*ret = (a->granted & want) == want ? 0 : -EACCES;
		hit = true;
		break;
	}
	pthread_mutex_unlock(&ino->lock);
	return hit;
}

static void remember(struct gw_inode *ino, const struct nfsc_cred *cr,
		     uint32_t asked, uint32_t granted)
{
	struct gw_access *slot;

	pthread_mutex_lock(&ino->lock);
	slot = &ino->access[ino->access_next++ % GW_ACCESS_SLOTS];
	slot->valid = true;
	slot->uid = cr->uid;
	slot->gid = cr->gid;
	slot->groups = groups_hash(cr);
	slot->asked = asked;
	slot->granted = granted;
	slot->at = now_mono();
	pthread_mutex_unlock(&ino->lock);
}

int gw_access_check(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, int mask,
		    struct nfsc_attr *fresh, bool *has_fresh)
{
	struct nfsc_post post;
	bool dir;
	uint32_t want, all, granted = 0;
	int ret;

	if (has_fresh)
		*has_fresh = false;
	pthread_mutex_lock(&ino->lock);
	dir = ino->attr_valid && ino->attr.type == NFSC_DIR;
	pthread_mutex_unlock(&ino->lock);
	want = mask_to_nfs(mask, dir);
	if (!want)
		return 0;	/* F_OK: the lookup already proved it exists */
	if (cached(gw, ino, cr, want, &ret))
		return ret;
	/* Ask for everything at once so the next check is a hit. */
	all = mask_to_nfs(R_OK | W_OK | X_OK, dir);
	ret = nfsc_access(gw->nfs, cr, &ino->fh, all, &granted, &post);
	if (ret)
		return ret;
	remember(ino, cr, all, granted);
	/* The reply carries the file's attributes: an open needs no GETATTR
	 * of its own. */
	if (post.has_attr && fresh && has_fresh) {
		*fresh = post.attr;
		*has_fresh = true;
	}
	return (granted & want) == want ? 0 : -EACCES;
}
