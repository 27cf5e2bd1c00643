/* lock_i.h - the locks room (gateway/lock/): byte-range (fcntl, OFD,
 * lockf) and flock locks taken at the origin with NLM (nfsclient/'s
 * nfsc_lock_*), so that they hold against the origin's other clients and
 * other gateways (doc/locks.md). One section per file.
 *
 * locks.c:     getlk, setlk, flock; the owner table (each kernel lock
 *              owner is an NLM owner: oh and svid); what a flush or a
 *              release lets go at the origin.
 * lock_ranges.c: the ranges each owner holds (POSIX's rules).
 * lock_reclaim.c: the origin's lock manager came back: every range asked
 *              for again; what cannot be is lost (EIO to its holder).
 * lock_nsm.c:  the gateway's NSM state (cache_dir/lock-nsm-state): its
 *              number, sent in every LOCK; a cold start tells the origin
 *              (SM_NOTIFY) when an earlier instance may have held locks.
 * lock_wait.c: blocking locks: the waiters, answered later by one thread
 *              that asks the origin again with a growing pause (no FUSE
 *              thread is held per waiter); interrupts.
 *
 * Locks: gw_locks.lock (the owner table), gw_locks.wlock (the
 * waiters) and gw_locks.nsm_lock (the state file) are leaves: no other lock is taken under them and no origin
 * call is made holding them; libfuse's request lock is taken (by
 * fuse_req_interrupt_func) with neither held, since the interrupt
 * callback takes wlock.
 */
#ifndef CACHEGW_LOCK_I_H
#define CACHEGW_LOCK_I_H

#include "gw_i.h"
#include "gw_state.h"

struct gw_lock_wait;

#define GW_LOCK_BUCKETS 256

/* A range an owner holds at the origin: [start, end), end UINT64_MAX to
 * the end of the file (lock_reclaim.c). */
struct gw_lock_range {
	struct gw_lock_range *next;
	uint64_t start, end;
	bool exclusive;
};

/* One kernel lock owner's locks on one file, as the origin holds them. */
struct gw_lock_owner {
	struct gw_lock_owner *next;	/* bucket chain, gw_locks.lock */
	uint64_t nodeid;
	uint64_t owner;			/* fi->lock_owner */
	uint64_t file;			/* fi->fh it first locked through:
					 * its release lets go (OFD, flock) */
	uint32_t svid;
	bool granted;			/* a LOCK was granted: UNLOCK it all
					 * at the end */
	struct nfsc_fh fh;
	struct nfsc_cred cred;		/* the first locker's */
	struct gw_lock_rec *rec;	/* its record for a successor
					 * (gw_state.h), or NULL */
	struct gw_lock_range *ranges;	/* what it holds, lock */
	bool ranges_unknown;		/* taken over (or out of memory):
					 * cannot be reclaimed */
	bool lost;			/* not reclaimed after the origin
					 * restarted: EIO, lock */
};

/* A RELEASE in progress whose open file holds locks (gw_release, on its
 * stack): they are still at the origin until it lets them go, after its
 * COMMIT. */
struct gw_lock_releasing {
	struct gw_lock_releasing *next;	/* gw_locks.releasing, lock */
	uint64_t nodeid;		/* 0: not listed */
};

struct gw_locks {
	pthread_mutex_t lock;		/* the owner table */
	struct gw_lock_releasing *releasing;	/* lock */
	pthread_cond_t relcond;		/* with lock: one ended */
	struct gw_lock_owner *by_owner[GW_LOCK_BUCKETS];	/* lock */
	uint32_t next_svid;		/* lock */
	uint32_t rec_hint;		/* where to look for a free record, lock */
	bool rec_full_told;		/* lock */
	uint64_t owners;		/* entries, atomic */
	/* lock_wait.c */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;		/* with wlock: a waiter, an
					 * interrupt, stop */
	struct gw_lock_wait *waiters;	/* wlock */
	bool stop;			/* wlock */
	bool started;			/* the thread; main thread and wlock */
	pthread_t thread;
	/* lock_reclaim.c */
	pthread_rwlock_t reclaim_rw;	/* read: a lock call and its range
					 * update; write: a reclaim pass */
	pthread_mutex_t rlock;
	pthread_cond_t rcond;		/* with rlock: stop */
	bool rstop, rstarted;		/* rlock */
	pthread_t rthread;
	uint64_t lost_owners;		/* owners lost, atomic */
	/* lock_nsm.c */
	pthread_mutex_t nsm_lock;
	int nsm_fd;			/* lock-nsm-state, -1: none */
	int nsm_state;
	bool nsm_held;			/* as written; nsm_lock */
	/* counters (atomic) */
	uint64_t granted, denied, waited, interrupted, released;
	uint64_t reclaimed, lost;	/* lock_reclaim.c */
};

