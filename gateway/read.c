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

#define GW_FETCH_KEEP 4		/* completed fetches kept per inode */
/* Fetches found stale (a write came after them) a read refetches before it
 * settles for one: a steady writer must not starve readers. */
#define GW_STALE_RETRIES 8
/* Fetched bytes waiting for the fill thread beyond which readahead pauses. */
#define GW_FILL_QUEUE_MAX (64u << 20)

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
	bool filling;			/* queued for the fill thread; ino->lock */
	bool submitted;			/* the cache took its fill; ino->lock */
	int err;			/* -errno, when done */
	uint64_t attr_gen;		/* the inode's attr_gen at start */
	uint64_t wgen;			/* the inode's wgen at start */
	unsigned refs;			/* list + waiters + in flight; ino->lock */
	unsigned pending;		/* chunk READs outstanding; ino->lock */
	unsigned nchunks;
	struct gw_chunk *chunks;
	char *buf;
};

static void fetch_unref_locked(struct gw_fetch *f, struct gw_fetch **freeme)
{
	GW_ASSERT_HELD(&f->ino->lock);
	if (--f->refs == 0) {
		f->next = *freeme;
		*freeme = f;
	}
}

static void fetch_free_list(struct gw_fetch *f)
{
	while (f) {
		struct gw_fetch *next = f->next;

		__atomic_fetch_sub(&f->gw->fetch_bytes, f->len, __ATOMIC_RELAXED);
		__atomic_fetch_sub(&f->gw->fetches, 1, __ATOMIC_RELAXED);
		free(f->chunks);
		gw_buf_put(f->buf);
		free(f);
		f = next;
	}
}

/* Take f off the inode's list (dropping the list's reference). */
static void fetch_unlist_locked(struct gw_inode *ino, struct gw_fetch *f,
				struct gw_fetch **freeme)
{
	struct gw_fetch **pp;

	GW_ASSERT_HELD(&ino->lock);
	for (pp = &ino->fetches; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			fetch_unref_locked(f, freeme);
			return;
		}
	}
}

