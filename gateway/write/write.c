/* write.c - the write path: each FUSE WRITE to the origin.
 *
 * Write-through (default): every write(2) is a FUSE WRITE. Writeback
 * (-o writeback, FUSE_CAP_WRITEBACK_CACHE): write(2) lands in the kernel's
 * page cache, and the kernel sends the dirty pages as WRITEs of up to
 * max_write from its flusher, at fsync and at close (flush waits for
 * them); these arrive with uid/gid/pid 0, so the credentials used are
 * those of the file they come through (the opener's, f->cred), or another
 * writer's if the origin refuses those ("whose credentials"). The steps
 * are the same for both:
 *
 * 1. A FUSE write waits for room in the mount's write window (bytes of
 *    WRITE in flight, write_window=); it is never failed for lack of room.
 * 2. It is split into wsize UNSTABLE WRITEs issued in parallel; the reply
 *    to the kernel goes out when all have been answered. A small file
 *    the kernel flushes whole (writeback) goes FILE_SYNC instead
 *    (GW_SYNC_SMALL): stable at the answer, it is not listed for a
 *    COMMIT.
 * 3. Each extent stays in the inode's uncommitted list, with the write
 *    verifier the origin gave it, until a COMMIT (flush, fsync, release, or
 *    too much uncommitted data) has been answered. A COMMIT whose verifier
 *    differs, or an extent whose pieces got different verifiers, means the
 *    origin restarted and may have lost them: those extents are written
 *    again, now FILE_SYNC, before the flush is answered. The writers'
 *    records (gw_state.h) say which verifiers the list holds, for a
 *    successor after a crash, which has no copy to write again
 *    (write_commit.c).
 * 4. The post-op attributes of the WRITEs become the inode's attributes
 *    and the cache object's coherency data, so the gateway's own writes do
 *    not look like a change at the origin; the cache takes the new bytes
 *    (cache_writes=through) or drops the blocks (around) - unless their
 *    pre-op attributes show that someone else changed the file first
 *    (wr_wcc_foreign, write_send.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cred_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "lockcheck.h"
#include "read_i.h"
#include "write_i.h"

void gw_write(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	      struct gw_file *f, char *buf, size_t size, off_t off,
	      bool writepage)
{
	struct gw_extent *e;
	struct nfsc_attr known;
	struct wresult res;
	bool commit_now, judge, foreign, first, stable;
	uint64_t seq;
	int ret;

	if (writepage)
		__atomic_fetch_add(&gw->writepage_writes, 1, __ATOMIC_RELAXED);
	/* A successor's first WRITE to a file the dead process wrote: the
	 * COMMIT owed for that first, checked against the writers' records
	 * before this write's answer rewrites them (write_commit.c). */
	gw_write_owed_first(gw, ino);
	e = wr_extent_new(buf);
	if (!e) {
		gw_buf_put(buf);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	e->off = (uint64_t)off;
	e->len = size;
	e->cred = f->cred;
	/* Until this write is answered, a change seen at the origin may be
	 * this very write (opens and GETATTRs must not take it for someone
	 * else's and drop the kernel's pages: see gw_file_open). */
	pthread_mutex_lock(&ino->lock);
	/* A resend of older bytes must not land after this write. */
	while (ino->resending)
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	/* wcc: judged only for a write that is the inode's only one from
	 * start to answer. Another of ours in flight (mmap writeback, a second
	 * writer) may reach the origin first, and then this one's "before" is
	 * that one's "after", which we do not know yet: it would pass for a
	 * change by someone else every time. Such writes are taken for our
	 * own, as without wcc. */
	judge = ino->attr_valid && !gw_inode_writing(ino);
	stable = writepage && off == 0 && size <= GW_SYNC_SMALL &&
		 !ino->uncommitted && !gw_inode_writing(ino);
	known = ino->attr;
	seq = ++ino->writes_started;
	pthread_mutex_unlock(&ino->lock);
	/* Reads must not be served from a fetch older than this write. */
	gw_inode_drop_fetch(ino);

	gw_window_get(gw, size);
	/* The kernel's own pages: as another writer if the origin refuses
	 * this one. A write(2) is its caller's alone. */
	if (writepage)
		ret = wr_send_range_as(gw, ino, &e->cred, buf, size,
				    (uint64_t)off, stable, judge ? &known : NULL,
				    &res);
	else
		ret = wr_send_range(gw, &f->cred, &ino->fh, buf, size,
				 (uint64_t)off, stable, judge ? &known : NULL,
				 &res);
	memcpy(e->verf, res.verf, 8);
	e->mixed = res.mixed;
	gw_window_put(gw, size);
	/* Fetches started before now may hold what this write replaced. */
	pthread_mutex_lock(&ino->lock);
	ino->wgen++;
	pthread_mutex_unlock(&ino->lock);
	/* A read that fetched from the origin while the WRITE was out may
	 * hold the old bytes, or an EOF short of this write: a later read
	 * served from it would show the old data, and a short read makes
	 * the kernel shrink i_size (where the next O_APPEND write goes).
	 * Drop such fetches before the write is answered, and before the
	 * cache takes this write (their fills land first). */
	gw_inode_drop_fetch(ino);
	if (ret) {
		wr_free_extents(e);
		/* The origin refused: what the cache holds may be ahead of or
		 * behind it now. Drop it. */
		gw_cache_drop(gw, ino);
		pthread_mutex_lock(&ino->lock);
		ino->writes_done++;
		pthread_cond_broadcast(&ino->fetch_cond);
		if (!writepage) {
			pthread_mutex_unlock(&ino->lock);
			fuse_reply_err(req, -ret);
			return;
		}
		/* A write-back WRITE's error reaches no write(2). Failed, it
		 * would mark the kernel's mapping, which keeps only ENOSPC:
		 * close would say EIO for EDQUOT, EROFS, ESTALE. So the
		 * kernel is told the pages went out, and the next flush or
		 * fsync of the file gives the origin's own error, as the NFS
		 * client's close and fsync do. Those pages hold bytes the
		 * origin never took: the next open drops them. */
		/* Logged once per error a writer has not reported yet. */
		first = !wr_werr_pending_locked(ino);
		wr_werr_record_locked(ino, ret);
		ino->pages_stale = true;
		ino->write_refused = true;
		pthread_mutex_unlock(&ino->lock);
		__atomic_fetch_add(&gw->writepage_errors, 1, __ATOMIC_RELAXED);
		if (first)
			gw_log("write-back WRITE of %zu bytes at %llu refused "
			       "(%s): given at the next flush or fsync", size,
			       (unsigned long long)off, strerror(-ret));
		fuse_reply_write(req, size);
		return;
	}
	pthread_mutex_lock(&ino->lock);
	foreign = res.foreign && ino->writes_started == seq;
	pthread_mutex_unlock(&ino->lock);
	if (foreign) {
		/* Someone else changed the file before this write: the cache
		 * and the kernel's pages hold a version never seen here. The
		 * object takes the new version with none of its blocks; the
		 * next open drops the pages (below), as after a change seen
		 * by a GETATTR. */
		__atomic_fetch_add(&gw->wcc_foreign, 1, __ATOMIC_RELAXED);
		gw_log("file %llu changed at the origin before our WRITE at "
		       "%llu (wcc): dropping its cached data",
		       (unsigned long long)known.fileid,
		       (unsigned long long)off);
	}
	if (res.post.has_attr && foreign) {
		gw_inode_set_attr(ino, &res.post.attr);
		gw_cache_own_change(gw, ino, &res.post.attr, true);
		gw_cache_drop(gw, ino);
	} else if (res.post.has_attr) {
		/* Our own write changed the ctime, not who may write: cached
		 * ACCESS answers hold on. */
		pthread_mutex_lock(&ino->lock);
		if (ino->attr_valid)
			gw_access_restamp(ino, &ino->attr, &res.post.attr);
		pthread_mutex_unlock(&ino->lock);
		gw_inode_set_attr(ino, &res.post.attr);
		gw_cache_own_write(gw, ino, &res.post.attr, buf, size,
				   (uint64_t)off);
	} else {
		gw_cache_drop(gw, ino);
		gw_inode_invalidate_attr(gw, ino);
	}
	/* Listed before the reply: a flush that follows it must see it. */
	pthread_mutex_lock(&ino->lock);
	/* The kernel wrote these bytes into its page cache itself: its pages
	 * are of this version now, and the next open need not drop them. */
	if (foreign)
		ino->pages_stale = true;
	else if (res.post.has_attr && ino->opened_before &&
		 gw_attr_newer(&res.post.attr, &ino->open_attr))
		ino->open_attr = res.post.attr;
	ino->writes_done++;
	pthread_cond_broadcast(&ino->fetch_cond);
	/* FILE_SYNC: stable at the origin now (a server answers such a
	 * WRITE only once it is), nothing to COMMIT or to resend. */
	if (!stable) {
		wr_list_locked(ino, e);
		e = NULL;
	}
	commit_now = ino->uncommitted_bytes >= GW_COMMIT_WAIT ||
		     (ino->uncommitted_bytes >= GW_COMMIT_AFTER &&
		      !ino->committing);
	pthread_mutex_unlock(&ino->lock);
	wr_free_extents(e);
	/* Bound what the gateway holds for resending. Before the reply: after
	 * it, the file may be released and the inode forgotten. On failure
	 * the extents stay listed, and the next flush meets the error again
	 * unless its own COMMIT gets through. */
	if (commit_now && wr_commit_inode(gw, ino))
		gw_log("COMMIT after %u MiB uncommitted failed; kept for the "
		       "next flush", GW_COMMIT_AFTER >> 20);
	fuse_reply_write(req, size);
}

