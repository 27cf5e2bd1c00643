/* access.c - what the origin lets a user do with a file.
 *
 * With default_permissions the kernel checks mode bits itself, but only
 * the origin knows root squash, ACLs and id mapping. So open asks ACCESS
 * (as the caller) before any byte is served, cached data included;
 * answers are kept per inode and credential (uid, gid and supplementary
 * groups: the origin may grant through any of them) for the attribute
 * timeout, and only while the inode's attributes show the file as it was
 * when the origin answered: a ctime, mode, owner or group that changed
 * since (seen by a GETATTR, a LOOKUP or READDIRPLUS, or made by a SETATTR
 * through the mount) drops the answer, as the Linux NFS client drops its
 * access cache. Answers are also kept across a restart (remember.c), aged
 * from when the origin gave them. The gateway's own WRITEs move the ctime without touching
 * permissions: gw_access_restamp carries the answers over them.
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

/* Do the attributes a still show the file the answer was stamped with? */
static bool stamp_holds(const struct gw_access *s, const struct nfsc_attr *a)
{
	return s->ctime.tv_sec == a->ctime.tv_sec &&
	       s->ctime.tv_nsec == a->ctime.tv_nsec &&
	       s->mode == a->mode && s->fuid == a->uid && s->fgid == a->gid;
}

static void stamp(struct gw_access *s, const struct nfsc_attr *a)
{
	s->stamped = true;
	s->ctime = a->ctime;
	s->mode = a->mode;
	s->fuid = a->uid;
	s->fgid = a->gid;
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

		if (a->valid && (!a->stamped || !ino->attr_valid ||
				 !stamp_holds(a, &ino->attr))) {
			/* The file changed (or the gateway no longer knows
			 * how it is): the origin may answer otherwise now. */
			a->valid = false;
			continue;
		}
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

/* Keep an answer, stamped with the attributes that came with it (else the
 * inode's): unstamped, it is not kept. */
static void remember(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, uint32_t asked,
		     uint32_t granted, const struct nfsc_post *post)
{
	struct gw_access *slot, kept;

	pthread_mutex_lock(&ino->lock);
	if (!post->has_attr && !ino->attr_valid) {
		pthread_mutex_unlock(&ino->lock);
		return;
	}
	slot = &ino->access[ino->access_next++ % GW_ACCESS_SLOTS];
	stamp(slot, post->has_attr ? &post->attr : &ino->attr);
	slot->valid = true;
	slot->uid = cr->uid;
	slot->gid = cr->gid;
	slot->groups = groups_hash(cr);
	slot->asked = asked;
	slot->granted = granted;
	slot->at = now_mono();
	kept = *slot;
	pthread_mutex_unlock(&ino->lock);
	gw_md_note_access(gw, ino->nodeid, &kept);	/* across a restart */
}

/* The origin is lost (offline.c): this run's answer for the credential,
 * else the one kept in md.log, at any age, if the file's last known
 * attributes still show the file it was given for; none: -EHOSTDOWN for
 * a file (the origin's rules, root squash and ACLs, are not guessed). */
static int offline_answer(struct gw *gw, struct gw_inode *ino,
			  const struct nfsc_cred *cr, uint32_t want)
{
	uint64_t groups = groups_hash(cr);
	struct gw_access kept;
	struct nfsc_attr a;
	int ret = -EHOSTDOWN;
	unsigned i;

	if (gw_offline_attr(gw, ino, &a))
		return -EHOSTDOWN;
	pthread_mutex_lock(&ino->lock);
	for (i = 0; i < GW_ACCESS_SLOTS; i++) {
		struct gw_access *s = &ino->access[i];

		if (!s->valid || !s->stamped || !stamp_holds(s, &a) ||
		    s->uid != cr->uid || s->gid != cr->gid ||
		    s->groups != groups || (s->asked & want) != want)
			continue;
		ret = (s->granted & want) == want ? 0 : -EACCES;
		break;
	}
	pthread_mutex_unlock(&ino->lock);
	if (ret == -EHOSTDOWN &&
	    gw_md_access_any(gw, ino->nodeid, cr->uid, cr->gid, groups,
			     &kept) &&
	    stamp_holds(&kept, &a) && (kept.asked & want) == want)
		ret = (kept.granted & want) == want ? 0 : -EACCES;
	/* A directory: searched or listed as the kernel allowed by its
	 * mode bits (default_permissions), as online, where LOOKUP and
	 * READDIRPLUS are not preceded by an ACCESS of ours either. */
	if (ret == -EHOSTDOWN && a.type == NFSC_DIR)
		ret = 0;
	return ret;
}

int gw_access_check(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, int mask,
		    struct nfsc_attr *fresh, bool *has_fresh)
{
	struct nfsc_post post;
	bool dir;
	uint32_t want, all, granted = 0;
	int ret;

	GW_ASSERT_NOT_HELD(&ino->lock);
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
	if (ret == -EHOSTDOWN)
		return offline_answer(gw, ino, cr, want);
	if (ret)
		return ret;
	remember(gw, ino, cr, all, granted, &post);
	/* The reply carries the file's attributes: an open needs no GETATTR
	 * of its own. */
	if (post.has_attr && fresh && has_fresh) {
		*fresh = post.attr;
		*has_fresh = true;
	}
	return (granted & want) == want ? 0 : -EACCES;
}

void gw_access_note_search(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_cred *cr)
{
	struct nfsc_post none = { 0 };
	int ret;

	GW_ASSERT_NOT_HELD(&dir->lock);
	/* The origin answered a LOOKUP in dir as cr: cr may search dir (at
	 * its version now). Kept like an ACCESS answer of ACC_LOOKUP alone,
	 * unless one that covers it is kept already. */
	if (!cached(gw, dir, cr, ACC_LOOKUP, &ret))
		remember(gw, dir, cr, ACC_LOOKUP, ACC_LOOKUP, &none);
}

void gw_access_restamp(struct gw_inode *ino, const struct nfsc_attr *before,
		       const struct nfsc_attr *after)
{
	unsigned i;

	GW_ASSERT_HELD(&ino->lock);
	if (before->mode != after->mode || before->uid != after->uid ||
	    before->gid != after->gid)
		return;
	for (i = 0; i < GW_ACCESS_SLOTS; i++) {
		struct gw_access *a = &ino->access[i];

		if (a->valid && a->stamped && stamp_holds(a, before))
			stamp(a, after);
	}
}