/* ---- locks.c ---- */
/* The owner table and the waiters' state (start.c, at start); a
 * successor takes over the owners its predecessor recorded (every one
 * let go at the origin when its holder closes, as if granted: it may
 * have been, just before a crash). Freed with the gateway (waiters
 * stopped first: gw_locks_stop). */
int gw_locks_init(struct gw *gw);
void gw_locks_free(struct gw *gw);
void gw_getlk(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi,
	      struct flock *lock);
void gw_setlk(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi,
	      struct flock *lock, int sleep);
void gw_flock(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi,
	      int op);
/* close(2) of a descriptor of ino by owner (FLUSH): owner's POSIX locks
 * on the file let go at the origin (none: nothing sent). */
void gw_lock_flush(struct gw *gw, struct gw_inode *ino, uint64_t owner);
/* The last close of the open file file (fi->fh): every lock taken
 * through it that is still held (OFD and flock locks) let go. */
void gw_lock_release(struct gw *gw, struct gw_inode *ino, uint64_t file);
/* Around a RELEASE's COMMIT and gw_lock_release: while it runs, a lock
 * (or F_GETLK) on ino refused by the origin waits for it to end and asks
 * again, since the kernel does not wait for a RELEASE: a close(2), then
 * at once an open and a lock of the same file (`flock -n` in a loop)
 * would be refused by the closed file's own lock otherwise. */
void gw_lock_release_begin(struct gw *gw, struct gw_inode *ino,
			   uint64_t file, struct gw_lock_releasing *rel);
void gw_lock_release_end(struct gw *gw, struct gw_lock_releasing *rel);
/* The NLM owner of (ino, owner): made if new (its svid given), with the
 * file and credentials of this first lock. Fills lk->oh and lk->svid. 0
 * or -ENOMEM. */
int gw_lock_owner_get(struct gw *gw, struct gw_inode *ino, uint64_t owner,
		      uint64_t file, const struct nfsc_cred *cr,
		      struct nfsc_lock *lk);
/* A LOCK of lk's owner was granted: remembered to be let go (made again
 * if a flush removed it meanwhile). */
void gw_lock_granted(struct gw *gw, struct gw_inode *ino, uint64_t owner,
		     uint64_t file, const struct nfsc_cred *cr,
		     const struct nfsc_lock *lk);
/* The errno a lock call answers for an NLM outcome. */
int gw_lock_errno(int nlm_ret);

/* ---- lock_ranges.c ---- */
/* l->lock held: o's ranges after a LOCK granted (add) or an UNLOCK of
 * [off, off + len) (len 0: to the end), with POSIX's rules (a lock
 * replaces what the owner held in its range). */
void gw_lock_ranges_set(struct gw_lock_owner *o, const struct nfsc_lock *lk,
			bool add);
void gw_lock_ranges_free(struct gw_lock_owner *o);

/* ---- lock_reclaim.c ---- */
/* After a LOCK granted: the thread that reclaims after the origin
 * restarts runs (started once). */
void gw_lock_reclaim_start(struct gw *gw);
void gw_lock_reclaim_stop(struct gw *gw);

/* ---- lock_nsm.c ---- */
/* At start (gw_locks_init, before the origin's threads): the state file
 * read, a new state made on a cold start and the origin told if an
 * earlier instance may have held locks (nfsc_lock_nsm). -errno if the
 * file cannot be opened. */
int gw_lock_nsm_init(struct gw *gw);
/* After the owner count changed (without l->lock): HELD written if it
 * changed. */
void gw_lock_nsm_update(struct gw_locks *l);
void gw_lock_nsm_free(struct gw_locks *l);

/* ---- lock_wait.c ---- */
/* Wait for lk for req (answered later, by the waiters' thread): asked
 * again until granted (answer 0), refused otherwise (its errno), or the
 * request interrupted (EINTR; a lock granted meanwhile is let go).
 * nonblock: only the origin's grace period is waited out, a conflict is
 * answered EAGAIN. 0, or -errno if it could not wait (then req is still
 * the caller's to answer). */
int gw_lock_wait(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		 uint64_t owner, uint64_t file, const struct nfsc_cred *cr,
		 const struct nfsc_lock *lk, bool nonblock);

#endif
