/* lock_reclaim.c - the origin restarted: the gateway takes its locks
 * again (doc/locks.md "Restarts").
 *
 * Each owner keeps the ranges it holds at the origin (what was granted,
 * less what was unlocked, with POSIX's rules). The lock manager's
 * connection is kept up while any owner exists (nfsc_lock_keep); each
 * time it is made again after a failure (nfsc_lock_epoch moved), the
 * origin may have restarted and forgotten every lock, so this thread
 * asks for every range again: a LOCK with reclaim set, which an origin in
 * its grace period grants; an origin outside its grace period refuses a
 * reclaim (DENIED_GRACE_PERIOD), and is then asked with a plain LOCK,
 * which it grants when the lock is still ours (the connection only
 * failed) or free (the restart's grace period is over, or it had none).
 * A range another client took meanwhile is lost: its owner is marked,
 * and its next lock request and its next read or write of the file
 * through the open file it locked with fail with EIO, as the Linux NFS
 * client (NFSv4) does for a lock it could not recover; logged, counted
 * (locks_lost_total). An owner taken over from a predecessor has no
 * ranges known: the origin is asked whether it still holds a lock of
 * that owner (probe_held); if not, the owner is lost the same way.
 *
 * A pass holds reclaim_rw for writing: lock and unlock calls (readers)
 * wait for it, so no range is asked for again after its owner let it go.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inode_i.h"
#include "lock_i.h"

#define PASS_POLL_MS 200

/* One range to ask for again (copied out of the table). */
struct want {
	struct want *next;
	uint64_t nodeid, owner;
	struct nfsc_fh fh;
	struct nfsc_cred cred;
	struct nfsc_lock lk;
};

/* A want of owner o (its file, credentials and svid) pushed on *list;
 * NULL when out of memory. Under l->lock. */
static struct want *want_push(struct want **list,
			      const struct gw_lock_owner *o)
{
	struct want *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->nodeid = o->nodeid;
	w->owner = o->owner;
	w->fh = o->fh;
	w->cred = o->cred;
	w->lk.svid = o->svid;
	w->next = *list;
	*list = w;
	return w;
}

static void mark_lost(struct gw *gw, uint64_t nodeid, uint64_t owner)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_owner *o;
	size_t i;

	pthread_mutex_lock(&l->lock);
	for (i = 0; i < GW_LOCK_BUCKETS; i++)
		for (o = l->by_owner[i]; o; o = o->next)
			if (o->nodeid == nodeid && o->owner == owner &&
			    !o->lost) {
				o->lost = true;
				__atomic_add_fetch(&l->lost_owners, 1,
						   __ATOMIC_RELAXED);
			}
	pthread_mutex_unlock(&l->lock);
}

/* Does the origin still hold a lock of w's owner (w->lk.svid) on its
 * file? A new connection is not a restart: an origin drops an idle one
 * (knfsd after some minutes), and keeps the locks. Asked as nobody's
 * owner (svid 0) for a write lock of the whole file: free means the
 * owner's locks are gone (false); a holder with the owner's svid means
 * they are there. Anything else (another client's lock in the way, an
 * error) cannot tell, and the owner is kept (true): a lock wrongly kept
 * is what the gateway did before it reclaimed; an EIO for a lock still
 * held would break its holder for nothing. In the origin's grace period
 * (after a restart) asked again each second, 2 minutes at most. */
static bool probe_held(struct gw *gw, const struct want *w)
{
	struct nfsc_lock probe = { .off = 0, .len = 0, .exclusive = true },
			 holder;
	int ret, i;

	snprintf(probe.oh, sizeof(probe.oh), "cachegw-probe");
	for (i = 0; i < 120; i++) {
		memset(&holder, 0, sizeof(holder));
		ret = nfsc_lock_test(gw->nfs, &w->cred, &w->fh, &probe,
				     &holder);
		if (ret != -EINPROGRESS)
			break;
		sleep(1);
	}
	if (ret == 0)
		return false;
	return true;
}

/* Ask for every range held again; the origin answered the lock
 * manager's connection anew (epoch). */
