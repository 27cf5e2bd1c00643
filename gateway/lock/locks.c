/* locks.c - fcntl, OFD and flock locks through the mount, taken at the
 * origin with NLM (doc/locks.md).
 *
 * The kernel gives every lock request its owner (fi->lock_owner): a
 * process's files for fcntl locks, the open file description for OFD and
 * flock locks, lockd's owner for a knfsd client. Each is an NLM owner of
 * its own: oh is the owner's id as text, svid a number given to it here
 * (servers such as knfsd tell owners of one client by svid alone, so two
 * owners never share one). Owners are kept per file (ino, owner) from the
 * first lock request to the close that lets them go:
 *   - FLUSH (a close(2) by a process) lets go that owner's locks on the
 *     file, as POSIX says (the kernel never sends a FUSE unlock for it);
 *   - RELEASE (the last close of an open file) lets go the locks taken
 *     through it and still held: OFD and flock locks, whose owner is the
 *     open file.
 * Letting go is one NLM UNLOCK of the whole file for that owner: exactly
 * its locks, no other owner's.
 *
 * Each owner is recorded in the takeover state (gw_state.h) before its
 * first LOCK goes out: a successor (an upgrade, or after a crash) has the
 * same owners with the same svids, so the closes that come to it let go
 * what its predecessor took.
 *
 * flock locks are whole-file NLM locks of the open file's owner, as the
 * Linux NFS client takes them: they conflict with fcntl locks of other
 * owners at the origin (locally they would not).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "cred_i.h"
#include "gw_state.h"
#include "inode_i.h"
#include "lock_i.h"

/* svids start above the largest pid Linux gives (2^22), so that one
 * reported back by F_GETLK is never taken for a process of this host. */
#define SVID_BASE 0x00400000u

static inline size_t bucket_of(uint64_t owner)
{
	return (size_t)((owner * 0x9E3779B97F4A7C15ull) >> 56) %
	       GW_LOCK_BUCKETS;
}

int gw_lock_errno(int ret)
{
	switch (ret) {
	case 0:
	case -EAGAIN:
	case -EDEADLK:
	case -ESTALE:
	case -EROFS:
	case -EFBIG:
	case -EINTR:
		return -ret;
	case -EINPROGRESS:	/* grace: only after waiting it out */
	default:
		return ENOLCK;
	}
}

/* l->lock held: a free record of the takeover state for o (NULL: no
 * state, or all taken: o is not kept for a successor, logged once). */
static void rec_put(struct gw_locks *l, struct gw_lock_owner *o)
{
	struct gw_lock_rec *recs, *r;
	uint32_t i;

	if (!gw_state)
		return;
	recs = gw_state_locks(gw_state);
	for (i = 0; i < GW_STATE_LOCKS; i++) {
		r = &recs[(l->rec_hint + i) % GW_STATE_LOCKS];
		if (__atomic_load_n(&r->nodeid, __ATOMIC_RELAXED))
			continue;
		l->rec_hint = (l->rec_hint + i + 1) % GW_STATE_LOCKS;
		r->owner = o->owner;
		r->file = o->file;
		r->svid = o->svid;
		r->fh = o->fh;
		r->cred = o->cred;
		__atomic_store_n(&r->nodeid, o->nodeid, __ATOMIC_RELEASE);
		o->rec = r;
		return;
	}
	if (!l->rec_full_told)
		gw_log("locks: more than %u lock owners: the others are not "
		       "kept for a successor", GW_STATE_LOCKS);
	l->rec_full_told = true;
}

static void rec_clear(struct gw_lock_owner *o)
{
	if (o->rec)
		__atomic_store_n(&o->rec->nodeid, 0, __ATOMIC_RELEASE);
	o->rec = NULL;
}

/* A successor: the owners its predecessor recorded, as its own. */
static int recs_adopt(struct gw_locks *l)
{
	struct gw_lock_owner *o;
	size_t n = 0;
	uint32_t i;

	for (i = 0; i < GW_STATE_LOCKS; i++) {
		struct gw_lock_rec *r = &gw_state_locks(gw_state)[i];

		if (!__atomic_load_n(&r->nodeid, __ATOMIC_ACQUIRE))
			continue;
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		*o = (struct gw_lock_owner){
			.nodeid = r->nodeid, .owner = r->owner,
			.file = r->file, .svid = r->svid, .granted = true,
			.fh = r->fh, .cred = r->cred, .rec = r,
			.ranges_unknown = true,
		};
		if (o->svid >= l->next_svid && o->svid < 0x7fffffffu - 1)
			l->next_svid = o->svid + 1;
		o->next = l->by_owner[bucket_of(o->owner)];
		l->by_owner[bucket_of(o->owner)] = o;
		n++;
	}
	__atomic_store_n(&l->owners, n, __ATOMIC_RELAXED);
	if (n)
		gw_log("takeover: %zu lock owners at the origin taken over",
		       n);
	return 0;
}

