/* read.c - the read path.
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
 * Every completed fetch is handed to the cache (cache_fill copies and
 * writes it through io_uring, off this path).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "gw_i.h"

#define GW_FETCH_KEEP 8		/* completed fetches kept per inode */

struct gw_chunk {
	uint32_t want, got;
	bool eof;
	bool has_attr;
	struct nfsc_attr attr;
};

struct gw_fetch {
	struct gw_fetch *next;		/* ino->fetches, ino->lock */
	struct gw_fetch *fill_next;	/* gw->fill_head queue, fill_lock */
	struct gw *gw;
	struct gw_inode *ino;
	uint64_t off;			/* block-aligned */
	size_t len;			/* bytes asked of the origin */
	size_t got;			/* valid bytes from off, when done */
	bool done, eof;			/* ino->lock */
	int err;			/* -errno, when done */
	uint64_t attr_gen;		/* the inode's attr_gen at start */
	unsigned refs;			/* list + waiters + in flight; ino->lock */
	unsigned pending;		/* chunk READs outstanding; ino->lock */
	unsigned nchunks;
	struct gw_chunk *chunks;
	char *buf;
};

static void fetch_unref_locked(struct gw_fetch *f, struct gw_fetch **freeme)
{
	if (--f->refs == 0) {
		f->next = *freeme;
		*freeme = f;
	}
}

static void fetch_free_list(struct gw_fetch *f)
{
	while (f) {
		struct gw_fetch *next = f->next;

		free(f->chunks);
		free(f->buf);
		free(f);
		f = next;
	}
}

/* Keep at most GW_FETCH_KEEP completed fetches on the inode's list. */
static void trim_locked(struct gw_inode *ino, struct gw_fetch **freeme)
{
	struct gw_fetch **pp = &ino->fetches, *f;
	unsigned kept = 0;

	while ((f = *pp)) {
		if (f->done && ++kept > GW_FETCH_KEEP) {
			*pp = f->next;
			fetch_unref_locked(f, freeme);
			continue;
		}
		pp = &f->next;
	}
}

static void trim(struct gw_inode *ino)
{
	struct gw_fetch *freeme = NULL;

	pthread_mutex_lock(&ino->lock);
	trim_locked(ino, &freeme);
	pthread_mutex_unlock(&ino->lock);
	fetch_free_list(freeme);
}

static bool gw_fill_queue(struct gw *gw, struct gw_fetch *f);

/* Called on a connection thread as each READ of a fetch completes. */
static void chunk_done(int status, void *priv)
{
	struct gw_fetch *f = priv;
	struct gw_inode *ino = f->ino;
	struct gw_fetch *freeme = NULL;
	struct nfsc_attr newest;
	bool last, has_attr = false;
	unsigned i;

	pthread_mutex_lock(&ino->lock);
	if (status && !f->err)
		f->err = status;
	last = --f->pending == 0;
	if (last) {
		/* The bytes are good up to the first short chunk. */
		f->got = 0;
		for (i = 0; !f->err && i < f->nchunks; i++) {
			f->got += f->chunks[i].got;
			if (f->chunks[i].has_attr) {
				newest = f->chunks[i].attr;
				has_attr = true;
			}
			if (f->chunks[i].got < f->chunks[i].want) {
				f->eof = f->chunks[i].eof;
				break;
			}
		}
		f->done = true;
		pthread_cond_broadcast(&ino->fetch_cond);
	}
	pthread_mutex_unlock(&ino->lock);
	if (!last)
		return;
	/* Not if a WRITE or SETATTR answered meanwhile: these READs may
	 * have been served before it, and their size is older. */
	if (has_attr)
		gw_inode_set_attr_since(ino, &newest, f->attr_gen);
	/* Whole blocks, or the tail of the file up to its end, go to the
	 * cache; copying and hashing them is the fill thread's job, not this
	 * connection thread's, which has a socket to serve. */
	if (!f->err && f->got && (f->got == f->len || f->eof) &&
	    gw_fill_queue(f->gw, f))
		return;		/* the fill thread drops our reference */
	pthread_mutex_lock(&ino->lock);
	fetch_unref_locked(f, &freeme);
	pthread_mutex_unlock(&ino->lock);
	fetch_free_list(freeme);
}

/* ---- the fill thread ---- */

/* Queue a completed fetch for the cache; takes over the caller's
 * reference. false if there is nothing to fill into. */
