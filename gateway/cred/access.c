/* access.c - what the origin lets a user do with a file.
 *
 * With default_permissions the kernel checks mode bits itself, but only
 * the origin knows root squash, ACLs and id mapping. So open asks ACCESS
 * (as the caller) before any byte is served, cached data included;
 * answers are kept per inode and credential (uid, gid and supplementary
 * groups: the origin may grant through any of them), and only while the
 * inode's attributes show the file as it was when the origin answered: a
 * ctime, mode, owner or group that changed since (seen by a GETATTR, a
 * LOOKUP or READDIRPLUS, or made by a SETATTR through the mount) drops the
 * answer, as the Linux NFS client drops its access cache. An answer holds
 * for the attribute timeout, and past it, up to acregmax (acdirmax: the
 * longest the mount trusts anything the origin said), while attributes
 * got from the origin since, themselves within their timeout, still show
 * that file (the Linux client keeps its access cache while revalidated
 * attributes show no change): an open's one GETATTR (close-to-open) is
 * then all it asks of the origin for a file answered a minute before,
 * however young the file. Where no answer holds, the kernel's own
 * GETATTR on the way to an open is sent as an ACCESS
 * (gw_access_getattr): its reply carries the attributes, and the open
 * finds its answer. Answers are also kept across a restart (kept_md.c),
 * aged from when the origin gave them. The gateway's own WRITEs move the
 * ctime without touching permissions: gw_access_restamp carries the
 * answers over them.
 *
 * Other replies are answers too: a LOOKUP the origin answered lets the
 * caller search the directory (ACCESS3_LOOKUP), a READDIRPLUS read it
 * (ACCESS3_READ; refused: not), each kept with what is known of the file
 * for that credential and version. A listing, names or attributes kept
 * from an earlier run are shown only to a caller that holds such an
 * answer (gw_access_kept_listing; lookup.c): the kernel checks the
 * mode bits alone (default_permissions), and the origin's own refusals
 * (root squash, ACLs) would be lost on anything served without one.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cred_i.h"
#include "keep_i.h"

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
	double now = now_mono(), ttl, max;
	bool hit = false, confirmed;
	unsigned i;

	pthread_mutex_lock(&ino->lock);
	/* Attributes from the origin, within their timeout: an answer whose
	 * stamp they show holds up to acregmax (acdirmax), whatever its own
	 * timeout. */
	ttl = gw_attr_ttl(gw, &ino->attr);
	max = ino->attr.type == NFSC_DIR ? gw->o->acdirmax : gw->o->acregmax;
	confirmed = ino->attr_valid && gw_elapsed_since(&ino->attr_at) < ttl;
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
		    a->groups != groups || (now - a->at > ttl &&
					    (!confirmed || now - a->at > max)) ||
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
 * inode's): unstamped, it is not kept. An answer for some bits (a
 * LOOKUP's, a READDIRPLUS's) joins the one this credential holds for the
 * same version of the file, however old, keeping that one's age (the
 * joined answer is asked again as soon as the older part would be):
 * md.log keeps one answer per credential, and a listing's READ must not
 * cost the LOOKUP answered before it, nor the other way round. */
static void remember(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, uint32_t asked,
		     uint32_t granted, const struct nfsc_post *post)
{
	uint64_t groups = groups_hash(cr);
	struct gw_access *slot = NULL, fresh, kept;
	double now = now_mono();
	unsigned i;

	pthread_mutex_lock(&ino->lock);
	if (!post->has_attr && !ino->attr_valid) {
		pthread_mutex_unlock(&ino->lock);
		return;
	}
	memset(&fresh, 0, sizeof(fresh));
	stamp(&fresh, post->has_attr ? &post->attr : &ino->attr);
	for (i = 0; i < GW_ACCESS_SLOTS; i++) {
		struct gw_access *s = &ino->access[i];

		if (s->valid && s->stamped && s->uid == cr->uid &&
		    s->gid == cr->gid && s->groups == groups &&
		    s->ctime.tv_sec == fresh.ctime.tv_sec &&
		    s->ctime.tv_nsec == fresh.ctime.tv_nsec &&
		    s->mode == fresh.mode && s->fuid == fresh.fuid &&
		    s->fgid == fresh.fgid) {
			slot = s;
			break;
		}
	}
	if (slot && (slot->asked & ~asked)) {
		/* 1. Part of an answer: joins the one held. */
		slot->granted = (slot->granted & ~asked) | (granted & asked);
		slot->asked |= asked;
	} else {
		/* 2. A whole one: replaces the one held, or takes a slot. */
		if (!slot)
			slot = &ino->access[ino->access_next++ %
					    GW_ACCESS_SLOTS];
		*slot = fresh;
		slot->valid = true;
		slot->uid = cr->uid;
		slot->gid = cr->gid;
		slot->groups = groups;
		slot->asked = asked;
		slot->granted = granted;
		slot->at = now;
	}
	kept = *slot;
	pthread_mutex_unlock(&ino->lock);
	gw_md_note_access(gw, ino->nodeid, &kept);	/* across a restart */
}