/* The kernel let the inode go: no flush or write of it can be running. */
void gw_write_forget(struct gw_inode *ino)
{
	struct gw_extent *l;

	pthread_mutex_lock(&ino->lock);
	l = ino->uncommitted;
	ino->uncommitted = NULL;
	ino->uncommitted_bytes = 0;
	ino->unstable = 0;	/* no writer is open: no record says it */
	pthread_mutex_unlock(&ino->lock);
	wr_free_extents(l);
}

/* The bytes go straight into the gw_buf that write.c keeps: with splice
 * (FUSE_CAP_SPLICE_READ, gw_init) they come from a pipe holding the
 * kernel's own pages, one copy in all; else from libfuse's buffer. */
void gw_write_buf_op(fuse_req_t req, fuse_ino_t nodeid,
			    struct fuse_bufvec *in, off_t off,
			    struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	size_t size = fuse_buf_size(in);
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	ssize_t got;
	char *buf;
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);

	buf = gw_buf_get(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	dst.buf[0].mem = buf;
	if (in->count && (in->buf[0].flags & FUSE_BUF_IS_FD))
		__atomic_fetch_add(&gw->write_spliced, 1, __ATOMIC_RELAXED);
	got = size ? fuse_buf_copy(&dst, in, 0) : 0;
	if (got != (ssize_t)size) {
		gw_log("write: %zd of %zu bytes from the kernel: %s", got,
		       size, got < 0 ? strerror((int)-got) : "short");
		gw_buf_put(buf);
		fuse_reply_err(req, EIO);
		return;
	}
	if (gw_lock_lost(gw, ino->nodeid, fi->fh)) {
		/* doc/locks.md "Restarts" */
		gw_buf_put(buf);
		fuse_reply_err(req, EIO);
		return;
	}
	gw_write(gw, req, ino, gw_file_of(fi), buf, size,
		 off, fi->writepage);
}