int gw_locks_init(struct gw *gw)
{
	struct gw_locks *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->relcond, NULL);
	pthread_mutex_init(&l->wlock, NULL);
	pthread_cond_init(&l->wcond, NULL);
	pthread_mutex_init(&l->nsm_lock, NULL);
	{
		/* A reclaim pass is not starved by a stream of lock calls
		 * (no reader takes it twice). */
		pthread_rwlockattr_t ra;

		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra,
			PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&l->reclaim_rw, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	pthread_mutex_init(&l->rlock, NULL);
	pthread_cond_init(&l->rcond, NULL);
	l->nsm_fd = -1;
	l->next_svid = SVID_BASE;
	gw->locks = l;
	if (gw->successor && gw_state) {
		int ret = recs_adopt(l);

		if (ret)
			return ret;
	}
	return gw_lock_nsm_init(gw);
}

void gw_locks_free(struct gw *gw)
{
	struct gw_locks *l = gw->locks;
	size_t i;

	if (!l)
		return;
	gw_lock_reclaim_stop(gw);
	for (i = 0; i < GW_LOCK_BUCKETS; i++) {
		struct gw_lock_owner *o, *next;

		for (o = l->by_owner[i]; o; o = next) {
			next = o->next;
			gw_lock_ranges_free(o);
			free(o);
		}
	}
	gw_lock_nsm_free(l);
	pthread_cond_destroy(&l->rcond);
	pthread_mutex_destroy(&l->rlock);
	pthread_rwlock_destroy(&l->reclaim_rw);
	pthread_cond_destroy(&l->wcond);
	pthread_mutex_destroy(&l->wlock);
	pthread_cond_destroy(&l->relcond);
	pthread_mutex_destroy(&l->lock);
	free(l);
	gw->locks = NULL;
}

static void owner_oh(uint64_t owner, struct nfsc_lock *lk)
{
	snprintf(lk->oh, sizeof(lk->oh), "%016" PRIx64, owner);
}

/* l->lock held: (nodeid, owner)'s entry, or NULL; *svid the svid of
 * owner on any file (0: none). */
static struct gw_lock_owner *owner_find(struct gw_locks *l, uint64_t nodeid,
					uint64_t owner, uint32_t *svid)
{
	struct gw_lock_owner *o;

	if (svid)
		*svid = 0;
	for (o = l->by_owner[bucket_of(owner)]; o; o = o->next) {
		if (o->owner != owner)
			continue;
		if (svid)
			*svid = o->svid;
		if (o->nodeid == nodeid)
			return o;
	}
	return NULL;
}

/* l->lock held: the entry, made if new (svid: the owner's, or new). */
static struct gw_lock_owner *owner_make(struct gw_locks *l,
					struct gw_inode *ino, uint64_t owner,
					uint64_t file,
					const struct nfsc_cred *cr,
					uint32_t want_svid)
{
	struct gw_lock_owner *o;
	uint32_t svid;

	o = owner_find(l, ino->nodeid, owner, &svid);
	if (o)
		return o;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	if (want_svid)
		svid = want_svid;
	if (!svid) {
		svid = l->next_svid++;
		if (l->next_svid >= 0x7fffffffu)
			l->next_svid = SVID_BASE;
	}
	o->nodeid = ino->nodeid;
	o->owner = owner;
	o->file = file;
	o->svid = svid;
	o->fh = ino->fh;
	o->cred = *cr;
	rec_put(l, o);
	o->next = l->by_owner[bucket_of(owner)];
	l->by_owner[bucket_of(owner)] = o;
	__atomic_add_fetch(&l->owners, 1, __ATOMIC_RELAXED);
	return o;
}

