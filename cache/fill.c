/* fill.c - fills (cache_fill and its kin; the caller's own writes go
 * through here from ownwrite.c) and what happens when a fill's data write
 * completes. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "lockcheck.h"

/* ---- fills ------------------------------------------------------------------ */

static void fill_done(struct cache *c, struct cache_req *r, int res);

static void fillbuf_put(struct cache_fillbuf *fb)
{
	if (!fb || __atomic_sub_fetch(&fb->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (fb->release)
		fb->release(fb->release_arg);
	else
		free(fb->buf);
	free(fb);
}

static void req_free(struct cache_req *r)
{
	fillbuf_put(r->fb);
	free(r->zbuf);
	free(r->csums);
	free(r->skip);
	free(r);
}

/* Are the len bytes at p all zero? Data blocks almost always differ from
 * zero in their first bytes, so for them this costs one load; a zero block
 * is read once more at memcmp speed (the checksum reads it anyway). The
 * memcmp of the block against itself 16 bytes on is zero only if every
 * byte equals the one 16 before it, all the way back to the zero head. */
static bool block_is_zero(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t head[2];

	if (len < sizeof(head)) {
		for (size_t i = 0; i < len; i++)
			if (b[i])
				return false;
		return true;
	}
	memcpy(head, b, sizeof(head));
	if (head[0] | head[1])
		return false;
	return !memcmp(b, b + sizeof(head), len - sizeof(head));
}

/* Decide, per block, whether this fill will mark it (o->lock held):
 * - present with the same checksum: the same bytes are there; no mark.
 * - present with another checksum: unmark first, so no reader trusts the
 *   block while it is rewritten.
 * - another fill in flight with the same bytes: let it mark; with other
 *   bytes: the final content is unknown, so neither marks. */
static int plan_marks_locked(struct cache_obj *o, struct cache_req *r)
{
	uint32_t spb = cache_spb(o->c->block_size);
	size_t clen = (size_t)spb * 8;
	uint64_t stored[64], *st = spb <= 64 ? stored : malloc(clen);
	int ret = 0;

	GW_ASSERT_HELD(&o->lock);
	if (!st)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->nblk && !ret; i++) {
		uint64_t b = r->first + i;
		const uint64_t *mine = r->csums + (size_t)i * spb;

		if (cache_bit(o->bitmap, b)) {
			ret = cache_load_block_csums(o->c, o->meta_fd, b, 1, st);
			if (ret)
				break;
			if (!memcmp(st, mine, clen)) {
				r->skip[i] = 1;
				continue;
			}
			cache_obj_cancel_locked(o, b);
			ret = cache_obj_unmark_locked(o, b);
			continue;
		}
		for (struct cache_req *q = o->inflight; q; q = q->next) {
			if (b < q->first || b >= q->first + q->nblk)
				continue;
			if (memcmp(q->csums + (size_t)(b - q->first) * spb, mine,
				   clen))
				q->skip[b - q->first] = 1;
			r->skip[i] = 1;
		}
	}
	if (st != stored)
		free(st);
	return ret;
}

/* One request for blocks [first, first + nblk) of a fill that starts at
 * block first0 and is len bytes long; zero: they are all zeros. */
static struct cache_req *req_new(struct cache_obj *o, struct cache_fillbuf *fb,
				 const char *src, uint64_t first0, size_t len,
				 uint64_t first, uint32_t nblk, bool zero,
				 bool direct, uint64_t salt, uint64_t gen)
{
	uint32_t bs = o->c->block_size, spb = cache_spb(bs);
	size_t rel = (size_t)(first - first0) * bs;
	struct cache_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->o = o;
	r->done = fill_done;
	r->gen = gen;
	r->first = first;
	r->nblk = nblk;
	r->off = first * bs;
	r->len = len - rel < (size_t)nblk * bs ? len - rel : (size_t)nblk * bs;
	r->wlen = direct ? ALIGN_UP(r->len, CACHE_DIO_ALIGN) : r->len;
	r->zero = zero;
	if (!zero)
		r->reserved = ALIGN_UP(r->len, CACHE_DIO_ALIGN);
	r->csums = calloc((size_t)nblk * spb, 8);
	r->skip = calloc(nblk, 1);
	if (!r->csums || !r->skip) {
		free(r->csums);
		free(r->skip);
		free(r);
		return NULL;
	}
	if (!zero) {
		r->buf = (char *)fb->buf + rel;
		__atomic_add_fetch(&fb->refs, 1, __ATOMIC_RELAXED);
		r->fb = fb;
	}
	for (uint32_t i = 0; i < nblk; i++) {
		size_t boff = rel + (size_t)i * bs;
		size_t blen = len - boff < bs ? len - boff : bs;

		cache_block_csums(salt, bs, first + i, src + boff, blen,
				  r->csums + (size_t)i * spb);
	}
	return r;
}

/* cache_fill and cache_fill_ref: with release set, buf is the caller's and
 * is written in place (and released in every case).
 *
 * Runs of zero blocks are not written: a block that arrives as zeros is
 * marked present over a hole (punched, in case the block held other data
 * before), so a sparse origin file takes about what it holds at the
 * origin. Its checksum is that of the zero bytes, and a read of the hole
 * returns zeros that pass it. The fill is cut into one request per run. */
/* How a fill meets a disk that is behind: it waits for room (what was
 * read is worth the wait), an own write is dropped at a quarter of the
 * budget (its bytes are at the origin), a fill with skip_behind at the
 * whole budget (the reader is not held to the disk's pace). */
enum fill_how { FILL_WAIT, FILL_OWN_WRITE, FILL_SKIP_BEHIND };

static int fill(struct cache_obj *o, const void *buf, size_t len, uint64_t off,
		void (*release)(void *), void *arg, enum fill_how how)
{
	struct cache *c = o->c;
	uint32_t bs = c->block_size;
	struct cache_fillbuf *fb = NULL;
	struct cache_req **v = NULL, *r;	/* the requests */
	size_t n = 0, nq = 0;		/* built, queued */
	uint64_t size, salt, gen, first0, data_bytes = 0, reserved = 0;
	bool direct, punch;
	uint8_t *zero = NULL;
	size_t given;			/* len as the caller gave it */
	uint32_t nblk;
	unsigned pct;
	int ret;

	if (!cache_writable(c)) {
		ret = -EROFS;
		goto out_release;
	}
	/* 1. Validate against the object as it is now. */
	pthread_mutex_lock(&o->lock);
	if (!o->opened || o->broken) {
		pthread_mutex_unlock(&o->lock);
		ret = -EIO;
		goto out_release;
	}
	size = o->hdr->size;
	salt = o->hdr->salt;
	gen = o->gen;
	direct = o->direct;
	pthread_mutex_unlock(&o->lock);
	given = len;
	ret = 0;
	if (off % bs || (release && (uintptr_t)buf % CACHE_BUF_ALIGN))
		ret = -EINVAL;
	else if (off >= size || !len)
		goto out_release;
	else if (len > size - off)
		len = size - off;
	else if (len % bs && off + len != size)
		ret = -EINVAL;
	if (ret)
		goto out_release;
	first0 = off / bs;
	nblk = (len + bs - 1) / bs;

	/* 2. Which blocks are zeros; the rest is what takes room. */
	ret = -ENOMEM;
	zero = calloc(nblk, 1);
	v = calloc(nblk, sizeof(*v));
	if (!zero || !v)
		goto out_release;
	punch = !__atomic_load_n(&c->no_punch, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < nblk; i++) {
		size_t blen = len - (size_t)i * bs < bs ? len - (size_t)i * bs : bs;

		zero[i] = punch && block_is_zero((const char *)buf + (size_t)i * bs,
						 blen);
		if (!zero[i])
			data_bytes += ALIGN_UP(blen, CACHE_DIO_ALIGN);
	}

	/* 3. An own write (nowait) is not worth waiting for the disk: its
	 *    bytes are at the origin already. */
	if (how == FILL_OWN_WRITE && data_bytes &&
	    cache_io_behind(c, data_bytes, CACHE_OWN_WRITE_BYTES_MAX)) {
		STAT_ADD(c, writes_skipped, 1);
		STAT_ADD(c, writes_skipped_bytes, len);
		ret = -EAGAIN;
		goto out_release;
	}
	/*    A fill that may be skipped: when the disk has the whole budget
	 *    in flight. */
	if (how == FILL_SKIP_BEHIND && data_bytes &&
	    cache_io_behind(c, data_bytes, CACHE_INFLIGHT_BYTES_MAX)) {
		STAT_ADD(c, fills_behind, 1);
		STAT_ADD(c, fills_behind_bytes, len);
		ret = -EAGAIN;
		goto out_release;
	}
	/*    Room: free space (bstop) and cache_size. Free space counts this
	 *    fill too: one fill can be a whole readahead window (8 MiB), more
	 *    than bstop leaves on a small filesystem. Under bcull the culler
	 *    is woken now, not at its next tick: fills come in bursts. */
	pct = cache_free_pct_after(c, data_bytes + 4096);
	if (pct < c->bcull) {
		pthread_mutex_lock(&c->cull_lock);
		pthread_cond_signal(&c->cull_cond);
		pthread_mutex_unlock(&c->cull_lock);
	}
	if (pct < c->bstop) {
		STAT_ADD(c, fills_skipped, 1);
		ret = -ENOSPC;
		goto out_release;
	}
	ret = cache_reserve(c, o, data_bytes + 4096);	/* + meta */
	if (ret) {
		STAT_ADD(c, fills_skipped, 1);
		goto out_release;
	}
	reserved = data_bytes + 4096;

	/* 4. The buffer: the caller's, or a copy (made outside any lock: a
	 *    copied buffer is the caller's again when we return). No copy
	 *    when there is nothing to write. */
	ret = -ENOMEM;
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		goto out_unreserve;
	fb->refs = 1;			/* ours, until the requests exist */
	if (release) {
		fb->buf = (void *)buf;
		fb->release = release;
		fb->release_arg = arg;
		release = NULL;		/* fb calls it now */
	} else if (data_bytes) {
		size_t wlen = direct ? ALIGN_UP(len, CACHE_DIO_ALIGN) : len;

		fb->buf = cache_alloc_aligned(wlen);
		if (!fb->buf)
			goto out_unreserve;
		memcpy(fb->buf, buf, len);
		memset((char *)fb->buf + len, 0, wlen - len);
	}
	/* The bytes past the end up to the write unit: not stale memory. In
	 * a given buffer only past the caller's own bytes: when the object
	 * is shorter than the fill (the file grew at the origin), the bytes
	 * past its end are still the caller's data, read by others. */
	if (fb->release) {
		size_t zend = ALIGN_UP(len, CACHE_BUF_ALIGN);

		if (given < zend)
			memset((char *)fb->buf + given, 0, zend - given);
	}

	/* 5. One request per run of zero or data blocks, checksummed outside
	 *    any lock; the first carries the metadata reservation. */
	for (uint32_t i = 0, j; i < nblk; i = j) {
		for (j = i + 1; j < nblk && zero[j] == zero[i]; j++)
			;
		r = req_new(o, fb, buf, first0, len, first0 + i, j - i,
			    zero[i], direct, salt, gen);
		if (!r)
			goto out_free;
		if (!n)
			r->reserved += 4096;
		v[n++] = r;
	}

	/* 6. Plan the marks and join the object's fills in flight. */
	pthread_mutex_lock(&o->lock);
	if (o->gen != gen || o->broken) {
		/* Invalidated meanwhile: these bytes belong to the past. */
		pthread_mutex_unlock(&o->lock);
		ret = 0;
		goto out_free;
	}
	/* The size changed meanwhile (cache_obj_set_coh: concurrent
	 * write-back WRITEs each bring their own post-op size, in any order).
	 * The blocks are still right if they are all whole and below the new
	 * end; else they may lie past it (no presence bit for them) or be a
	 * last block of another length. Then mark none, and unmark what of
	 * the range is present: it held the bytes this fill replaces. */
	if (o->hdr->size != size &&
	    ((off + len) % bs || o->hdr->size < off + len)) {
		ret = cache_obj_drop_blocks_locked(o, first0, first0 + nblk);
		pthread_mutex_unlock(&o->lock);
		STAT_ADD(c, fills_skipped, 1);
		goto out_free;
	}
	for (size_t k = 0; k < n; k++) {
		ret = plan_marks_locked(o, v[k]);
		if (ret) {
			cache_obj_fail_locked(o, ret, "metadata write");
			pthread_mutex_unlock(&o->lock);
			goto out_free;
		}
	}
	for (size_t k = 0; k < n; k++) {
		bool any = false;

		r = v[k];
		for (uint32_t i = 0; i < r->nblk; i++)
			any |= !r->skip[i];
		if (!any) {
			/* Nothing to mark: the same bytes are there. */
			reserved -= r->reserved;
			cache_unreserve(c, r->reserved);
			req_free(r);
			continue;
		}
		r->fd = o->data_fd;
		if (!r->zero && c->write_mode == CACHE_WRITE_DONTCACHE &&
		    !__atomic_load_n(&c->no_dontcache, __ATOMIC_RELAXED))
			r->rw_flags = RWF_DONTCACHE;
		r->next = o->inflight;
		o->inflight = r;
		v[nq++] = r;
	}
	pthread_mutex_lock(&c->lock);
	if (nq)		/* dropped by fill_done() */
		cache_obj_ref_locked(c, o, CACHE_REF_FILL, (int)nq);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&o->lock);
	fillbuf_put(fb);	/* the requests hold it now */
	free(zero);

	/* 7. Queue. */
	if (nq)
		STAT_ADD(c, fills, 1);
	for (size_t k = 0; k < nq; k++)
		cache_io_submit(c, v[k]);
	free(v);
	return 0;

out_free:
	for (size_t k = 0; k < n; k++) {
		reserved -= v[k]->reserved;
		cache_unreserve(c, v[k]->reserved);
		req_free(v[k]);
	}
out_unreserve:
	cache_unreserve(c, reserved);
	fillbuf_put(fb);
out_release:
	free(zero);
	free(v);
	if (release)
		release(arg);
	return ret;
}