static bool gw_fill_queue(struct gw *gw, struct gw_fetch *f)
{
	struct gw_inode *ino = f->ino;
	bool has_obj;

	pthread_mutex_lock(&ino->lock);
	has_obj = ino->obj != NULL;
	if (has_obj)
		ino->fills_queued++;
	pthread_mutex_unlock(&ino->lock);
	if (!has_obj)
		return false;
	pthread_mutex_lock(&gw->fill_lock);
	f->fill_next = NULL;
	if (gw->fill_tail)
		gw->fill_tail->fill_next = f;
	else
		gw->fill_head = f;
	gw->fill_tail = f;
	pthread_cond_signal(&gw->fill_cond);
	pthread_mutex_unlock(&gw->fill_lock);
	return true;
}

static void *fill_thread(void *arg)
{
	struct gw *gw = arg;

	for (;;) {
		struct gw_fetch *f, *freeme = NULL;
		struct gw_inode *ino;

		pthread_mutex_lock(&gw->fill_lock);
		while (!gw->fill_head && !gw->fill_stop)
			pthread_cond_wait(&gw->fill_cond, &gw->fill_lock);
		f = gw->fill_head;
		if (f) {
			gw->fill_head = f->fill_next;
			if (!gw->fill_head)
				gw->fill_tail = NULL;
		}
		pthread_mutex_unlock(&gw->fill_lock);
		if (!f)
			break;		/* stopping and drained */
		ino = f->ino;
		/* The inode keeps its object while fills are queued. */
		cache_fill(ino->obj, f->buf, f->got, f->off);
		pthread_mutex_lock(&ino->lock);
		ino->fills_queued--;
		pthread_cond_broadcast(&ino->fetch_cond);
		fetch_unref_locked(f, &freeme);
		pthread_mutex_unlock(&ino->lock);
		fetch_free_list(freeme);
	}
	return NULL;
}

int gw_fill_start(struct gw *gw)
{
	return -pthread_create(&gw->fill_thread, NULL, fill_thread, gw);
}

void gw_fill_stop(struct gw *gw)
{
	pthread_mutex_lock(&gw->fill_lock);
	gw->fill_stop = true;
	pthread_cond_signal(&gw->fill_cond);
	pthread_mutex_unlock(&gw->fill_lock);
	pthread_join(gw->fill_thread, NULL);
}

/* Start fetching [off, off+len) (block-aligned); the fetch is on the
 * inode's list when this returns, so others can wait for it. Returns it
 * with a reference for the caller, or NULL on allocation failure. */
static struct gw_fetch *fetch_start(struct gw *gw, struct gw_inode *ino,
				    const struct nfsc_cred *cr, uint64_t off,
				    size_t len)
{
	uint32_t rs = nfsc_rsize(gw->nfs);
	struct gw_fetch *f = calloc(1, sizeof(*f));
	unsigned i;

	if (!f)
		return NULL;
	f->gw = gw;
	f->ino = ino;
	f->off = off;
	f->len = len;
	f->nchunks = (unsigned)((len + rs - 1) / rs);
	f->chunks = calloc(f->nchunks, sizeof(*f->chunks));
	f->buf = malloc(len);
	if (!f->chunks || !f->buf) {
		free(f->chunks);
		free(f->buf);
		free(f);
		return NULL;
	}
	f->refs = 3;			/* list, caller, the READs */
	f->attr_gen = gw_inode_attr_gen(ino);
	f->pending = f->nchunks;
	pthread_mutex_lock(&ino->lock);
	f->next = ino->fetches;
	ino->fetches = f;
	pthread_mutex_unlock(&ino->lock);
	for (i = 0; i < f->nchunks; i++) {
		struct gw_chunk *c = &f->chunks[i];
		uint64_t o = (uint64_t)i * rs;
		int ret;

		c->want = (uint32_t)(len - o < rs ? len - o : rs);
		ret = nfsc_read_async(gw->nfs, -1, cr, &ino->fh, off + o,
				      c->want, f->buf + o, &c->got, &c->eof,
				      &c->attr, &c->has_attr, chunk_done, f);
		if (ret) {
			/* Not queued: account for it as a failed READ. */
			chunk_done(ret, f);
		}
	}
	return f;
}

/* A fetch on the list that covers [off, off+size) (or reaches the end of
 * the file inside it), with a reference taken; NULL if none. */
static struct gw_fetch *fetch_find_locked(struct gw_inode *ino, uint64_t off,
					  size_t size)
{
	struct gw_fetch *f;

	for (f = ino->fetches; f; f = f->next) {
		if (f->err && f->done)
			continue;
		if (off < f->off || off + size > f->off + f->len) {
			/* A done fetch that ended at EOF covers the rest. */
			if (!(f->done && f->eof && off >= f->off &&
			      off <= f->off + f->got))
				continue;
		}
		f->refs++;
		return f;
	}
	return NULL;
}

static void fetch_put(struct gw_inode *ino, struct gw_fetch *f)
{
	struct gw_fetch *freeme = NULL;

	pthread_mutex_lock(&ino->lock);
	fetch_unref_locked(f, &freeme);
	pthread_mutex_unlock(&ino->lock);
	fetch_free_list(freeme);
}

