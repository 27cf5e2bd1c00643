/* open.c - files: open (access check, close-to-open, keep_cache, the
 * cache object), flush, fsync, fallocate, release, and the release of
 * files the kernel never released. READ and WRITE are their rooms'
 * (read_req.c, write.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cred_i.h"
#include "gw_state.h"
#include "inode_i.h"
#include "keep_i.h"
#include "lock_i.h"
#include "ops_i.h"
#include "read_i.h"
#include "worker.h"
#include "write_i.h"

/* A file the kernel never released (handles.c): as gw_release. */
void gw_file_handle_release(struct gw *gw, struct gw_handle *h)
{
	struct gw_file *f = (struct gw_file *)h;
	struct gw_inode *ino = gw_inode_find(gw, f->nodeid);

	if (!ino || gw->handing_over) {	/* the successor's now */
		free(f);
		return;
	}
	if (gw_write_flush(gw, ino, f, false)) {
		gw_log("commit at exit of inode %llu failed",
		       (unsigned long long)f->nodeid);
		__atomic_add_fetch(&gw->exit_commit_errors, 1,
				   __ATOMIC_RELAXED);
	}
	gw_lock_release(gw, ino, f->h.id);
	gw_file_release(gw, ino, f);
}

/* ---- files ---- */

int gw_file_open(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		 const struct nfsc_attr *created, struct fuse_file_info *fi)
{
	struct nfsc_attr a;
	struct gw_file *f;
	int ret, mask;

	if (!__atomic_exchange_n(&gw->readahead_set, 1, __ATOMIC_RELAXED))
		gw_set_kernel_readahead(gw->o);
	if (gw->o->writeback &&
	    !__atomic_exchange_n(&gw->dirty_limits_set, 1, __ATOMIC_RELAXED))
		gw_set_kernel_dirty_limits(gw->o);
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	if (gw_handle_add(&f->h, gw_file_handle_release)) {
		free(f);
		return -ENOMEM;
	}
	gw_req_cred(req, &f->cred);
	if (created) {
		a = *created;
	} else {
		uint64_t gen;
		bool fresh;

		/* 0. Open from here on for an unlink of the file: one that
		 *    came while the origin is asked below would remove it, and
		 *    this open would fail (ENOENT or ESTALE from the origin,
		 *    where a local file system opens the file); hidden, its
		 *    name goes at the last close, or below if this open fails. */
		pthread_mutex_lock(&ino->lock);
		ino->opening++;
		pthread_mutex_unlock(&ino->lock);
		/* 1. Never serve a byte the origin would refuse this user,
		 *    cached or not. */
		mask = (fi->flags & O_ACCMODE) == O_RDONLY ? R_OK :
		       (fi->flags & O_ACCMODE) == O_WRONLY ? W_OK :
							     R_OK | W_OK;
		if (fi->flags & O_TRUNC)	/* gw_open truncates */
			mask |= W_OK;
		gen = gw_inode_attr_gen(ino);
		ret = gw_access_check(gw, ino, &f->cred, mask, &a, &fresh);
		if (ret && (fresh || ret != -EACCES))
			goto out_free;
		/* 2. Close-to-open: the origin's attributes now (those that
		 *    came with ACCESS are as fresh), unless nocto. A write
		 *    answered meanwhile is newer than them: keep its. */
		if (fresh && !gw_inode_set_attr_since(ino, &a, gen)) {
			pthread_mutex_lock(&ino->lock);
			a = ino->attr;
			pthread_mutex_unlock(&ino->lock);
		} else if (!fresh) {
			/* The answer, yes or no, came from the access cache:
			 * attributes that show a change since void it
			 * (access.c), and the origin is asked again, unless
			 * the kernel just had them from the origin for this
			 * very open (gw_inode_take_fresh). */
			pid_t tid = fuse_req_ctx(req)->pid;

			if (!gw->o->nocto && gw_inode_take_fresh(ino, tid, &a)) {
				ret = 0;
				__atomic_add_fetch(&gw->cto_joined, 1,
						   __ATOMIC_RELAXED);
			} else {
				ret = gw_get_attr(gw, req, ino,
						  !gw->o->nocto, &a);
			}
			if (ret >= 0) {
				int acc = gw_access_check(gw, ino, &f->cred,
							  mask, NULL, NULL);

				if (acc)
					ret = acc;
			}
		}
		if (ret < 0)
			goto out_free;
	}
	f->writer = created || (fi->flags & O_ACCMODE) != O_RDONLY;
	pthread_mutex_lock(&ino->lock);
	ino->opens++;
	if (!created)
		ino->opening--;
	if (f->writer) {
		struct gw_file **pp = &ino->wfiles;

		ino->writers++;
		/* Write errors from here on are this file's to report. */
		f->werr_seen = ino->werr_seq;
		while (*pp)
			pp = &(*pp)->wnext;
		*pp = f;
	}
	/* 4. A reader of a file that is open for writing through this mount
	 *    reads around the kernel's page cache (direct_io). The kernel
	 *    copies a write into its page before the gateway has it; a read
	 *    of that page answered meanwhile ends at the old end of file, and
	 *    the kernel zero-fills the rest of the page and keeps it, under
	 *    the size the write then gives it: zeros where the appended bytes
	 *    are. Read directly, such a read just returns fewer bytes. With
	 *    writeback the page cache is the newest copy (the kernel owns the
	 *    size; its dirty pages may not have reached the origin yet): a
	 *    read around it would miss them. */
	if (!f->writer && ino->writers > 0 && !gw->o->writeback)
		fi->direct_io = 1;
	/* 5. Unchanged since the last open (or changed only by writes through
	 *    this mount, which the kernel made in its page cache too): the
	 *    kernel's pages are good. With a write through the gateway still
	 *    unanswered the origin may already show it: a difference is then
	 *    taken for that write, never for someone else's. Dropping the
	 *    pages would be wrong, not just slow: the kernel copies a write
	 *    into a page before sending it, so a reader could read that page
	 *    back from the origin without the write, zero-filled past the
	 *    old end, under the new size (zeros in the middle of the file). */
	fi->keep_cache = ino->opened_before &&
			 (gw_inode_writing(ino) ||
			  (!ino->pages_stale &&
			   gw_attr_same_version(&ino->open_attr, &a)));
	if (!fi->keep_cache)
		ino->pages_stale = false;
	if (ino->opened_before && !fi->keep_cache) {
		__atomic_fetch_add(&gw->kernel_cache_drops, 1,
				   __ATOMIC_RELAXED);
		f->inval_attr = true;
	} else if (!ino->opened_before && ino->entry_kept &&
		   !gw_attr_same_version(&ino->kept_attr, &a)) {
		/* The kernel's attributes came from what was kept before a
		 * restart, and the origin has another version now. */
		f->inval_attr = true;
	}
	ino->entry_kept = false;
	ino->open_attr = a;
	ino->opened_before = true;
	pthread_mutex_unlock(&ino->lock);
	/* 6. The cache object, checked against this version of the file.
	 *    Only now that the open is counted: the last release of another
	 *    descriptor drops the object only when no open is left, so it
	 *    can neither take this open's object away nor leave one behind
	 *    on a closed file. */
	if (gw->cache && gw_cache_attach(gw, ino, &a) < 0)
		gw_log("cache: cannot hold file %llu, reading from the origin",
		       (unsigned long long)a.fileid);
	f->nodeid = ino->nodeid;
	fi->fh = f->h.id;
	gw_handle_publish(&f->h, GW_HREC_FILE, f->nodeid, &f->cred, f->writer);
	gw_write_file_published(ino, f);
	return 0;

out_free:
	gw_handle_del(&f->h);
	free(f);
	pthread_mutex_lock(&ino->lock);
	ino->opening--;
	pthread_mutex_unlock(&ino->lock);
	gw_silly_release(gw, ino);	/* hidden for this open only */
	return ret;
}

