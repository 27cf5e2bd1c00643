/* write.c - the write path: write-through to the origin.
 *
 * 1. A FUSE write waits for room in the mount's write window (bytes of
 *    WRITE in flight, write_window=); it is never failed for lack of room.
 * 2. It is split into wsize UNSTABLE WRITEs issued in parallel; the reply
 *    to the kernel goes out when all have been answered.
 * 3. Each extent stays in the inode's uncommitted list, with the write
 *    verifier the origin gave it, until a COMMIT (flush, fsync, release, or
 *    too much uncommitted data). A COMMIT whose verifier differs means the
 *    origin restarted and lost them: those extents are written again, now
 *    FILE_SYNC.
 * 4. The post-op attributes of the WRITEs become the inode's attributes
 *    and the cache object's coherency data, so the gateway's own writes do
 *    not look like a change at the origin; the cache takes the new bytes
 *    (cache_writes=through) or drops the blocks (around).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "gw_i.h"

/* Uncommitted bytes of one file that trigger a COMMIT. */
#define GW_COMMIT_AFTER (32u << 20)

struct gw_extent {
	struct gw_extent *next;
	uint64_t off;
	size_t len;
	uint8_t verf[8];		/* verifier of the WRITE that sent it */
	struct nfsc_cred cred;
	char data[];
};

/* ---- the window ---- */

static void window_get(struct gw *gw, size_t n)
{
	pthread_mutex_lock(&gw->win_lock);
	/* A request bigger than the window runs alone rather than never. */
	while (gw->win_used > 0 && gw->win_used + n > gw->o->write_window) {
		gw->win_waits++;
		pthread_cond_wait(&gw->win_cond, &gw->win_lock);
	}
	gw->win_used += n;
	pthread_mutex_unlock(&gw->win_lock);
}

static void window_put(struct gw *gw, size_t n)
{
	pthread_mutex_lock(&gw->win_lock);
	gw->win_used -= n;
	pthread_cond_broadcast(&gw->win_cond);
	pthread_mutex_unlock(&gw->win_lock);
}

/* ---- sending ---- */

struct wchunk {
	uint32_t written;
	uint8_t verf[8];
	struct nfsc_post post;
};

struct wbatch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned pending;		/* under lock */
	int status;			/* first error, under lock */
};

static void wbatch_done(int status, void *priv)
{
	struct wbatch *b = priv;

	pthread_mutex_lock(&b->lock);
	if (status && !b->status)
		b->status = status;
	if (--b->pending == 0)
		pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* WRITE [off, off+len) in wsize pieces in parallel. verf receives the
 * verifier (the last piece's; a server gives one per boot), post the
 * newest post-op attributes. */
static int send_range(struct gw *gw, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, const char *buf, size_t len,
		      uint64_t off, bool stable, uint8_t verf[8],
		      struct nfsc_post *post)
{
	uint32_t ws = nfsc_wsize(gw->nfs);
	size_t n = (len + ws - 1) / ws, i;
	struct wchunk *ch = calloc(n ? n : 1, sizeof(*ch));
	struct wbatch b = { .status = 0 };
	int ret;

	if (!ch)
		return -ENOMEM;
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cond, NULL);
	for (i = 0; i < n; i++) {
		size_t o = i * ws, l = len - o < ws ? len - o : ws;

		pthread_mutex_lock(&b.lock);
		b.pending++;
		pthread_mutex_unlock(&b.lock);
		ret = nfsc_write_async(gw->nfs, -1, cr, fh, off + o,
				       (uint32_t)l, buf + o, stable,
				       &ch[i].written, ch[i].verf,
				       &ch[i].post, wbatch_done, &b);
		if (ret)
			wbatch_done(ret, &b);
	}
	pthread_mutex_lock(&b.lock);
	while (b.pending)
		pthread_cond_wait(&b.cond, &b.lock);
	ret = b.status;
	pthread_mutex_unlock(&b.lock);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.lock);
	post->has_attr = false;
	for (i = 0; !ret && i < n; i++) {
		size_t l = len - i * ws < ws ? len - i * ws : ws;

		/* A short WRITE: finish it synchronously. */
		if (ch[i].written < l) {
			struct nfsc_post p2;
			size_t done = ch[i].written;

			ret = send_range(gw, cr, fh, buf + i * ws + done,
					 l - done, off + i * ws + done,
					 stable, ch[i].verf, &p2);
			if (!ret && p2.has_attr)
				ch[i].post = p2;
		}
		memcpy(verf, ch[i].verf, 8);
		if (ch[i].post.has_attr &&
		    (!post->has_attr ||
		     gw_attr_newer(&ch[i].post.attr, &post->attr)))
			*post = ch[i].post;
	}
	free(ch);
	return ret;
}

/* ---- committing ---- */

static struct gw_extent *take_extents(struct gw_inode *ino)
{
	struct gw_extent *l;