/* Wait for f; reply to req with [off, off+size) straight from its buffer
 * (our reference keeps it alive meanwhile), then drop the reference. */
static void fetch_reply(fuse_req_t req, struct gw_inode *ino,
			struct gw_fetch *f, size_t size, uint64_t off)
{
	size_t skip, have;

	pthread_mutex_lock(&ino->lock);
	while (!f->done)
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	pthread_mutex_unlock(&ino->lock);
	/* done is final: err, got and buf no longer change. */
	if (f->err) {
		fuse_reply_err(req, -f->err);
	} else if (off >= f->off + f->got) {
		fuse_reply_buf(req, NULL, 0);	/* at or past the end */
	} else {
		skip = (size_t)(off - f->off);
		have = f->got - skip;
		fuse_reply_buf(req, f->buf + skip, have < size ? have : size);
	}
	fetch_put(ino, f);
}

/* Sequential access grows the readahead window; a seek resets it. */
static size_t readahead_for(struct gw *gw, struct gw_inode *ino,
			    uint64_t off, size_t size, uint64_t bs)
{
	size_t win;

	pthread_mutex_lock(&ino->lock);
	if (off == ino->ra_next && off != 0) {
		ino->ra_win = ino->ra_win ? ino->ra_win * 2 : bs;
		if (ino->ra_win > gw->o->readahead)
			ino->ra_win = gw->o->readahead;
	} else if (off != ino->ra_next) {
		ino->ra_win = 0;
	}
	ino->ra_next = off + size;
	win = ino->ra_win;
	pthread_mutex_unlock(&ino->lock);
	return win;
}

void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *fl, size_t size, off_t off)
{
	uint64_t uoff = (uint64_t)off, bs, start, end, ra_end, fsize;
	struct gw_fetch *f, *ra = NULL;
	struct cache_obj *obj;
	struct nfsc_attr a;
	ssize_t got;
	size_t win;
	char *buf;

	pthread_mutex_lock(&ino->lock);
	obj = ino->obj;
	pthread_mutex_unlock(&ino->lock);
	bs = cache_block_size(gw->cache);
	win = readahead_for(gw, ino, uoff, size, bs);
	/* 1. the cache */
	if (obj) {
		/* Aligned, so whole blocks are read into it directly. */
		buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		got = cache_read(obj, buf, size, uoff);
		if (got >= 0)
			fuse_reply_buf(req, buf, (size_t)got);
		free(buf);
		if (got >= 0)
			return;
	}
	/* 2. a fetch in flight or just done */
	pthread_mutex_lock(&ino->lock);
	f = fetch_find_locked(ino, uoff, size);
	pthread_mutex_unlock(&ino->lock);
	if (!f) {
		/* 3. the origin: the blocks this read needs, now ... */
		start = uoff & ~(bs - 1);
		end = (uoff + size + bs - 1) & ~(bs - 1);
		f = fetch_start(gw, ino, &fl->cred, start, end - start);
		if (!f) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		/* ... and what a sequential reader will want next, without
		 * waiting for it; never past the known end of the file. */
		fsize = (gw_inode_cached_attr(gw, ino, &a) == 0) ? a.size :
			UINT64_MAX;
		ra_end = end + win;
		if (ra_end > fsize)
			ra_end = (fsize + bs - 1) & ~(bs - 1);
		if (win && ra_end > end &&
		    !(obj && cache_present(obj, end, ra_end - end))) {
			pthread_mutex_lock(&ino->lock);
			ra = fetch_find_locked(ino, end, 1);
			pthread_mutex_unlock(&ino->lock);
			if (!ra)
				ra = fetch_start(gw, ino, &fl->cred, end,
						 ra_end - end);
			if (ra)
				fetch_put(ino, ra);
		}
	}
	fetch_reply(req, ino, f, size, uoff);
	trim(ino);
}

void gw_inode_drop_fetch(struct gw_inode *ino)
{
	struct gw_fetch *freeme = NULL, *f, *next;

	pthread_mutex_lock(&ino->lock);
	/* In-flight fetches stay until done (their READs point into them);
	 * completed ones go. Waiting for the in-flight ones here means no
	 * READ callback touches the inode after its last release. */
	for (;;) {
		bool busy = ino->fills_queued > 0;

		for (f = ino->fetches; f; f = f->next)
			busy |= !f->done;
		if (!busy)
			break;
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	}
	f = ino->fetches;
	ino->fetches = NULL;
	for (; f; f = next) {
		next = f->next;
		fetch_unref_locked(f, &freeme);
	}
	pthread_mutex_unlock(&ino->lock);
	fetch_free_list(freeme);
}