/* Keep at most GW_FETCH_KEEP completed fetches on the inode's list. */
static void trim_locked(struct gw_inode *ino, struct gw_fetch **freeme)
{
	struct gw_fetch **pp = &ino->fetches, *f;
	unsigned kept = 0;

	GW_ASSERT_HELD(&ino->lock);
	while ((f = *pp)) {
		/* A fetch waiting for its fill stays: until the blocks are
		 * present, it is the only copy a reader can find. */
		/* One whose fill the cache accepted stays until its blocks
		 * are present (the cache bounds its writes in flight, so
		 * this bounds memory too). */
		if (f->done && !f->filling && ++kept > GW_FETCH_KEEP &&
		    (!f->submitted || !ino->obj || f->err ||
		     cache_present(ino->obj, f->off, f->got))) {
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

static void gw_fill_queue(struct gw *gw, struct gw_fetch *f);

/* Called on a connection thread as each READ of a fetch completes. Once
 * the last one has published done, the inode may be freed at any moment
 * (gw_inode_drop_fetch waits only for that): all inode work happens in the
 * locked section that publishes it. */
static void chunk_done(int status, void *priv)
{
	struct gw_fetch *f = priv;
	struct gw_inode *ino = f->ino;
	struct gw *gw = f->gw;
	struct gw_fetch *freeme = NULL;
	bool last, fill = false;
	unsigned i;

	pthread_mutex_lock(&ino->lock);
	if (status && !f->err)
		f->err = status;
	last = --f->pending == 0;
	if (last) {
		const struct nfsc_attr *newest = NULL;

		/* 1. The bytes are good up to the first short chunk. */
		f->got = 0;
		for (i = 0; !f->err && i < f->nchunks; i++) {
			f->got += f->chunks[i].got;
			if (f->chunks[i].has_attr)
				newest = &f->chunks[i].attr;
			if (f->chunks[i].got < f->chunks[i].want) {
				f->eof = f->chunks[i].eof;
				break;
			}
		}
		/* 2. Attributes, unless a WRITE or SETATTR answered
		 *    meanwhile: these READs may predate it. */
		if (newest)
			gw_inode_set_attr_since_locked(ino, newest,
						       f->attr_gen);
		/* 3. Whole blocks, or the tail of the file up to its end,
		 *    go to the cache through the fill thread (copying and
		 *    hashing is not for a thread that serves a socket). The
		 *    queued count keeps the inode and its object alive. */
		fill = !f->err && f->got && ino->obj &&
		       (f->got == f->len || f->eof);

		if (fill) {
			ino->fills_queued++;
			f->filling = true;
		} else
			fetch_unref_locked(f, &freeme);
		f->done = true;
		pthread_cond_broadcast(&ino->fetch_cond);
	}
	pthread_mutex_unlock(&ino->lock);
	if (fill)
		gw_fill_queue(gw, f);	/* the fill thread drops our ref */
	fetch_free_list(freeme);
}

/* ---- the fill thread ---- */

/* Queue a completed fetch for the cache, with the reference of its READs
 * and a count in ino->fills_queued taken by the caller. */
static void gw_fill_queue(struct gw *gw, struct gw_fetch *f)
{
	__atomic_fetch_add(&gw->fill_queued_bytes, f->got, __ATOMIC_RELAXED);
	pthread_mutex_lock(&gw->fill_lock);
	f->fill_next = NULL;
	if (gw->fill_tail)
		gw->fill_tail->fill_next = f;
	else
		gw->fill_head = f;
	gw->fill_tail = f;
	pthread_cond_signal(&gw->fill_cond);
	pthread_mutex_unlock(&gw->fill_lock);
}

static void *fill_thread(void *arg)
{
	struct gw *gw = arg;

	for (;;) {
		struct gw_fetch *f, *freeme = NULL;
		struct cache_obj *obj;
		struct gw_inode *ino;
		bool filled, stale;

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
		/* A write or truncate answered since the fetch began may have
		 * changed these bytes: such a fill would put old data under
		 * the new size. (One racing the fill itself is caught by the
		 * cache: fills of different bytes mark nothing.) */
		pthread_mutex_lock(&ino->lock);
		stale = f->wgen != ino->wgen;
		/* The object with a reference of our own: a last release
		 * that did not wait for this fill (an open and a close came
		 * in after its own wait) may drop ino->obj's meanwhile. */
		obj = stale ? NULL : cache_obj_grab(ino->obj);
		pthread_mutex_unlock(&ino->lock);
		/* The cache writes the fetch's own buffer (aligned, with
		 * room to the next 4 KiB: it is whole blocks long) and drops
		 * its reference when the write is done. */
		if (obj)
			gw_buf_ref(f->buf);
		filled = obj &&
			 cache_fill_ref(obj, f->buf, f->got, f->off,
					gw_buf_release_cb, f->buf) == 0;
		__atomic_fetch_sub(&gw->fill_queued_bytes, f->got,
				   __ATOMIC_RELAXED);
		pthread_mutex_lock(&ino->lock);
		ino->fills_queued--;
		f->filling = false;
		pthread_cond_broadcast(&ino->fetch_cond);
		/* The cache has the bytes now: the fetch need not hold them
		 * too (memory is what many open files multiply). cache_fill
		 * only queued the write, though: until it completes the
		 * blocks are not present, and a read finding neither them nor
		 * this fetch would fetch them again. */
		f->submitted = filled;
		if (filled && cache_present(obj, f->off, f->got))
			fetch_unlist_locked(ino, f, &freeme);
		fetch_unref_locked(f, &freeme);
		pthread_mutex_unlock(&ino->lock);
		cache_obj_put(obj);
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
/* Wait for f to complete. false if a write through the gateway was
 * answered since f was started: its bytes (or its end of file) may predate
 * that write, and a short read would even make the kernel zero-fill pages
 * and shrink its size. Such a fetch is taken off the list. */
static bool fetch_wait_fresh(struct gw_inode *ino, struct gw_fetch *f,
			     bool accept_stale)
{
	struct gw_fetch *freeme = NULL;
	bool fresh;

	pthread_mutex_lock(&ino->lock);
	while (!f->done)
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	fresh = accept_stale || f->wgen == ino->wgen;
	if (!fresh)
		fetch_unlist_locked(ino, f, &freeme);
	pthread_mutex_unlock(&ino->lock);
	fetch_free_list(freeme);
	return fresh;
}

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

	if (!fetch_wait_fresh(ino, f, accept_stale)) {
		fetch_put(ino, f);
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
		fetch_unlist_locked(ino, f, &freeme);
		pthread_mutex_unlock(&ino->lock);
		fetch_free_list(freeme);
		fetch_put(ino, f);
		return false;	/* stale end of file: the caller reads again */
	}
	if (!err && n) {
		buf = f->buf;
		gw_buf_ref(buf);
	}
	fetch_put(ino, f);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_buf(req, buf ? buf + skip : NULL, n); /* n = 0: EOF */
	gw_buf_put(buf);
	return true;
}

/* Sequential access grows the readahead window; a seek resets it. The
 * kernel sends a sequential reader's requests several at a time, so they
 * may arrive a little out of order: near the expected offset counts. */
static size_t readahead_for(struct gw *gw, struct gw_inode *ino,
			    uint64_t off, size_t size, uint64_t bs)
{
	uint64_t slack;
	size_t win;

	pthread_mutex_lock(&ino->lock);
	slack = ino->ra_win > 2 * size ? ino->ra_win : 2 * size;
	if (off != 0 && off + slack >= ino->ra_next &&
	    off <= ino->ra_next + slack) {
		ino->ra_win = ino->ra_win ? ino->ra_win * 2 : bs;
		if (ino->ra_win > gw->o->readahead)
			ino->ra_win = gw->o->readahead;
	} else if (off != ino->ra_next) {
		ino->ra_win = 0;
		ino->ra_front = 0;
	}
	if (off + size > ino->ra_next)
		ino->ra_next = off + size;
	win = ino->ra_win;
	pthread_mutex_unlock(&ino->lock);
	return win;
}

/* The fetch that holds byte pos (or knows the file ends before it), with a
 * reference; NULL if none. */
static struct gw_fetch *fetch_at_locked(struct gw_inode *ino, uint64_t pos)
{
	struct gw_fetch *f;

	GW_ASSERT_HELD(&ino->lock);
	for (f = ino->fetches; f; f = f->next) {
		if (f->done && f->err)
			continue;
		if (pos < f->off)
			continue;
		if (pos < f->off + f->len ||
		    (f->done && f->eof && pos <= f->off + f->got)) {
			f->refs++;
			return f;
		}
	}
	return NULL;
}

/* Start a fetch of [pos, end) rounded out to whole blocks, unless one
 * already holds pos: then that one is returned. The check, the clipping
 * against fetches further on and the insertion are one locked step, so two
 * threads never fetch the same bytes. Returns the fetch with a reference
 * for the caller, or NULL on allocation failure. */
static struct gw_fetch *fetch_gap(struct gw *gw, struct gw_inode *ino,
				  const struct nfsc_cred *cr, uint64_t pos,
				  uint64_t end, uint64_t bs)
{
	uint64_t start = pos & ~(bs - 1), stop = (end + bs - 1) & ~(bs - 1);
	uint32_t rs = nfsc_rsize(gw->nfs);
	uint64_t attr_gen = gw_inode_attr_gen(ino);
	struct gw_fetch *f = calloc(1, sizeof(*f)), *g;
	size_t len;
	unsigned i;

	if (!f)
		return NULL;
	f->buf = gw_buf_get(stop - start);
	f->chunks = calloc((stop - start + rs - 1) / rs, sizeof(*f->chunks));
	if (!f->chunks || !f->buf) {
		free(f->chunks);
		gw_buf_put(f->buf);
		free(f);
		return NULL;
	}
	pthread_mutex_lock(&ino->lock);
	g = fetch_at_locked(ino, pos);
	if (g) {
		pthread_mutex_unlock(&ino->lock);
		free(f->chunks);
		gw_buf_put(f->buf);
		free(f);
		return g;
	}
	for (g = ino->fetches; g; g = g->next)
		if (!(g->done && g->err) && g->off > pos && g->off < stop)
			stop = g->off;
	len = stop - start;
	f->gw = gw;
	f->ino = ino;
	f->off = start;
	f->len = len;
	f->nchunks = (unsigned)((len + rs - 1) / rs);
	f->refs = 3;			/* list, caller, the READs */
	f->pending = f->nchunks;
	f->attr_gen = attr_gen;
	f->wgen = ino->wgen;
	f->next = ino->fetches;
	ino->fetches = f;
	pthread_mutex_unlock(&ino->lock);
	__atomic_fetch_add(&gw->fetch_bytes, len, __ATOMIC_RELAXED);
	__atomic_fetch_add(&gw->fetches, 1, __ATOMIC_RELAXED);
	for (i = 0; i < f->nchunks; i++) {
		struct gw_chunk *c = &f->chunks[i];
		uint64_t o = (uint64_t)i * rs;
		int ret;

		c->want = (uint32_t)(len - o < rs ? len - o : rs);
		ret = nfsc_read_async(gw->nfs, -1, cr, &ino->fh, start + o,
				      c->want, f->buf + o, &c->got, &c->eof,
				      &c->attr, &c->has_attr, chunk_done, f);
		if (ret) {
			/* Not queued: account for it as a failed READ. */
			chunk_done(ret, f);
		}
	}
	return f;
}

/* Keep the readahead front readahead-window bytes ahead of a sequential
 * reader, fetching what lies between without waiting for it. */
static void readahead_push(struct gw *gw, struct gw_inode *ino,
			   const struct nfsc_cred *cr, struct cache_obj *obj,
			   uint64_t reqend, size_t win, uint64_t bs)
{
	uint64_t from, to, fsize = UINT64_MAX;
	struct nfsc_attr a;
	struct gw_fetch *f;

	if (!win)
		return;
	/* The fill thread is behind (the cache disk is slower than the
	 * origin): fetch no further ahead until it catches up, rather than
	 * hold ever more fetched data in memory. */
	if (__atomic_load_n(&gw->fill_queued_bytes, __ATOMIC_RELAXED) >
	    GW_FILL_QUEUE_MAX) {
		__atomic_fetch_add(&gw->readahead_throttled, 1,
				   __ATOMIC_RELAXED);
		return;
	}
	if (gw_inode_cached_attr(gw, ino, &a) == 0)
		fsize = a.size;
	to = (reqend + win + bs - 1) & ~(bs - 1);
	if (to > fsize)
		to = (fsize + bs - 1) & ~(bs - 1);
	pthread_mutex_lock(&ino->lock);
	from = ino->ra_front > reqend ? ino->ra_front : reqend;
	from = (from + bs - 1) & ~(bs - 1);
	/* Fetch in steps of at least a quarter window: fewer, bigger
	 * fetches, each spread over the connections. */
	if (to <= from || (to - from < win / 4 && to < fsize)) {
		pthread_mutex_unlock(&ino->lock);
		return;
	}
	ino->ra_front = to;
	pthread_mutex_unlock(&ino->lock);
	/* Skip what the cache holds: fetch the first run of absent blocks. */
	if (obj) {
		from = cache_next_absent(obj, from, to);
		if (from >= to)
			return;
		to = cache_next_present(obj, from, to);
	}
	/* Skip what fetches already cover, then fetch the first gap. */
	for (;;) {
		pthread_mutex_lock(&ino->lock);
		f = fetch_at_locked(ino, from);
		pthread_mutex_unlock(&ino->lock);
		if (!f)
			break;
		from = f->off + f->len;
		fetch_put(ino, f);
		if (from >= to)
			return;
	}
	f = fetch_gap(gw, ino, cr, from, to, bs);
	if (f)
		fetch_put(ino, f);
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
	uint64_t gap_end;
	bool at_eof;
	size_t win;

	bs = cache_block_size(gw->cache);
	win = readahead_for(gw, ino, uoff, size, bs);
	/* 1. the cache */
	if (obj) {
		/* Aligned, so whole blocks are read into it directly. */
		char *cbuf = gw_buf_get(size ? size : 1);

		if (!cbuf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		got = cache_read(obj, cbuf, size, uoff);
		if (got >= 0 &&
		    !short_reply_stale(ino, uoff, (size_t)got, size, wtarget)) {
			readahead_push(gw, ino, cr, obj, end, win, bs);
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
				r = cache_read(obj, buf + (pos - uoff), want,
					       pos);
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
		f = fetch_at_locked(ino, pos);
		pthread_mutex_unlock(&ino->lock);
		if (!f)
			f = fetch_gap(gw, ino, cr, pos, gap_end, bs);
		if (!f) {
			got = -ENOMEM;
			break;
		}
		if (pos == uoff && f->off + f->len >= end) {
			/* One fetch covers it all: reply from its buffer. */
			readahead_push(gw, ino, cr, obj, end, win, bs);
			trim(ino);
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
		if (!fetch_wait_fresh(ino, f, false)) {
			fetch_put(ino, f);
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
		fetch_put(ino, f);
		if (got || !buf)
			break;
		pos += n;
		if (n == 0 || at_eof)
			break;		/* end of file */
	}
	if (!got && !buf)
		got = -ENOMEM;
	readahead_push(gw, ino, cr, obj, end, win, bs);
	trim(ino);
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