	pthread_mutex_lock(&ino->lock);
	l = ino->uncommitted;
	ino->uncommitted = NULL;
	ino->uncommitted_bytes = 0;
	pthread_mutex_unlock(&ino->lock);
	return l;
}

static void free_extents(struct gw_extent *e)
{
	while (e) {
		struct gw_extent *next = e->next;

		free(e);
		e = next;
	}
}

/* COMMIT what the inode has uncommitted; resend what the origin lost. */
static int commit_inode(struct gw *gw, struct gw_inode *ino)
{
	struct gw_extent *l = take_extents(ino), *e;
	struct nfsc_post post;
	uint8_t verf[8];
	uint64_t gen;
	int ret;

	if (!l)
		return 0;
	gen = gw_inode_attr_gen(ino);
	ret = nfsc_commit(gw->nfs, &l->cred, &ino->fh, verf, &post);
	for (e = l; !ret && e; e = e->next) {
		struct nfsc_post p2;
		uint8_t v2[8];

		if (!memcmp(e->verf, verf, 8))
			continue;
		__atomic_fetch_add(&gw->resends, 1, __ATOMIC_RELAXED);
		gw_log("origin lost unstable writes (verifier changed): "
		       "resending %zu bytes at %llu", e->len,
		       (unsigned long long)e->off);
		ret = send_range(gw, &e->cred, &ino->fh, e->data, e->len,
				 e->off, true, v2, &p2);
	}
	free_extents(l);
	if (!ret && post.has_attr)
		gw_inode_set_attr_since(ino, &post.attr, gen);
	return ret;
}

int gw_write_flush(struct gw *gw, struct gw_inode *ino, bool commit)
{
	int ret = 0;

	/* Writes are answered before the FUSE reply, so none is in flight
	 * for this inode here; what remains is uncommitted data. */
	if (commit)
		ret = commit_inode(gw, ino);
	pthread_mutex_lock(&ino->lock);
	if (!ret && ino->write_err)
		ret = ino->write_err;
	ino->write_err = 0;
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

void gw_write(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	      struct gw_file *f, const char *buf, size_t size, off_t off)
{
	struct gw_extent *e;
	struct nfsc_post post;
	bool commit_now;
	int ret;

	e = malloc(sizeof(*e) + size);
	if (!e) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	e->off = (uint64_t)off;
	e->len = size;
	e->cred = f->cred;
	memcpy(e->data, buf, size);
	/* Until this write is answered, a change seen at the origin may be
	 * this very write (opens and GETATTRs must not take it for someone
	 * else's and drop the kernel's pages: see gw_file_open). */
	pthread_mutex_lock(&ino->lock);
	ino->writes_started++;
	pthread_mutex_unlock(&ino->lock);
	/* Reads must not be served from a fetch older than this write. */
	gw_inode_drop_fetch(ino);

	window_get(gw, size);
	ret = send_range(gw, &f->cred, &ino->fh, buf, size, (uint64_t)off,
			 false, e->verf, &post);
	window_put(gw, size);
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
		free(e);
		/* The origin refused: what the cache holds may be ahead of or
		 * behind it now. Drop it. */
		gw_cache_drop(gw, ino);
		pthread_mutex_lock(&ino->lock);
		ino->writes_done++;
		pthread_cond_broadcast(&ino->fetch_cond);
		pthread_mutex_unlock(&ino->lock);
		fuse_reply_err(req, -ret);
		return;
	}
	if (post.has_attr) {
		gw_inode_set_attr(ino, &post.attr);
		gw_cache_own_write(gw, ino, &post.attr, buf, size,
				   (uint64_t)off);
	} else {
		gw_cache_drop(gw, ino);
		gw_inode_invalidate_attr(ino);
	}
	/* Listed before the reply: a flush that follows it must see it. */
	pthread_mutex_lock(&ino->lock);
	/* The kernel wrote these bytes into its page cache itself: its pages
	 * are of this version now, and the next open need not drop them. */
	if (post.has_attr && ino->opened_before &&
	    gw_attr_newer(&post.attr, &ino->open_attr))
		ino->open_attr = post.attr;
	ino->writes_done++;
	pthread_cond_broadcast(&ino->fetch_cond);
	e->next = ino->uncommitted;
	ino->uncommitted = e;
	ino->uncommitted_bytes += size;
	commit_now = ino->uncommitted_bytes >= GW_COMMIT_AFTER;
	pthread_mutex_unlock(&ino->lock);
	/* Bound what the gateway holds for resending. Before the reply: after
	 * it, the file may be released and the inode forgotten. */
	if (commit_now) {
		ret = commit_inode(gw, ino);
		if (ret) {
			pthread_mutex_lock(&ino->lock);
			if (!ino->write_err)
				ino->write_err = ret;
			pthread_mutex_unlock(&ino->lock);
		}
	}
	fuse_reply_write(req, size);
}

void gw_write_forget(struct gw_inode *ino)
{
	free_extents(take_extents(ino));
}
