/* lock_wait.c - blocking locks (F_SETLKW, flock without LOCK_NB): the
 * request is kept, not a thread. One thread asks the origin again for
 * each waiter (a non-blocking NLM LOCK) after a pause that starts at
 * 50 ms and doubles up to 1 s, and answers the request when it is
 * granted, refused, or interrupted.
 *
 * Why a poll and not NLM's blocking LOCK with its NLM_GRANTED callback:
 * the callback is an RPC from the origin to the client's own lock
 * manager, on the port rpcbind names for NLM on the gateway's host. When
 * that host serves knfsd (the re-export the gateway is made for), the
 * port is its kernel lockd's, which would take the callback for a lock
 * it never asked for and refuse it. A lock released at the origin is
 * seen here within the pause (at most 1 s), which is also what the Linux
 * NFS client does when a callback is lost (it asks again every 30 s).
 *
 * A waiter whose request is interrupted (a signal, the process killed:
 * FUSE_INTERRUPT) is answered EINTR; if the origin granted the lock just
 * before, it is let go first (an UNLOCK of the range asked for, as the
 * Linux NFS client does), so a waiter that gave up holds nothing there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inode_i.h"
#include "lock_i.h"

#define WAIT_FIRST_MS 50
#define WAIT_MAX_MS 1000

struct gw_lock_wait {
	struct gw_lock_wait *next;	/* gw_locks.waiters, wlock */
	fuse_req_t req;
	uint64_t nodeid, owner, file;
	struct nfsc_cred cred;
	struct nfsc_lock lk;
	bool nonblock;			/* only a grace period is waited out */
	bool interrupted;		/* wlock */
	unsigned pause_ms;		/* the next pause */
	uint64_t due_ns;		/* asked again from then on; wlock */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* FUSE_INTERRUPT of a waiter's request (libfuse calls it with the
 * request's own lock held, also at once from fuse_req_interrupt_func if
 * it came first). */
static void wait_interrupt(fuse_req_t req, void *data)
{
	struct gw_lock_wait *w = data;
	struct gw_locks *l = req_gw(req)->locks;

	pthread_mutex_lock(&l->wlock);
	w->interrupted = true;
	pthread_cond_signal(&l->wcond);
	pthread_mutex_unlock(&l->wlock);
}

/* Answer w's request (err) and free w; handed: freed unanswered (the
 * kernel sends it again to the successor). With the interrupt function
 * unset first: libfuse then waits for one running, and calls none
 * after, so none can touch w once freed. */
static void wait_end(struct gw_lock_wait *w, int err, bool handed)
{
	fuse_req_interrupt_func(w->req, NULL, NULL);
	if (handed)
		fuse_reply_none(w->req);
	else
		fuse_reply_err(w->req, err);
	free(w);
}


/* Ask the origin for w's lock once; true when w is answered. */
static bool wait_try(struct gw *gw, struct gw_lock_wait *w)
{
	struct gw_locks *l = gw->locks;
	struct gw_inode *ino = gw_inode_find(gw, w->nodeid);
	bool intr;
	int ret;

	if (!ino) {
		wait_end(w, ESTALE, false);
		return true;
	}
	pthread_rwlock_rdlock(&l->reclaim_rw);
	ret = nfsc_lock(gw->nfs, &w->cred, &ino->fh, &w->lk);
	pthread_mutex_lock(&l->wlock);
	intr = w->interrupted;
	pthread_mutex_unlock(&l->wlock);
	if (ret == 0 && intr) {
		/* Granted as the waiter gave up: let it go. */
		nfsc_unlock(gw->nfs, &w->cred, &ino->fh, &w->lk);
		ret = -EINTR;
	} else if (ret == 0) {
		gw_lock_granted(gw, ino, w->owner, w->file, &w->cred, &w->lk);
	}
	pthread_rwlock_unlock(&l->reclaim_rw);
	if (ret == 0 || ret == -EINTR) {
		/* answered below */
	} else if (intr) {
		ret = -EINTR;
	} else if (ret == -EINPROGRESS || (ret == -EAGAIN && !w->nonblock)) {
		return false;
	}
	if (ret == -EINTR)
		__atomic_add_fetch(&l->interrupted, 1, __ATOMIC_RELAXED);
	wait_end(w, gw_lock_errno(ret), false);
	return true;
}