int gw_lock_owner_get(struct gw *gw, struct gw_inode *ino, uint64_t owner,
		      uint64_t file, const struct nfsc_cred *cr,
		      struct nfsc_lock *lk)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner *o;

	pthread_mutex_lock(&l->lock);
	o = owner_make(l, ino, owner, file, cr, 0);
	if (o)
		lk->svid = o->svid;
	pthread_mutex_unlock(&l->lock);
	if (!o)
		return -ENOMEM;
	gw_lock_nsm_update(l);
	owner_oh(owner, lk);
	return 0;
}

void gw_lock_granted(struct gw *gw, struct gw_inode *ino, uint64_t owner,
		     uint64_t file, const struct nfsc_cred *cr,
		     const struct nfsc_lock *lk)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner *o;

	__atomic_add_fetch(&l->granted, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&l->lock);
	o = owner_make(l, ino, owner, file, cr, lk->svid);
	if (o) {
		o->granted = true;
		gw_lock_ranges_set(o, lk, true);
	}
	pthread_mutex_unlock(&l->lock);
	if (o) {
		gw_lock_nsm_update(l);
		gw_lock_reclaim_start(gw);
	}
	if (!o) {
		/* Not remembered, it could never be let go: let it go now. */
		gw_log("locks: out of memory: a lock granted on file %llu "
		       "is let go", (unsigned long long)ino->nodeid);
		nfsc_unlock(gw->nfs, cr, &ino->fh, lk);
	}
}

/* Send o's UNLOCK of the whole file and free o (taken out of the table). */
static void owner_let_go(struct gw *gw, struct gw_lock_owner *o)
{
	struct nfsc_lock lk = { .svid = o->svid };
	int ret;

	if (o->granted) {
		owner_oh(o->owner, &lk);
		pthread_rwlock_rdlock(&gw->locks->reclaim_rw);
		ret = nfsc_unlock(gw->nfs, &o->cred, &o->fh, &lk);
		pthread_rwlock_unlock(&gw->locks->reclaim_rw);
		__atomic_add_fetch(&gw->locks->released, 1, __ATOMIC_RELAXED);
		if (ret && ret != -ESTALE)
			gw_log("locks: the origin's UNLOCK of file %llu failed "
			       "(%s): its locks may stay there",
			       (unsigned long long)o->nodeid,
			       strerror(-ret));
	}
	rec_clear(o);
	__atomic_sub_fetch(&gw->locks->owners, 1, __ATOMIC_RELAXED);
	if (o->lost)
		__atomic_sub_fetch(&gw->locks->lost_owners, 1,
				   __ATOMIC_RELAXED);
	gw_lock_ranges_free(o);
	free(o);
	gw_lock_nsm_update(gw->locks);
}

void gw_lock_flush(struct gw *gw, struct gw_inode *ino, uint64_t owner)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner **pp, *o = NULL;

	if (!l || !__atomic_load_n(&l->owners, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&l->lock);
	for (pp = &l->by_owner[bucket_of(owner)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->owner == owner && (*pp)->nodeid == ino->nodeid) {
			o = *pp;
			*pp = o->next;
			break;
		}
	}
	pthread_mutex_unlock(&l->lock);
	if (o)
		owner_let_go(gw, o);
}

void gw_lock_release(struct gw *gw, struct gw_inode *ino, uint64_t file)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner *gone = NULL, *o, **pp;
	size_t i;

	if (!l || !__atomic_load_n(&l->owners, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&l->lock);
	for (i = 0; i < GW_LOCK_BUCKETS; i++) {
		for (pp = &l->by_owner[i]; (o = *pp);) {
			if (o->nodeid == ino->nodeid && o->file == file) {
				*pp = o->next;
				o->next = gone;
				gone = o;
			} else {
				pp = &o->next;
			}
		}
	}
	pthread_mutex_unlock(&l->lock);
	for (o = gone; o; o = gone) {
		gone = o->next;
		owner_let_go(gw, o);
	}
}

void gw_lock_release_begin(struct gw *gw, struct gw_inode *ino,
			   uint64_t file, struct gw_lock_releasing *rel)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner *o;
	size_t i;

	rel->nodeid = 0;
	if (!l || !__atomic_load_n(&l->owners, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&l->lock);
	for (i = 0; i < GW_LOCK_BUCKETS && !rel->nodeid; i++)
		for (o = l->by_owner[i]; o; o = o->next)
			if (o->nodeid == ino->nodeid && o->file == file &&
			    o->granted) {
				rel->nodeid = ino->nodeid;
				rel->next = l->releasing;
				l->releasing = rel;
				break;
			}
	pthread_mutex_unlock(&l->lock);
}