int cache_fill(struct cache_obj *o, const void *buf, size_t len, uint64_t off)
{
	return fill(o, buf, len, off, NULL, NULL, FILL_WAIT);
}

int cache_fill_ref(struct cache_obj *o, void *buf, size_t len, uint64_t off,
		   void (*release)(void *), void *arg)
{
	return fill(o, buf, len, off, release, arg, FILL_WAIT);
}

int cache_fill_ref_nowait(struct cache_obj *o, void *buf, size_t len,
			  uint64_t off, void (*release)(void *), void *arg)
{
	return fill(o, buf, len, off, release, arg, FILL_SKIP_BEHIND);
}

int cache_fill_own(struct cache_obj *o, void *buf, size_t len, uint64_t off,
		   void (*release)(void *), void *arg)
{
	return fill(o, buf, len, off, release, arg, FILL_OWN_WRITE);
}

/* Completion of a fill (completion thread, or a submitter whose submit
 * failed). Marks the blocks present only now that the data is written. */
static void fill_done(struct cache *c, struct cache_req *r, int res)
{
	struct cache_obj *o = r->o;
	struct cache_req **pp;
	uint64_t io_bytes;

	if (r->zero && (res == -EOPNOTSUPP || res == -ENOSYS || res == -EINVAL)) {
		/* No hole punching here: write the zeros after all (wlen
		 * is already the length such a write would take). An
		 * injected write fault stands in for the fallocate here, so
		 * tests reach this path; the write itself is not faulted. */
		r->inject_err = 0;
		if (!__atomic_exchange_n(&c->no_punch, 1, __ATOMIC_RELAXED))
			cache_log("FALLOC_FL_PUNCH_HOLE refused on %s (%s); zero blocks are written as data",
				  c->dir, strerror(-res));
		r->zbuf = cache_alloc_aligned(r->wlen);
		if (r->zbuf) {
			memset(r->zbuf, 0, ALIGN_UP(r->wlen, CACHE_DIO_ALIGN));
			r->buf = r->zbuf;
			r->zero = false;
			cache_io_requeue(c, r);
			return;
		}
		res = -ENOMEM;
	}
	if ((res == -EOPNOTSUPP || res == -EINVAL) && r->rw_flags) {
		if (!__atomic_exchange_n(&c->no_dontcache, 1, __ATOMIC_RELAXED))
			cache_log("RWF_DONTCACHE refused by the kernel (%s); using buffered writes",
				  strerror(-res));
		r->rw_flags = 0;
		cache_io_requeue(c, r);
		return;
	}
	if (res >= 0 && !r->zero && (size_t)res < r->wlen)
		res = -EIO;	/* short write: the filesystem is full */
	if (res >= 0 && !r->zero && c->write_mode == CACHE_WRITE_FADVISE) {
		/* DONTNEED skips dirty pages: write them back first, or most
		 * of the fill stays in the page cache (measured: 410 of 512
		 * MiB). */
		sync_file_range(r->fd, (off64_t)r->off, (off64_t)r->wlen,
				SYNC_FILE_RANGE_WAIT_BEFORE |
				SYNC_FILE_RANGE_WRITE |
				SYNC_FILE_RANGE_WAIT_AFTER);
		posix_fadvise(r->fd, r->off, r->wlen, POSIX_FADV_DONTNEED);
	}

	pthread_mutex_lock(&o->lock);
	for (pp = &o->inflight; *pp != r; pp = &(*pp)->next)
		assert(*pp);
	*pp = r->next;
	if (o->gen != r->gen || !o->opened || o->broken) {
		if (res < 0)
			STAT_ADD(c, errors, 1);
	} else if (res < 0) {
		cache_obj_fail_locked(o, res, "fill write");
	} else {
		uint32_t spb = cache_spb(c->block_size);
		int ret = 0;

		/* Runs of blocks to mark, cut at presence-word edges: one
		 * checksum write and one presence write each. */
		for (uint32_t i = 0, j; i < r->nblk && !ret; i = j) {
			uint64_t b = r->first + i;

			j = i + 1;
			if (r->skip[i] || b >= o->nblocks)
				continue;
			while (j < r->nblk && !r->skip[j] &&
			       r->first + j < o->nblocks &&
			       (r->first + j) % 64 != 0)
				j++;
			ret = cache_obj_mark_run_locked(o, b, j - i,
							r->csums + (size_t)i * spb);
		}
		if (ret)
			cache_obj_fail_locked(o, ret, "metadata write");
		else
			STAT_ADD(c, fill_bytes, r->len);
	}
	cache_obj_update_alloc(o);
	pthread_mutex_unlock(&o->lock);

	cache_unreserve(c, r->reserved);
	cache_obj_put(o);
	io_bytes = r->io_bytes;
	req_free(r);
	cache_io_release(c, io_bytes);
}
