/* read_req.c - the read path: the FUSE READ, from the cache or the origin.
 *
 * 1. A read whose blocks are all present and verify is served from the
 *    cache (cache_read checks every block's XXH3).
 * 2. Else, if a fetch from the origin that covers it is in flight or was
 *    recently completed, the read waits for it and copies from it: the
 *    kernel sends several reads of one file at once (async reads,
 *    readahead), and fills reach the cache asynchronously, so without this
 *    the same blocks would be fetched twice.
 * 3. Else the covering whole cache blocks are fetched: rsize READs in
 *    parallel over the connections. A sequential reader's fetch grows into
 *    a readahead window (doubling up to readahead=) whose tail is fetched
 *    without making this read wait for it.
 * Every completed fetch is handed to the cache (fill_thread.c: cache_fill_ref
 * writes its buffer through io_uring, off this path).
 *
 * Coherency: what may be served, and the counters that decide it.
 * - The cache object's coherency blob is the origin's (size, fileid,
 *   mtime, ctime) (cobj.c). Attributes from the origin with another blob
 *   reset the object (cache_obj_check) and drop the inode's fetches: at
 *   every open (close-to-open, unless nocto) and every GETATTR that goes
 *   to the origin. Changes the gateway makes itself move the blob forward
 *   instead (cache_obj_set_coh), keeping the data.
 * - ino->attr_gen: bumped by every update of ino->attr. A call to the
 *   origin notes it when sent (a fetch: f->attr_gen) and stores the
 *   attributes of its reply only if it has not moved
 *   (gw_inode_set_attr_since): a reply can arrive after that of a WRITE
 *   the origin did after it, and its attributes would step back.
 * - ino->writes_started / writes_done: FUSE writes taken in / answered;
 *   fetch_cond is broadcast on each. While they differ the origin may
 *   already show a write the kernel has not been answered for, so a
 *   changed blob is taken for it, not for someone else's change (no
 *   reset, keep_cache kept). A read notes writes_started when it comes
 *   in (wtarget) and does not answer short before writes_done reaches it
 *   (short_reply_stale): a short reply would end the file before bytes
 *   the kernel already has.
 * - ino->wgen: bumped by every write or truncate the gateway answered,
 *   before the answer. A fetch notes it at start (f->wgen); one whose
 *   wgen differs may hold bytes or an end of file from before that write:
 *   it is neither replied from (gw_fetch_wait_fresh; after
 *   GW_STALE_RETRIES such fetches the read goes to the origin alone) nor
 *   filled into the cache (fill_thread.c).
 * - In cache/, o->gen is bumped by every reset of an object and
 *   o->unmark_seq whenever a present block is unmarked. A fill started
 *   before a reset (cache_req.gen) marks nothing; a read whose checksum
 *   failed while either moved raced a rewrite and is a miss, not
 *   corruption (and its I/O error, across a reset, does not fail the
 *   object).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "inode_i.h"
#include "keep_i.h"
#include "read_i.h"

/* Fetches found stale (a write came after them) a read refetches before it
 * settles for one: a steady writer must not starve readers. */
#define GW_STALE_RETRIES 8

/* A reply of n < size bytes at off ends the file for the kernel. It must
 * not end before bytes a write through the gateway put there: such a
 * short read makes the kernel zero-fill the rest of the page and keep it
 * under the size the write gives the file (or leaves a hole in an
 * O_DIRECT read assembled from several requests). true, and the caller
 * reads again, when
 * - a write was answered that makes the file longer than the reply, or
 * - writes taken in before the read (ino->writes_started was wtarget
 *   then) were still unanswered: the kernel has their bytes in its pages
 *   already. They are waited for first; later ones are not, so a steady
 *   writer cannot starve readers. */
static bool short_reply_stale(struct gw_inode *ino, uint64_t off, size_t n,
			      size_t size, uint64_t wtarget)
{
	bool stale;

	if (n >= size)
		return false;
	pthread_mutex_lock(&ino->lock);
	stale = ino->attr_valid && off + n < ino->attr.size;
	while (!stale && ino->writes_done < wtarget) {
		stale = true;
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	}
	pthread_mutex_unlock(&ino->lock);
	return stale;
}