void gw_lock_release_end(struct gw *gw, struct gw_lock_releasing *rel)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_releasing **pp;

	if (!rel->nodeid)
		return;
	pthread_mutex_lock(&l->lock);
	for (pp = &l->releasing; *pp; pp = &(*pp)->next) {
		if (*pp == rel) {
			*pp = rel->next;
			break;
		}
	}
	pthread_cond_broadcast(&l->relcond);
	pthread_mutex_unlock(&l->lock);
}

/* A lock on nodeid was refused: wait for the RELEASEs of its open files
 * in progress (gw_lock_release_begin); true if there were any (ask
 * again). */
static bool releases_waited(struct gw_locks *l, uint64_t nodeid)
{
	struct gw_lock_releasing *r;
	bool waited = false, any;

	pthread_mutex_lock(&l->lock);
	do {
		any = false;
		for (r = l->releasing; r && !any; r = r->next)
			any = r->nodeid == nodeid;
		if (any) {
			waited = true;
			pthread_cond_wait(&l->relcond, &l->lock);
		}
	} while (any);
	pthread_mutex_unlock(&l->lock);
	return waited;
}

/* Was (nodeid, owner) lost when the origin restarted? */
static bool owner_lost(struct gw_locks *l, uint64_t nodeid, uint64_t owner)
{
	struct gw_lock_owner *o;
	bool lost;

	if (!__atomic_load_n(&l->lost_owners, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&l->lock);
	o = owner_find(l, nodeid, owner, NULL);
	lost = o && o->lost;
	pthread_mutex_unlock(&l->lock);
	return lost;
}

bool gw_lock_lost(struct gw *gw, uint64_t nodeid, uint64_t file)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner *o;
	bool lost = false;
	size_t i;

	if (!l || !__atomic_load_n(&l->lost_owners, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&l->lock);
	for (i = 0; i < GW_LOCK_BUCKETS && !lost; i++)
		for (o = l->by_owner[i]; o && !lost; o = o->next)
			lost = o->lost && o->nodeid == nodeid &&
			       o->file == file;
	pthread_mutex_unlock(&l->lock);
	return lost;
}

/* The lock of a FUSE request as NLM gives it. */
static void lock_range(const struct flock *fl, struct nfsc_lock *lk)
{
	lk->off = fl->l_start > 0 ? (uint64_t)fl->l_start : 0;
	lk->len = fl->l_len > 0 ? (uint64_t)fl->l_len : 0;
	lk->exclusive = fl->l_type == F_WRLCK;
}

void gw_getlk(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi,
	      struct flock *lock)
{
	struct gw *gw = req_gw(req);
	struct gw_locks *l = gw->locks;
	struct nfsc_lock lk = { 0 }, holder;
	struct nfsc_cred cr;
	uint32_t svid = 0;
	int ret;
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);

	/* The owner's own locks do not conflict: it is asked as itself. An
	 * owner that never locked holds nothing there, and svid 0 is no
	 * owner's. */
	pthread_mutex_lock(&l->lock);
	owner_find(l, ino->nodeid, fi->lock_owner, &svid);
	pthread_mutex_unlock(&l->lock);
	lock_range(lock, &lk);
	lk.svid = svid;
	owner_oh(fi->lock_owner, &lk);
	gw_req_cred(req, &cr);
	ret = nfsc_lock_test(gw->nfs, &cr, &ino->fh, &lk, &holder);
	if (ret == -EAGAIN && releases_waited(l, ino->nodeid))
		ret = nfsc_lock_test(gw->nfs, &cr, &ino->fh, &lk, &holder);
	if (ret == 0) {
		lock->l_type = F_UNLCK;
	} else if (ret == -EAGAIN) {
		lock->l_type = holder.exclusive ? F_WRLCK : F_RDLCK;
		lock->l_whence = SEEK_SET;
		lock->l_start = (off_t)(holder.off > INT64_MAX ? INT64_MAX :
					holder.off);
		lock->l_len = (off_t)(holder.len > INT64_MAX ? 0 : holder.len);
		/* NLM's svid is the holder's number at its client, not a
		 * process of this host. */
		lock->l_pid = 0;
	} else {
		fuse_reply_err(req, gw_lock_errno(ret));
		return;
	}
	fuse_reply_lock(req, lock);
}

/* One LOCK of lk for the request's owner, recorded if granted; under the
 * reclaim lock's read side, so a reclaim pass never runs between the two. */
