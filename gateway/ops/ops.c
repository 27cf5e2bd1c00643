/* ops.c - the FUSE session's operations table, INIT, GETATTR, READLINK,
 * FORGET, STATFS, and which operations are interruptible. LOOKUP is in
 * lookup.c, namespace changes in ops_ns.c, directories in listing.c,
 * files in open.c, reads in read_req.c, writes in write.c.
 *
 * Every operation turns the origin's -errno into fuse_reply_err() in its
 * own file and nowhere else. Calls carry the FUSE caller's credentials
 * (gw_req_cred, cred/caller.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "condwait.h"
#include "cred_i.h"
#include "gw_state.h"
#include "inode_i.h"
#include "keep_i.h"
#include "lock_i.h"
#include "ops_i.h"
#include "read_i.h"
#include "write_i.h"

/* Not under ThreadSanitizer: it sees the order the kernel gives one
 * request's reply and the next request (a file handle made by OPEN, used
 * by WRITE on another thread) through read() and write() of /dev/fuse, not
 * through splice(), and reports every such handle as a race. */
#if defined(__SANITIZE_THREAD__)
#define GW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GW_TSAN 1
#endif
#endif
#ifndef GW_TSAN
#define GW_TSAN 0
#endif

/* libfuse splices a request only into a pipe that holds a whole one
 * (max_write and a header page), and quietly copies when it cannot make
 * one: past fs.pipe-max-size (1 MiB by default) that takes
 * CAP_SYS_RESOURCE, which a root daemon has (not a user mount, not every
 * container). Say so once, with the fix. */
static void splice_probe(unsigned max_write)
{
	size_t need = (size_t)max_write + 4096, max = 0;
	int p[2];
	FILE *f;

	if (pipe(p))
		return;
	if (fcntl(p[0], F_SETPIPE_SZ, (int)need) < 0) {
		f = fopen("/proc/sys/fs/pipe-max-size", "r");
		if (f) {
			if (fscanf(f, "%zu", &max) != 1)
				max = 0;
			fclose(f);
		}
		gw_log("writes: each is copied twice, not once: a pipe of "
		       "%zu bytes for splice needs CAP_SYS_RESOURCE or "
		       "fs.pipe-max-size >= %zu (it is %zu); e.g. sysctl "
		       "fs.pipe-max-size=%zu", need, need, max,
		       (size_t)2 << 20 > need ? (size_t)2 << 20 : need);
	}
	close(p[0]);
	close(p[1]);
}

/* What the first process negotiated goes to its successors; a successor
 * says what the kernel has, whatever its own options would want (the
 * kernel negotiates once per connection). */
static void negotiated(struct gw *gw, struct fuse_conn_info *conn)
{
	struct gw_state *st = gw_state;

	if (!st->negotiated) {
		st->want = conn->want;
		st->max_write = conn->max_write;
		st->max_read = conn->max_read;
		st->max_readahead = conn->max_readahead;
		st->max_background = conn->max_background;
		st->congestion_threshold = conn->congestion_threshold;
		st->time_gran = conn->time_gran;
		st->negotiated = 1;
		return;
	}
	if (conn->want != st->want)
		gw_log("takeover: these options would negotiate other FUSE "
		       "capabilities (0x%llx) than the connection has "
		       "(0x%llx): serving with the connection's until the "
		       "next mount", (unsigned long long)conn->want,
		       (unsigned long long)st->want);
	/* A connection made by a binary without lock/ (state version 2):
	 * the kernel keeps every lock itself, as with local_lock=all. */
	if ((conn->want & ~st->want) &
	    (FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS))
		gw_log("takeover: the connection was made without %s lock "
		       "requests: those locks stay in this host's kernel, not "
		       "at the origin, until the next mount",
		       !(st->want & (FUSE_CAP_POSIX_LOCKS |
				     FUSE_CAP_FLOCK_LOCKS)) ? "fcntl and flock" :
		       st->want & FUSE_CAP_POSIX_LOCKS ? "flock" : "fcntl");
	conn->want = (unsigned)st->want;
	conn->max_write = st->max_write;
	conn->max_read = st->max_read;
	conn->max_readahead = st->max_readahead;
	conn->max_background = st->max_background;
	conn->congestion_threshold = st->congestion_threshold;
	conn->time_gran = st->time_gran;
	gw->o->writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
}