/* Reply to req with [off, off+size) of f, then drop the reference. The
 * reference to f must be dropped before the reply, since once the kernel
 * has the reply the inode may go away: the reply holds a reference to
 * f's buffer instead (no copy). false (nothing replied) if f turned out
 * stale. */
static bool fetch_reply(fuse_req_t req, struct gw_inode *ino,
			struct gw_fetch *f, size_t size, uint64_t off,
			bool accept_stale, uint64_t wtarget)
{
	size_t skip = 0, n = 0;
	char *buf = NULL;
	int err;

	if (gw_fetch_wait_done(req_gw(req), ino, f)) {
		gw_fetch_put(ino, f);	/* the origin is lost */
		fuse_reply_err(req, EHOSTDOWN);
		return true;
	}
	if (!gw_fetch_wait_fresh(ino, f, accept_stale)) {
		gw_fetch_put(ino, f);
		return false;
	}
	/* done is final: err, got and buf no longer change. */
	err = f->err;
	if (!err && off < f->off + f->got) {
		skip = (size_t)(off - f->off);
		n = f->got - skip < size ? f->got - skip : size;
	}
	if (!err && short_reply_stale(ino, off, n, size, wtarget)) {
		struct gw_fetch *freeme = NULL;

		pthread_mutex_lock(&ino->lock);
		gw_fetch_unlist_locked(ino, f, &freeme);
		pthread_mutex_unlock(&ino->lock);
		gw_fetch_free_list(freeme);
		gw_fetch_put(ino, f);
		return false;	/* stale end of file: the caller reads again */
	}
	if (!err && n) {
		buf = f->buf;
		gw_buf_ref(buf);
	}
	gw_fetch_put(ino, f);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_buf(req, buf ? buf + skip : NULL, n); /* n = 0: EOF */
	gw_buf_put(buf);
	return true;
}

static void direct_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
			struct gw_file *fl, size_t size, uint64_t off)
{
	char *buf = malloc(size ? size : 1);
	ssize_t got;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = nfsc_pread(gw->nfs, &fl->cred, &ino->fh, buf, size, off, NULL,
			 NULL);
	if (got < 0)
		fuse_reply_err(req, (int)-got);
	else
		fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}

/* Everything read_req does to the inode happens before its reply: once the
 * kernel has it, the file may be released and the inode forgotten. obj:
 * the inode's cache object with a reference of the caller's, or NULL;
 * wtarget: ino->writes_started when the read came in. */
static void read_req(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		     struct gw_file *fl, size_t size, off_t off,
		     struct cache_obj *obj, uint64_t wtarget)
{
	uint64_t uoff = (uint64_t)off, bs, pos, end = uoff + size;
	const struct nfsc_cred *cr = &fl->cred;
	struct gw_fetch *f;
	char *buf = NULL;
	ssize_t got = 0;
	unsigned stale = 0;
	uint64_t gap_end, t0;
	bool at_eof;
	size_t win;