static void pass(struct gw *gw)
{
	struct gw_locks *l = gw->locks;
	struct want *head = NULL, *probes = NULL, *w;
	struct gw_lock_owner *o;
	struct gw_lock_range *r;
	unsigned done = 0, graced = 0, lost = 0, unknown = 0, kept = 0;
	size_t i;

	pthread_rwlock_wrlock(&l->reclaim_rw);
	pthread_mutex_lock(&l->lock);
	for (i = 0; i < GW_LOCK_BUCKETS; i++) {
		for (o = l->by_owner[i]; o; o = o->next) {
			if (!o->granted || o->lost)
				continue;
			if (o->ranges_unknown) {
				/* Taken over from a predecessor: its ranges
				 * are not known here, so they cannot be
				 * asked for again; whether the origin still
				 * holds them is asked below (probe_held). */
				if (!want_push(&probes, o))
					break;
				continue;
			}
			for (r = o->ranges; r; r = r->next) {
				w = want_push(&head, o);
				if (!w)
					break;
				w->lk.off = r->start;
				w->lk.len = r->end == UINT64_MAX ? 0 :
					    r->end - r->start;
				w->lk.exclusive = r->exclusive;
				snprintf(w->lk.oh, sizeof(w->lk.oh), "%016llx",
					 (unsigned long long)o->owner);
			}
		}
	}
	pthread_mutex_unlock(&l->lock);
	while ((w = head)) {
		int ret;

		head = w->next;
		w->lk.reclaim = true;
		ret = nfsc_lock(gw->nfs, &w->cred, &w->fh, &w->lk);
		if (ret == 0)
			graced++;
		if (ret == -EINPROGRESS) {
			/* Not in a grace period: ours still, or free. */
			w->lk.reclaim = false;
			ret = nfsc_lock(gw->nfs, &w->cred, &w->fh, &w->lk);
		}
		if (ret == 0) {
			done++;
			__atomic_add_fetch(&l->reclaimed, 1, __ATOMIC_RELAXED);
		} else if (ret != -ECANCELED && ret != -ESHUTDOWN) {
			lost++;
			__atomic_add_fetch(&l->lost, 1, __ATOMIC_RELAXED);
			gw_log("locks: a %s lock of file %llu [%llu, +%llu) "
			       "could not be taken again after the origin's "
			       "lock manager came back (%s): lost; its "
			       "holder's next operation on the file fails "
			       "with EIO", w->lk.exclusive ? "write" : "read",
			       (unsigned long long)w->nodeid,
			       (unsigned long long)w->lk.off,
			       (unsigned long long)w->lk.len,
			       ret == -EAGAIN ? "held by another client" :
			       strerror(-ret));
			mark_lost(gw, w->nodeid, w->owner);
		}
		free(w);
	}
	while ((w = probes)) {
		probes = w->next;
		if (probe_held(gw, w)) {
			kept++;
		} else {
			unknown++;
			__atomic_add_fetch(&l->lost, 1, __ATOMIC_RELAXED);
			gw_log("locks: the locks of an owner on file %llu "
			       "(taken over from a predecessor: its ranges "
			       "not known here) are gone at the origin and "
			       "cannot be asked for again: lost; its next "
			       "operation on the file fails with EIO",
			       (unsigned long long)w->nodeid);
			mark_lost(gw, w->nodeid, w->owner);
		}
		free(w);
	}
	pthread_rwlock_unlock(&l->reclaim_rw);
	if (done || lost || unknown || kept)
		gw_log("locks: the origin's lock manager came back: %u locks "
		       "taken again (%u reclaimed in its grace period), %u "
		       "lost%s; %u owners taken over still hold theirs",
		       done, graced, lost + unknown,
		       unknown ? " (some owners taken over: gone there)" : "",
		       kept);
}

static void *reclaim_thread(void *arg)
{
	struct gw *gw = arg;
	struct gw_locks *l = gw->locks;
	uint64_t seen = nfsc_lock_epoch(gw->nfs);

	pthread_mutex_lock(&l->rlock);
	while (!l->rstop) {
		struct timespec ts;
		uint64_t now;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += PASS_POLL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&l->rcond, &l->rlock, &ts);
		if (l->rstop)
			break;
		pthread_mutex_unlock(&l->rlock);
		nfsc_lock_keep(gw->nfs,
			       __atomic_load_n(&l->owners, __ATOMIC_RELAXED));
		now = nfsc_lock_epoch(gw->nfs);
		if (now != seen) {
			seen = now;
			pass(gw);
		}
		pthread_mutex_lock(&l->rlock);
	}
	pthread_mutex_unlock(&l->rlock);
	return NULL;
}

void gw_lock_reclaim_start(struct gw *gw)
{
	struct gw_locks *l = gw->locks;

	pthread_mutex_lock(&l->rlock);
	if (!l->rstarted && !l->rstop)
		l->rstarted = pthread_create(&l->rthread, NULL, reclaim_thread,
					     gw) == 0;
	pthread_mutex_unlock(&l->rlock);
}

void gw_locks_start(struct gw *gw)
{
	if (gw->locks && __atomic_load_n(&gw->locks->owners, __ATOMIC_RELAXED))
		gw_lock_reclaim_start(gw);
}

void gw_lock_reclaim_stop(struct gw *gw)
{
	struct gw_locks *l = gw->locks;
	bool started;

	pthread_mutex_lock(&l->rlock);
	l->rstop = true;
	started = l->rstarted;
	l->rstarted = false;
	pthread_cond_signal(&l->rcond);
	pthread_mutex_unlock(&l->rlock);
	if (started)
		pthread_join(l->rthread, NULL);
}