static void gw_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gw *gw = userdata;

	/* 1 MiB requests: fewer round trips through the kernel. */
	conn->max_readahead = 1u << 20;
	conn->max_write = 1u << 20;
	conn->max_read = 1u << 20;
	/* More requests in flight: readahead of 1 MiB requests is served by
	 * several threads at once (the default of 12 throttles it). */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* WRITE data through a pipe: the kernel hands its pages over by
	 * reference and gw_write_buf_op copies them once, into the buffer
	 * kept until COMMIT (without: the kernel copies them into libfuse's
	 * buffer and we copy again). */
	if ((conn->capable & FUSE_CAP_SPLICE_READ) && !GW_TSAN) {
		conn->want |= FUSE_CAP_SPLICE_READ;
		splice_probe(conn->max_write);
	} else	/* libfuse wants it by default once write_buf is there */
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* Atomic O_TRUNC: the kernel passes O_TRUNC to OPEN and gw_open
	 * truncates (gw_file_truncate). With a SETATTR(size=0) instead, the
	 * kernel marks the size unstable until it is answered: a read of
	 * its page cache answered short meanwhile (the origin already cut)
	 * is zero-filled under the old size, and a reader that had the
	 * file open gets zeros. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* Locks: at the origin (lock/), unless local_lock= keeps them in
	 * this host's kernel, as nfs(5)'s option does (libfuse asks for
	 * both, given getlk/setlk and flock). */
	if (gw->o->local_lock == GW_LOCAL_LOCK_ALL ||
	    gw->o->local_lock == GW_LOCAL_LOCK_POSIX)
		conn->want &= ~FUSE_CAP_POSIX_LOCKS;
	if (gw->o->local_lock == GW_LOCAL_LOCK_ALL ||
	    gw->o->local_lock == GW_LOCAL_LOCK_FLOCK)
		conn->want &= ~FUSE_CAP_FLOCK_LOCKS;
	/* Readdir does not pre-populate only the names we return. */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* writeback: the kernel keeps written pages dirty in its page cache
	 * and sends them as large WRITEs from its flusher (write.c). */
	if (gw->o->writeback) {
		if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
			conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		else {
			/* Before any request: the option is read only by
			 * them. */
			gw->o->writeback = false;
			gw_log("writeback: the kernel offers no write-back "
			       "cache; writing through");
		}
	}
	if (gw_state)
		negotiated(gw, conn);
}

/* Fresh attributes: from the attribute cache unless force, else GETATTR.
 * Returns 1 if the origin's answer shows the file's data changed (its
 * cache object was emptied), 0 if not, -errno on failure. */
/* A GETATTR in flight, whose answer the stat requests that come while it
 * is out share (a stat storm on one file asks the origin once, not once
 * per caller; each answer is as fresh as the caller's request). Opens do
 * not join: close-to-open wants a GETATTR sent after the open began. The
 * round is freed by the last of the leader and its joiners (refs). */
struct gw_getattr {
	unsigned refs;			/* ino->lock */
	bool done;			/* ino->lock */
	bool intr;			/* the leader was interrupted; ino->lock */
	int ret;			/* the leader's result, once done */
	struct nfsc_attr a;
};

/* GETATTR at the origin for req; note: for the kernel's own GETATTR (not
 * an open's, nor a listing's), noted as the origin's answer for req's
 * thread (gw_inode_note_fresh: an OPEN it precedes takes it for its
 * close-to-open check). */