	bs = cache_block_size(gw->cache);
	win = gw_readahead_for(gw, ino, uoff, size, bs);
	/* 1. the cache */
	if (obj) {
		/* Aligned, so whole blocks are read into it directly. */
		char *cbuf = gw_buf_get(size ? size : 1);

		if (!cbuf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		t0 = gw_now_ns();
		got = cache_read(obj, cbuf, size, uoff);
		if (got >= 0)
			gw_hist_record(&gw->cache_read_lat, t0);
		if (got >= 0 &&
		    !short_reply_stale(ino, uoff, (size_t)got, size, wtarget)) {
			gw_readahead_push(gw, ino, cr, obj, end, win, bs);
			fuse_reply_buf(req, cbuf, (size_t)got);
			gw_buf_put(cbuf);
			return;
		}
		gw_buf_put(cbuf);
		got = 0;	/* a miss: go on piece by piece */
	}
	/* 2. fetches in flight or just done, and 3. the origin for what
	 * none of them covers; piece by piece. */
	for (pos = uoff; pos < end;) {
		size_t skip, n;

		if (stale > GW_STALE_RETRIES) {
			/* Writes keep overtaking our fetches: read this
			 * request alone, now, after every write the kernel
			 * has been answered for. */
			free(buf);
			direct_read(gw, req, ino, fl, size, uoff);
			return;
		}
		/* Blocks the cache has (the rest of a partial hit). */
		gap_end = end;
		if (obj) {
			uint64_t absent = cache_next_absent(obj, pos, end);

			if (absent > pos) {
				size_t want = (size_t)((absent < end ? absent :
							end) - pos);
				ssize_t r;

				if (!buf && !(buf = malloc(size))) {
					got = -ENOMEM;
					break;
				}
				t0 = gw_now_ns();
				r = cache_read(obj, buf + (pos - uoff), want,
					       pos);
				if (r >= 0)
					gw_hist_record(&gw->cache_read_lat, t0);
				if (r == 0)
					break;		/* end of the file */
				if (r > 0) {
					pos += (uint64_t)r;
					if ((size_t)r < want)
						break;	/* end of the file */
					continue;
				}
				/* Failed its checksum: fetch it below. */
			}
			gap_end = cache_next_present(obj, pos, end);
			if (gap_end <= pos)
				gap_end = end;
		}
		pthread_mutex_lock(&ino->lock);
		f = gw_fetch_at_locked(ino, pos);
		pthread_mutex_unlock(&ino->lock);
		if (!f)
			f = gw_fetch_gap(gw, ino, cr, pos, gap_end, bs);
		if (!f) {
			got = -ENOMEM;
			break;
		}
		if (pos == uoff && f->off + f->len >= end) {
			/* One fetch covers it all: reply from its buffer. */
			gw_readahead_push(gw, ino, cr, obj, end, win, bs);
			gw_fetch_trim(ino);
			if (fetch_reply(req, ino, f, size, uoff, false,
					wtarget)) {
				free(buf);
				return;
			}
			stale++;
			continue;	/* stale: look again */
		}
		if (!buf)
			buf = malloc(size);
		if (gw_fetch_wait_done(gw, ino, f)) {
			gw_fetch_put(ino, f);	/* the origin is lost */
			got = -EHOSTDOWN;
			break;
		}
		if (!gw_fetch_wait_fresh(ino, f, false)) {
			gw_fetch_put(ino, f);
			stale++;
			continue;
		}
		/* done is final: err, got, eof and buf no longer change. */
		got = f->err;
		skip = (size_t)(pos - f->off);
		n = f->got > skip ? f->got - skip : 0;
		if (n > end - pos)
			n = (size_t)(end - pos);
		if (!got && buf)
			memcpy(buf + (pos - uoff), f->buf + skip, n);
		at_eof = f->eof && skip + n == f->got;
		gw_fetch_put(ino, f);
		if (got || !buf)
			break;
		pos += n;
		if (n == 0 || at_eof)
			break;		/* end of file */
	}
	if (!got && !buf)
		got = -ENOMEM;
	gw_readahead_push(gw, ino, cr, obj, end, win, bs);
	gw_fetch_trim(ino);
	if (!got &&
	    short_reply_stale(ino, uoff, (size_t)(pos - uoff), size, wtarget)) {
		free(buf);
		direct_read(gw, req, ino, fl, size, uoff);
		return;
	}
	if (got < 0)
		fuse_reply_err(req, (int)-got);
	else
		fuse_reply_buf(req, buf, (size_t)(pos - uoff));
	free(buf);
}

void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *fl, size_t size, off_t off)
{
	struct cache_obj *obj;
	uint64_t wtarget;

	/* Our own reference: the object outlives the reply, and a release
	 * of the file cannot close it under us (the kernel may send the
	 * release of another open of the file meanwhile). */
	pthread_mutex_lock(&ino->lock);
	obj = cache_obj_grab(ino->obj);
	wtarget = ino->writes_started;
	pthread_mutex_unlock(&ino->lock);
	read_req(gw, req, ino, fl, size, off, obj, wtarget);
	cache_obj_put(obj);
}

/* The FUSE READ. */
void gw_read_op(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);

	if (gw_lock_lost(gw, ino->nodeid, fi->fh)) {
		fuse_reply_err(req, EIO);	/* doc/locks.md "Restarts" */
		return;
	}
	gw_read(gw, req, ino, gw_file_of(fi), size, off);
}