void gw_file_release(struct gw *gw, struct gw_inode *ino, struct gw_file *f)
{
	struct cache_obj *obj = NULL;
	bool last;

	(void)gw;
	pthread_mutex_lock(&ino->lock);
	last = ino->opens > 0 && --ino->opens == 0;
	if (f && f->writer) {
		struct gw_file **pp = &ino->wfiles;

		if (ino->writers > 0)
			ino->writers--;
		while (*pp && *pp != f)
			pp = &(*pp)->wnext;
		if (*pp)
			*pp = f->wnext;
	}
	pthread_mutex_unlock(&ino->lock);
	if (last) {
		gw_inode_drop_fetch(ino);
		/* The object holds two fds: a closed file gives them back
		 * (the kernel may keep thousands of inodes), unless an open
		 * came in meanwhile. */
		pthread_mutex_lock(&ino->lock);
		if (ino->opens == 0) {
			obj = ino->obj;
			ino->obj = NULL;
		}
		pthread_mutex_unlock(&ino->lock);
		if (obj)
			cache_obj_put(obj);
	}
	gw_handle_del(&f->h);
	free(f);
	/* The last close of a file unlinked while open removes its hidden
	 * name at the origin. */
	gw_silly_release(gw, ino);
}

void gw_open(fuse_req_t req, fuse_ino_t nodeid,
		    struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	bool inval;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	ret = gw_file_open(gw, req, ino, NULL, fi);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	/* 7. O_TRUNC: ours to do (FUSE_CAP_ATOMIC_O_TRUNC, gw_init; the
	 *    kernel passes the flag only on a connection that has it). The
	 *    kernel then sets its size to 0 when the OPEN is answered. With
	 *    a SETATTR instead it marks the size unstable meanwhile, and a
	 *    read of its page cache that we answer after the origin was cut
	 *    is zero-filled and kept under the old size: a reader that had
	 *    the file open saw zeros (test 37). */
	if (fi->flags & O_TRUNC) {
		ret = gw_file_truncate(gw, ino, &gw_file_of(fi)->cred);
		if (ret) {
			gw_file_release(gw, ino, gw_file_of(fi));
			fuse_reply_err(req, -ret);
			return;
		}
	}
	/* 8. Close-to-open: the open found another version than the one the
	 *    kernel's pages hold; its size may be as old (the OPEN reply
	 *    carries no attributes, and the kernel trusts its own for
	 *    acregmin). Make it ask again, so that a read past its old end
	 *    of file sees the new one. Before the reply: after it, the
	 *    opener's first read can come before the notification (seen in
	 *    test 50, 1 run in 5). Attributes only (offset -1): no page and
	 *    no inode lock is touched, so it cannot wait for this open.
	 *    Not for O_TRUNC: the kernel sets the size itself, and the
	 *    notification would make it keep (under the old size) what a
	 *    read sent before it gets short from the truncated file. */
	inval = gw_file_of(fi)->inval_attr && !(fi->flags & O_TRUNC);
	if (inval)
		fuse_lowlevel_notify_inval_inode(gw->se, nodeid, -1, 0);
	if (fuse_reply_open(req, fi) == -ENOENT)
		gw_file_release(gw, ino, gw_file_of(fi));	/* interrupted */
}