static int get_attr_sent(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
			 bool note, struct nfsc_attr *a)
{
	struct nfsc_cred cr;
	uint64_t gen;
	int ret;

	gw_req_cred(req, &cr);
	gen = gw_inode_attr_gen(ino);
	/* The kernel's GETATTR as an ACCESS where cr holds no answer (its
	 * open follows); not sent, or refused for a reason a GETATTR may
	 * not share: the GETATTR it stands for. What a GETATTR would meet
	 * too (origin lost or not answering, the caller interrupted, the
	 * file gone) is the answer. */
	ret = note ? gw_access_getattr(gw, ino, &cr, a) : -ENODATA;
	if (ret && ret != -EHOSTDOWN && ret != -EINTR && ret != -ETIMEDOUT &&
	    ret != -ECANCELED && ret != -ESTALE && ret != -ENOENT)
		ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, a);
	/* An ESTALE is the kernel's to act on; the node-id stays, whatever
	 * one answer says: a reclaim pass gives it back once the kernel has
	 * let go and the origin confirms (reclaim.c). */
	if (ret == -EHOSTDOWN)
		return gw_offline_attr(gw, ino, a);	/* as last known */
	if (ret)
		return ret;
	/* A WRITE answered while the GETATTR was out is newer than it. */
	if (!gw_inode_set_attr_since(ino, a, gen)) {
		pthread_mutex_lock(&ino->lock);
		*a = ino->attr;
		pthread_mutex_unlock(&ino->lock);
	}
	ret = gw_cache_check(gw, ino, a) > 0;
	if (note)
		gw_inode_note_fresh(ino, fuse_req_ctx(req)->pid);
	return ret;
}

static void ga_put_locked(struct gw_getattr *r)
{
	if (--r->refs == 0)
		free(r);
}

/* Wait for r to be answered; -EINTR if the caller is interrupted first
 * (its answer is gw_intr_errno's: the caller's to pick, outside the
 * lock). ino->lock held. */
static int ga_wait_locked(fuse_req_t req, struct gw_inode *ino,
			  struct gw_getattr *r)
{
	GW_ASSERT_HELD(&ino->lock);
	while (!r->done) {
		cond_wait_ms(&ino->fetch_cond, &ino->lock, 100);
		if (!r->done && fuse_req_interrupted(req))
			return -EINTR;
	}
	return 0;
}

int gw_get_attr(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		bool force, struct nfsc_attr *a)
{
	struct gw_getattr *r;
	int ret;

	if (force)
		return get_attr_sent(gw, req, ino, false, a);
again:
	if (gw_inode_cached_attr(gw, ino, a) == 0)
		return 0;
	pthread_mutex_lock(&ino->lock);
	r = ino->ga;
	if (r && !r->done) {
		/* 1. One is out: take its answer. */
		bool leader_intr = false;

		r->refs++;
		ret = ga_wait_locked(req, ino, r);
		if (!ret) {
			ret = r->ret;
			leader_intr = r->intr;
			*a = r->a;
		}
		ga_put_locked(r);
		pthread_mutex_unlock(&ino->lock);
		if (leader_intr && !fuse_req_interrupted(req))
			goto again;	/* the leader was interrupted, not us */
		if (ret == -EINTR || leader_intr)	/* we were */
			return -gw_intr_errno(fuse_req_ctx(req)->pid);
		if (ret >= 0)
			__atomic_add_fetch(&gw->getattr_joined, 1,
					   __ATOMIC_RELAXED);
		return ret < 0 ? ret : 0;	/* the leader told the kernel */
	}
	/* 2. None: send one, for whoever comes meanwhile too. */
	r = calloc(1, sizeof(*r));
	if (!r) {
		pthread_mutex_unlock(&ino->lock);
		return get_attr_sent(gw, req, ino, false, a);
	}
	r->refs = 1;
	ino->ga = r;
	pthread_mutex_unlock(&ino->lock);
	ret = get_attr_sent(gw, req, ino, true, a);
	pthread_mutex_lock(&ino->lock);
	r->ret = ret;
	r->intr = ret < 0 && fuse_req_interrupted(req);
	if (ret >= 0)
		r->a = *a;
	r->done = true;
	if (ino->ga == r)
		ino->ga = NULL;
	pthread_cond_broadcast(&ino->fetch_cond);
	ga_put_locked(r);
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

static void gw_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	gw_inode_forget(req_gw(req), ino, nlookup);
	fuse_reply_none(req);
}