/* The origin is lost (offline.c): this run's answer for the credential,
 * else the one kept in md.log, at any age, if the file's last known
 * attributes still show the file it was given for; none: -EHOSTDOWN,
 * for a directory too (the origin's rules, root squash and ACLs, are not
 * guessed: the mode bits the kernel checked are not all of them). */
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
	return ret;
}

int gw_access_check(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, int mask,
		    struct nfsc_attr *fresh, bool *has_fresh)
{
	struct nfsc_post post;
	enum nfsc_type type;
	struct nfsc_attr a;
	bool dir;
	uint32_t want, all, granted = 0;
	int ret;

	GW_ASSERT_NOT_HELD(&ino->lock);
	if (has_fresh)
		*has_fresh = false;
	/* A handle's type never changes: attributes let go, or (an inode
	 * made offline) only kept in md.log, still tell it; X_OK on a
	 * directory is LOOKUP, not EXECUTE. */
	pthread_mutex_lock(&ino->lock);
	type = ino->attr.type;
	pthread_mutex_unlock(&ino->lock);
	if (!type && gw_md_attr_any(gw, ino->nodeid, &a) == 0)
		type = a.type;
	dir = type == NFSC_DIR;
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

int gw_access_getattr(struct gw *gw, struct gw_inode *ino,
		      const struct nfsc_cred *cr, struct nfsc_attr *a)
{
	struct nfsc_post post;
	uint32_t all = mask_to_nfs(R_OK | W_OK | X_OK, false), granted = 0;
	int ret;

	GW_ASSERT_NOT_HELD(&ino->lock);
	pthread_mutex_lock(&ino->lock);
	ret = ino->attr.type == NFSC_REG ? 0 : -ENODATA;
	pthread_mutex_unlock(&ino->lock);
	if (ret || cached(gw, ino, cr, all, &ret))
		return -ENODATA;	/* not a file, or answered: GETATTR */
	ret = nfsc_access(gw->nfs, cr, &ino->fh, all, &granted, &post);
	if (ret)
		return ret;
	remember(gw, ino, cr, all, granted, &post);
	if (!post.has_attr)
		return -ENODATA;
	*a = post.attr;
	return 0;
}

void gw_access_note_listed(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_cred *cr,
			    const struct nfsc_attr *ver, bool granted,
			    bool searched)
{
	struct nfsc_post post = { .has_attr = true, .attr = *ver };
	uint32_t bits = ACC_READ | (searched ? ACC_LOOKUP : 0);
	struct gw_access reader;
	int ret;

	GW_ASSERT_NOT_HELD(&dir->lock);
	/* The origin answered (or refused) a READDIRPLUS of dir, version
	 * ver, as cr: an answer of ACC_READ, and of ACC_LOOKUP when it
	 * gave names' handles and attributes (what LOOKUPs would give:
	 * knfsd and ganesha give them only to a caller who may search the
	 * directory), unless one that says the same is held already. */
	if (!cached(gw, dir, cr, bits, &ret) || (ret == 0) != granted)
		remember(gw, dir, cr, bits, granted ? bits : 0, &post);
	if (!granted)
		return;
	/* And, apart from the answers of the directory as it is, the
	 * reader of this version: offline, a listing kept of it is shown to
	 * its own readers even once the directory is known to have
	 * changed since (gw_access_kept_listing). */
	memset(&reader, 0, sizeof(reader));
	stamp(&reader, ver);
	reader.valid = true;
	reader.uid = cr->uid;
	reader.gid = cr->gid;
	reader.groups = groups_hash(cr);
	reader.asked = reader.granted = ACC_READ;
	gw_md_note_reader(gw, dir->nodeid, &reader);
}

int gw_access_kept_listing(struct gw *gw, struct gw_inode *dir,
			   const struct nfsc_cred *cr,
			   const struct nfsc_attr *listed)
{
	struct gw_access r;
	struct nfsc_attr a;
	int ret;

	GW_ASSERT_NOT_HELD(&dir->lock);
	/* 1. An answer for the directory as it is: held (this run's, or
	 * kept), else the origin's now, else (offline) any held. */
	ret = gw_access_check(gw, dir, cr, R_OK, NULL, NULL);
	if (ret != -EHOSTDOWN)
		return ret;
	/* 2. Offline, none: cr read this very listing from the origin, and
	 * the directory's last known mode, owner and group are those it was
	 * read with (its names may have changed since, its rights not). */
	if (gw_md_reader_any(gw, dir->nodeid, cr->uid, cr->gid,
			     groups_hash(cr), &r) &&
	    r.ctime.tv_sec == listed->ctime.tv_sec &&
	    r.ctime.tv_nsec == listed->ctime.tv_nsec &&
	    gw_offline_attr(gw, dir, &a) == 0 && r.mode == a.mode &&
	    r.fuid == a.uid && r.fgid == a.gid)
		return 0;
	return -EHOSTDOWN;
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