/* close(2) and fsync(2): COMMIT, and report what an earlier WRITE hit
 * (a close of any descriptor of the file, in any process, is a FLUSH:
 * only fsync marks the error told, gw_write_flush). Then the closing
 * process's locks on the file are let go at the origin (POSIX: any close
 * ends them), after its data, as the Linux NFS client does. */
void gw_flush(fuse_req_t req, fuse_ino_t nodeid,
		     struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	int ret;
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);

	ret = gw_write_flush(gw, ino, gw_file_of(fi), false);
	gw_lock_flush(gw, ino, fi->lock_owner);
	fuse_reply_err(req, -ret);
}

void gw_fsync(fuse_req_t req, fuse_ino_t nodeid, int datasync,
		     struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);

	(void)datasync;
	fuse_reply_err(req, -gw_write_flush(gw, ino,
				gw_file_of(fi), true));
}

/* NFSv3 has no ALLOCATE: say so, rather than pretend with zeros. */
void gw_fallocate(fuse_req_t req, fuse_ino_t nodeid, int mode,
			 off_t off, off_t len, struct fuse_file_info *fi)
{
	(void)nodeid;
	(void)mode;
	(void)off;
	(void)len;
	(void)fi;
	fuse_reply_err(req, EOPNOTSUPP);
}

void gw_release(fuse_req_t req, fuse_ino_t nodeid,
		       struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	struct gw_lock_releasing rel;
	char *drop = NULL;
	uint64_t dir = 0;
	int ret;

	if (ino) {
		/* Its locks' next askers wait for this (the kernel does
		 * not). */
		gw_lock_release_begin(gw, ino, fi->fh, &rel);
		/* Data written without a flush (e.g. by a re-exporter) is
		 * committed before the file is let go. */
		if (gw_write_flush(gw, ino, NULL, false))
			gw_log("commit on release of inode %llu failed",
			       (unsigned long long)nodeid);
		/* The locks of this open file (OFD, flock) end with it. */
		gw_lock_release(gw, ino, fi->fh);
		gw_lock_release_end(gw, &rel);
		gw_file_release(gw, ino, gw_file_of(fi));
		drop = gw_inode_refused_name(ino, &dir);
	} else {
		struct gw_file *f = gw_file_of(fi);

		gw_handle_del(&f->h);
		free(f);
	}
	fuse_reply_err(req, 0);
	/* After the reply (the kernel waits for no RELEASE, and takes the
	 * directory's lock for this), and with copies only: the eviction
	 * this brings FORGETs ino. A name renamed or removed meanwhile gives
	 * ENOENT, and the kernel keeps its size until it drops the inode. */
	if (drop) {
		ret = fuse_lowlevel_notify_inval_entry(gw->se, dir, drop,
						       strlen(drop));
		gw_log("file %llu: the origin refused write-back WRITEs; the "
		       "kernel's inode %s", (unsigned long long)nodeid,
		       ret ? "stays (its entry is gone)" :
			     "is dropped for the origin's size");
		free(drop);
	}
}