static void gw_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct gw *gw = req_gw(req);
	size_t i;

	for (i = 0; i < count; i++)
		gw_inode_forget(gw, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void gw_getattr(fuse_req_t req, fuse_ino_t nodeid,
		       struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);
	struct nfsc_attr a;
	struct stat st;
	double ttl;
	int ret;

	(void)fi;
	ret = gw_get_attr(gw, req, ino, false, &a);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	ttl = gw_attr_ttl(gw, &a);
	if (gw_offline(gw)) {
		gw_offline_count(gw);	/* once, here, however answered */
		/* As last known, of any age: the kernel trusts them no
		 * longer than their age allows (none for those only md.log
		 * holds), so it asks again once the origin is back. */
		ttl = gw_inode_ttl_left(gw, ino);
	}
	gw_attr_to_stat(&a, nodeid, &st);
	if (gw_silly_has(ino) && st.st_nlink > 0)
		st.st_nlink--;	/* its hidden name is not one of its names */
	fuse_reply_attr(req, &st, ttl);
	/* Changed at the origin: the kernel's pages are stale too. After the
	 * reply, so the kernel is not waiting on us for this inode. */
	if (ret > 0) {
		__atomic_fetch_add(&gw->kernel_cache_drops, 1,
				   __ATOMIC_RELAXED);
		fuse_lowlevel_notify_inval_inode(gw->se, nodeid, 0, 0);
	}
}

static void gw_readlink(fuse_req_t req, fuse_ino_t nodeid)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);
	char target[4096];	/* PATH_MAX: a longer target is ENAMETOOLONG */
	struct nfsc_cred cr;
	int ret;

	gw_req_cred(req, &cr);
	ret = nfsc_readlink(gw->nfs, &cr, &ino->fh, target, sizeof(target));
	if (!ret)
		gw_md_note_link(gw, ino->nodeid, target);
	else if (ret == -EHOSTDOWN &&
		 gw_md_link_any(gw, ino->nodeid, target, sizeof(target)) == 0) {
		ret = 0;	/* the origin is lost: as last read */
		gw_offline_count(gw);
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, target);
}