static void *wait_thread(void *arg)
{
	struct gw *gw = arg;
	struct gw_locks *l = gw->locks;

	pthread_mutex_lock(&l->wlock);
	while (!l->stop) {
		struct gw_lock_wait **pp, *w = NULL;
		uint64_t now = now_ns(), next = UINT64_MAX;
		bool intr;

		/* 1. The first waiter interrupted or due, out of the list
		 *    while it is asked (its interrupt still finds it: w). */
		for (pp = &l->waiters; *pp; pp = &(*pp)->next) {
			if ((*pp)->interrupted || (*pp)->due_ns <= now) {
				w = *pp;
				*pp = w->next;
				break;
			}
			if ((*pp)->due_ns < next)
				next = (*pp)->due_ns;
		}
		if (!w) {
			/* 2. Nothing due: sleep until the next is, or a
			 *    waiter or an interrupt comes. */
			if (next == UINT64_MAX) {
				pthread_cond_wait(&l->wcond, &l->wlock);
			} else {
				struct timespec ts;
				uint64_t until;

				clock_gettime(CLOCK_REALTIME, &ts);
				until = (uint64_t)ts.tv_sec * 1000000000u +
					(uint64_t)ts.tv_nsec + (next - now);
				ts.tv_sec = (time_t)(until / 1000000000u);
				ts.tv_nsec = (long)(until % 1000000000u);
				pthread_cond_timedwait(&l->wcond, &l->wlock,
						       &ts);
			}
			continue;
		}
		/* 3. Ask, without the lock; put it back for later if it
		 *    is still held elsewhere. */
		intr = w->interrupted;
		pthread_mutex_unlock(&l->wlock);
		if (intr) {
			__atomic_add_fetch(&l->interrupted, 1,
					   __ATOMIC_RELAXED);
			wait_end(w, EINTR, false);
			pthread_mutex_lock(&l->wlock);
			continue;
		}
		if (wait_try(gw, w)) {
			pthread_mutex_lock(&l->wlock);
			continue;
		}
		pthread_mutex_lock(&l->wlock);
		w->due_ns = now_ns() + (uint64_t)w->pause_ms * 1000000u;
		w->pause_ms = w->pause_ms * 2 > WAIT_MAX_MS ? WAIT_MAX_MS :
							      w->pause_ms * 2;
		w->next = l->waiters;
		l->waiters = w;
	}
	pthread_mutex_unlock(&l->wlock);
	return NULL;
}

int gw_lock_wait(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		 uint64_t owner, uint64_t file, const struct nfsc_cred *cr,
		 const struct nfsc_lock *lk, bool nonblock)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_wait *w = calloc(1, sizeof(*w));
	int ret = 0;

	if (!w)
		return -ENOMEM;
	*w = (struct gw_lock_wait){
		.req = req, .nodeid = ino->nodeid, .owner = owner,
		.file = file, .cred = *cr, .lk = *lk, .nonblock = nonblock,
		.pause_ms = WAIT_FIRST_MS * 2,
		.due_ns = now_ns() + WAIT_FIRST_MS * 1000000u,
	};
	/* Before w is listed (the thread may answer it at once after), and
	 * without wlock: an interrupt that came already is run now, and
	 * marks w. */
	fuse_req_interrupt_func(req, wait_interrupt, w);
	pthread_mutex_lock(&l->wlock);
	if (l->stop) {
		ret = -EINTR;
	} else if (!l->started) {
		ret = -pthread_create(&l->thread, NULL, wait_thread, gw);
		l->started = ret == 0;
	}
	if (!ret) {
		w->next = l->waiters;
		l->waiters = w;
		pthread_cond_signal(&l->wcond);
	}
	pthread_mutex_unlock(&l->wlock);
	if (ret) {
		fuse_req_interrupt_func(req, NULL, NULL);
		free(w);
		return ret;
	}
	__atomic_add_fetch(&l->waited, 1, __ATOMIC_RELAXED);
	return 0;
}

void gw_locks_stop(struct gw *gw)
{
	struct gw_locks *l = gw->locks;
	struct gw_lock_wait *w;

	if (!l)
		return;
	gw_lock_reclaim_stop(gw);
	pthread_mutex_lock(&l->wlock);
	l->stop = true;
	pthread_cond_signal(&l->wcond);
	pthread_mutex_unlock(&l->wlock);
	if (l->started)
		pthread_join(l->thread, NULL);
	l->started = false;
	/* Waiters left: answered EINTR, or left to the successor. */
	while ((w = l->waiters)) {
		l->waiters = w->next;
		wait_end(w, EINTR, gw->handing_over);
	}
}