static int lock_once(struct gw *gw, struct gw_inode *ino,
		     struct fuse_file_info *fi, const struct nfsc_cred *cr,
		     struct nfsc_lock *lk)
{
	struct gw_locks *l = gw->locks;
	int ret;

	pthread_rwlock_rdlock(&l->reclaim_rw);
	ret = nfsc_lock(gw->nfs, cr, &ino->fh, lk);
	if (ret == 0)
		gw_lock_granted(gw, ino, fi->lock_owner, fi->fh, cr, lk);
	pthread_rwlock_unlock(&l->reclaim_rw);
	return ret;
}

/* A lock or unlock of the owner of fi, for setlk and flock. */
static void set_lock(fuse_req_t req, fuse_ino_t nodeid,
		     struct fuse_file_info *fi, const struct flock *fl,
		     bool sleep)
{
	struct gw *gw = req_gw(req);
	struct gw_locks *l = gw->locks;
	struct nfsc_lock lk = { 0 };
	struct nfsc_cred cr;
	uint32_t svid = 0;
	int ret;
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);

	lock_range(fl, &lk);
	gw_req_cred(req, &cr);
	if (fl->l_type == F_UNLCK) {
		struct gw_lock_owner *o;

		/* An owner that never locked the file holds nothing. */
		pthread_mutex_lock(&l->lock);
		if (owner_find(l, ino->nodeid, fi->lock_owner, &svid))
			lk.svid = svid;
		pthread_mutex_unlock(&l->lock);
		if (!lk.svid) {
			fuse_reply_err(req, 0);
			return;
		}
		owner_oh(fi->lock_owner, &lk);
		pthread_rwlock_rdlock(&l->reclaim_rw);
		ret = nfsc_unlock(gw->nfs, &cr, &ino->fh, &lk);
		pthread_mutex_lock(&l->lock);
		o = owner_find(l, ino->nodeid, fi->lock_owner, NULL);
		if (o)
			gw_lock_ranges_set(o, &lk, false);
		pthread_mutex_unlock(&l->lock);
		pthread_rwlock_unlock(&l->reclaim_rw);
		fuse_reply_err(req, ret == -ESTALE ? 0 : gw_lock_errno(ret));
		return;
	}
	if (owner_lost(l, ino->nodeid, fi->lock_owner)) {
		fuse_reply_err(req, EIO);
		return;
	}
	ret = gw_lock_owner_get(gw, ino, fi->lock_owner, fi->fh, &cr, &lk);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ret = lock_once(gw, ino, fi, &cr, &lk);
	/* Refused: maybe by this file's own lock, let go by a RELEASE in
	 * progress; waited for outside the reclaim lock (the release's
	 * unlock takes it too, and a reclaim pass waiting for it is
	 * preferred over new readers). */
	if (ret == -EAGAIN && releases_waited(l, ino->nodeid))
		ret = lock_once(gw, ino, fi, &cr, &lk);
	if (ret == 0) {
		fuse_reply_err(req, 0);
		return;
	}
	if (ret == -EAGAIN)
		__atomic_add_fetch(&l->denied, 1, __ATOMIC_RELAXED);
	/* Held by another (a blocking request waits), or the origin is in
	 * its grace period (every request waits it out, as the Linux NFS
	 * client does). */
	if ((ret == -EAGAIN && sleep) || ret == -EINPROGRESS) {
		ret = gw_lock_wait(gw, req, ino, fi->lock_owner, fi->fh, &cr,
				   &lk, !sleep);
		if (ret == 0)
			return;		/* answered by the waiters' thread */
	}
	fuse_reply_err(req, gw_lock_errno(ret));
}

void gw_setlk(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi,
	      struct flock *lock, int sleep)
{
	set_lock(req, nodeid, fi, lock, sleep != 0);
}

void gw_flock(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi,
	      int op)
{
	struct flock fl = { .l_whence = SEEK_SET };

	switch (op & ~LOCK_NB) {
	case LOCK_SH:
		fl.l_type = F_RDLCK;
		break;
	case LOCK_EX:
		fl.l_type = F_WRLCK;
		break;
	case LOCK_UN:
		fl.l_type = F_UNLCK;
		break;
	default:
		fuse_reply_err(req, EINVAL);
		return;
	}
	set_lock(req, nodeid, fi, &fl, !(op & LOCK_NB));
}