static void gw_statfs(fuse_req_t req, fuse_ino_t nodeid)
{
	struct gw *gw = req_gw(req);
	struct nfsc_fsstat fs;
	struct nfsc_cred cr;
	struct statvfs sv;
	const unsigned long bs = 4096;
	int ret;

	(void)nodeid;
	/* df, and find's fstatfs of every directory it enters, ask often:
	 * an answer serves for acregmin seconds (the shortest the mount
	 * trusts anything the origin said; 0 asks every time). The Linux
	 * NFS client asks at every statfs(2); a far origin makes that a
	 * round trip each. One answer serves every user: NFSv3's FSSTAT
	 * reports the file system's space and files, not a user's (quotas
	 * are the rquota protocol's). */
	ret = gw_fsstat_kept(gw, gw->o->acregmin, &fs);
	if (ret) {
		struct timespec sent;

		gw_req_cred(req, &cr);
		clock_gettime(CLOCK_MONOTONIC, &sent);
		ret = nfsc_fsstat(gw->nfs, &cr, nfsc_root(gw->nfs), &fs);
		if (!ret)
			gw_offline_note_fsstat(gw, &fs, &sent);
		else if (ret == -EHOSTDOWN)
			ret = gw_offline_fsstat(gw, &fs);
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = bs;
	sv.f_frsize = bs;
	sv.f_blocks = fs.tbytes / bs;
	sv.f_bfree = fs.fbytes / bs;
	sv.f_bavail = fs.abytes / bs;
	sv.f_files = fs.tfiles;
	sv.f_ffree = fs.ffiles;
	sv.f_favail = fs.afiles;
	sv.f_namemax = NFSC_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---- interrupts ----
 * A caller waiting on an origin that does not answer stays killable: a
 * request the gateway has read is no longer the kernel's to cancel (the
 * caller sleeps uninterruptibly until the answer), so these operations,
 * which wait only on idempotent origin calls (GETATTR, LOOKUP, ACCESS,
 * READLINK, FSSTAT), arm their request as the thread's interrupt token
 * (nfsclient's nfsc_intr_*): FUSE_INTERRUPT then ends the wait with
 * gw_intr_errno's errno (cred/caller.c) and the operation answers that, through its own
 * error path; the origin call is left to finish, its answer dropped.
 * Writes and namespace changes are not interruptible: their outcome at
 * the origin would be unknown. */

static void intr_fire(fuse_req_t req, void *data)
{
	nfsc_intr_fire(data, req, gw_intr_errno(fuse_req_ctx(req)->pid));
}

static void intr_begin(fuse_req_t req)
{
	struct nfsc_intr *i = nfsc_intr_arm(req);

	/* Called at once if the request was interrupted already. */
	if (i)
		fuse_req_interrupt_func(req, intr_fire, i);
}

#define INTERRUPTIBLE(op, params, args)					\
	static void op##_intr params					\
	{								\
		intr_begin(req);					\
		gw_req_enter(req);					\
		op args;						\
		gw_req_leave();						\
		nfsc_intr_disarm();					\
	}
/* The operations that may name a new file in the fleet store (or move a
 * directory in it) and wait for it there: only that wait ends early when
 * the request is interrupted (gw_req_interrupted); what they change at
 * the origin is never cut short. */
#define STORE_WAITS(op, params, args)					\
	static void op##_st params					\
	{								\
		gw_req_enter(req);					\
		op args;						\
		gw_req_leave();						\
	}
INTERRUPTIBLE(gw_lookup, (fuse_req_t req, fuse_ino_t parent, const char *name),
	      (req, parent, name))
INTERRUPTIBLE(gw_getattr, (fuse_req_t req, fuse_ino_t nodeid,
			   struct fuse_file_info *fi), (req, nodeid, fi))
INTERRUPTIBLE(gw_readlink, (fuse_req_t req, fuse_ino_t nodeid), (req, nodeid))
INTERRUPTIBLE(gw_opendir, (fuse_req_t req, fuse_ino_t nodeid,
			   struct fuse_file_info *fi), (req, nodeid, fi))
INTERRUPTIBLE(gw_open, (fuse_req_t req, fuse_ino_t nodeid,
			struct fuse_file_info *fi), (req, nodeid, fi))
INTERRUPTIBLE(gw_access, (fuse_req_t req, fuse_ino_t nodeid, int mask),
	      (req, nodeid, mask))
INTERRUPTIBLE(gw_statfs, (fuse_req_t req, fuse_ino_t nodeid), (req, nodeid))
STORE_WAITS(gw_mkdir, (fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode), (req, parent, name, mode))
STORE_WAITS(gw_mknod, (fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode, dev_t rdev), (req, parent, name, mode, rdev))
STORE_WAITS(gw_symlink, (fuse_req_t req, const char *link, fuse_ino_t parent,
			 const char *name), (req, link, parent, name))
STORE_WAITS(gw_create, (fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode, struct fuse_file_info *fi),
	    (req, parent, name, mode, fi))
STORE_WAITS(gw_link, (fuse_req_t req, fuse_ino_t nodeid, fuse_ino_t newparent,
		      const char *newname), (req, nodeid, newparent, newname))
STORE_WAITS(gw_rename, (fuse_req_t req, fuse_ino_t parent, const char *name,
			fuse_ino_t newparent, const char *newname,
			unsigned int flags),
	    (req, parent, name, newparent, newname, flags))

const struct fuse_lowlevel_ops gw_oper = {
	.init = gw_init,
	.mkdir = gw_mkdir_st,
	.mknod = gw_mknod_st,
	.symlink = gw_symlink_st,
	.create = gw_create_st,
	.link = gw_link_st,
	.unlink = gw_unlink,
	.rmdir = gw_rmdir,
	.rename = gw_rename_st,
	.setattr = gw_setattr,
	.access = gw_access_intr,
	.write_buf = gw_write_buf_op,
	.flush = gw_flush,
	.fsync = gw_fsync,
	.fsyncdir = gw_fsyncdir,
	.fallocate = gw_fallocate,
	.lookup = gw_lookup_intr,
	.forget = gw_forget,
	.forget_multi = gw_forget_multi,
	.getattr = gw_getattr_intr,
	.readlink = gw_readlink_intr,
	.opendir = gw_opendir_intr,
	.readdir = gw_readdir,
	.readdirplus = gw_readdirplus,
	.releasedir = gw_releasedir,
	.open = gw_open_intr,
	.read = gw_read_op,
	.release = gw_release,
	.getlk = gw_getlk,
	.setlk = gw_setlk,
	.flock = gw_flock,
	.statfs = gw_statfs_intr,
};
