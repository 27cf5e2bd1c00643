/* fetch.c - fetches: origin READs of whole cache blocks, in flight or
 * recently done, that reads wait for and copy from (read_req.c), from start
 * (gw_fetch_gap) through completion (chunk_done, which hands whole blocks
 * to the fill thread, fill_thread.c) to their last reference.
 *
 * A fetch is on its inode's list (ino->fetches) from its start until it is
 * trimmed, found stale or dropped; each holder of a pointer to it outside
 * ino->lock holds a reference (refs). Memory is freed outside the lock
 * (gw_fetch_free_list): a buffer may be big.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "condwait.h"
#include "inode_i.h"
#include "keep_i.h"
#include "read_i.h"
#include "worker.h"

#define GW_FETCH_KEEP 4		/* completed fetches kept per inode */

void gw_fetch_unref_locked(struct gw_fetch *f, struct gw_fetch **freeme)
{
	GW_ASSERT_HELD(&f->ino->lock);
	if (--f->refs == 0) {
		f->next = *freeme;
		*freeme = f;
	}
}

void gw_fetch_free_list(struct gw_fetch *f)
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
void gw_fetch_unlist_locked(struct gw_inode *ino, struct gw_fetch *f,
			    struct gw_fetch **freeme)
{
	struct gw_fetch **pp;

	GW_ASSERT_HELD(&ino->lock);
	for (pp = &ino->fetches; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			gw_fetch_unref_locked(f, freeme);
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
			gw_fetch_unref_locked(f, freeme);
			continue;
		}
		pp = &f->next;
	}
}

void gw_fetch_trim(struct gw_inode *ino)
{
	struct gw_fetch *freeme = NULL;

	pthread_mutex_lock(&ino->lock);
	trim_locked(ino, &freeme);
	pthread_mutex_unlock(&ino->lock);
	gw_fetch_free_list(freeme);
}

/* Queue a completed fetch for the fill thread (fill_thread.c, which takes
 * it off the queue), with the reference of its READs and a count in
 * ino->fills_queued taken by the caller. */
static void fill_queue(struct gw *gw, struct gw_fetch *f)
{
	__atomic_fetch_add(&gw->fill_queued_bytes, f->got, __ATOMIC_RELAXED);
	pthread_mutex_lock(&gw->fill_lock);
	QUEUE_PUSH(gw->fill_head, gw->fill_tail, f, fill_next);
	pthread_cond_signal(&gw->fill_cond);
	pthread_mutex_unlock(&gw->fill_lock);
}

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

	/* The READs of a fetch are sent together, so each one's latency is
	 * from then: what a reader waiting for that chunk sees. */
	if (!status)
		gw_hist_record(&gw->origin_read_lat, f->sent_ns);
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
		if (fill && gw->o->fill_skip &&
		    __atomic_load_n(&gw->fill_queued_bytes,
				    __ATOMIC_RELAXED) > GW_FILL_QUEUE_MAX) {
			/* The fill thread is behind: not cached. */
			fill = false;
			__atomic_add_fetch(&gw->fill_queue_skipped, 1,
					   __ATOMIC_RELAXED);
			__atomic_add_fetch(&gw->fill_queue_skipped_bytes,
					   f->got, __ATOMIC_RELAXED);
		}

		if (fill) {
			ino->fills_queued++;
			__atomic_fetch_add(&gw->fills_pending, 1,
					   __ATOMIC_RELAXED);
			f->filling = true;
		} else
			gw_fetch_unref_locked(f, &freeme);
		f->done = true;
		pthread_cond_broadcast(&ino->fetch_cond);
	}
	pthread_mutex_unlock(&ino->lock);
	if (fill)
		fill_queue(gw, f);	/* the fill thread drops our ref */
	gw_fetch_free_list(freeme);
}

void gw_fetch_put(struct gw_inode *ino, struct gw_fetch *f)
{
	struct gw_fetch *freeme = NULL;

	pthread_mutex_lock(&ino->lock);
	gw_fetch_unref_locked(f, &freeme);
	pthread_mutex_unlock(&ino->lock);
	gw_fetch_free_list(freeme);
}

/* Wait for f to complete. false if a write through the gateway was
 * answered since f was started: its bytes (or its end of file) may predate
 * that write, and a short read would even make the kernel zero-fill pages
 * and shrink its size. Such a fetch is taken off the list. */
int gw_fetch_wait_done(struct gw *gw, struct gw_inode *ino,
		       struct gw_fetch *f)
{
	int ret = 0;

	if (!gw->o->offline)
		return 0;
	pthread_mutex_lock(&ino->lock);
	while (!f->done) {
		if (gw_offline(gw)) {
			ret = -EHOSTDOWN;
			break;
		}
		cond_wait_ms(&ino->fetch_cond, &ino->lock, 250);
	}
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

bool gw_fetch_wait_fresh(struct gw_inode *ino, struct gw_fetch *f,
			 bool accept_stale)
{
	struct gw_fetch *freeme = NULL;
	bool fresh;

	pthread_mutex_lock(&ino->lock);
	while (!f->done)
		pthread_cond_wait(&ino->fetch_cond, &ino->lock);
	fresh = accept_stale || f->wgen == ino->wgen;
	if (!fresh)
		gw_fetch_unlist_locked(ino, f, &freeme);
	pthread_mutex_unlock(&ino->lock);
	gw_fetch_free_list(freeme);
	return fresh;
}

/* The fetch that holds byte pos (or knows the file ends before it), with a
 * reference; NULL if none. */
struct gw_fetch *gw_fetch_at_locked(struct gw_inode *ino, uint64_t pos)
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
 * for the caller, or NULL on allocation failure or an empty range: a
 * fetch without READs is never done, and gw_inode_drop_fetch (every
 * write, the last close) would wait for it for ever. */
struct gw_fetch *gw_fetch_gap(struct gw *gw, struct gw_inode *ino,
			      const struct nfsc_cred *cr, uint64_t pos,
			      uint64_t end, uint64_t bs)
{
	uint64_t start = pos & ~(bs - 1), stop = (end + bs - 1) & ~(bs - 1);
	uint32_t rs = nfsc_rsize(gw->nfs);
	uint64_t attr_gen = gw_inode_attr_gen(ino);
	struct gw_fetch *f = calloc(1, sizeof(*f)), *g;
	size_t len;
	unsigned i;

	if (end <= pos || !f) {
		free(f);
		return NULL;
	}
	f->buf = gw_buf_get(stop - start);
	f->chunks = calloc((stop - start + rs - 1) / rs, sizeof(*f->chunks));
	if (!f->chunks || !f->buf) {
		free(f->chunks);
		gw_buf_put(f->buf);
		free(f);
		return NULL;
	}
	pthread_mutex_lock(&ino->lock);
	g = gw_fetch_at_locked(ino, pos);
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
	len = stop - start;	/* > 0: start <= pos < stop */
	f->gw = gw;
	f->ino = ino;
	f->off = start;
	f->len = len;
	f->nchunks = (unsigned)((len + rs - 1) / rs);
	f->refs = 3;			/* list, caller, the READs */
	f->pending = f->nchunks;
	f->attr_gen = attr_gen;
	f->wgen = ino->wgen;
	f->sent_ns = gw_now_ns();
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
		gw_fetch_unref_locked(f, &freeme);
	}
	pthread_mutex_unlock(&ino->lock);
	gw_fetch_free_list(freeme);
}
