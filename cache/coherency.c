/* coherency.c - an object's data against the origin's identity: a reset to
 * a new incarnation (new salt, every block dropped), blocks dropped that
 * no longer hold what their bits say, an I/O error that drops the data, an
 * origin file grown too big to cache, and the public calls:
 * cache_obj_check, cache_obj_invalidate, cache_obj_set_coh (what a change
 * of size keeps). All under o->lock. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "lockcheck.h"

/* ---- reset, failure ----------------------------------------------------- */

/* Fills in flight for blocks from first on: their bytes are not stored. */
static void cancel_from_locked(struct cache_obj *o, uint64_t first)
{
	GW_ASSERT_HELD(&o->lock);
	for (struct cache_req *r = o->inflight; r; r = r->next)
		for (uint64_t b = r->first < first ? first : r->first;
		     b < r->first + r->nblk; b++)
			r->skip[b - r->first] = 1;
}

/* The file grew past CACHE_OBJ_SIZE_MAX: no block of it is served or
 * stored any more, and the object goes with its last reference (its files
 * too: a later open of the file, smaller again, makes a new one). */
static void obj_too_big_locked(struct cache_obj *o, uint64_t size)
{
	GW_ASSERT_HELD(&o->lock);
	if (o->broken)
		return;
	cache_log("object %s: size %llu is past the %llu-byte limit of a "
		  "cache object: not cached", o->name,
		  (unsigned long long)size,
		  (unsigned long long)CACHE_OBJ_SIZE_MAX);
	cancel_from_locked(o, 0);
	o->broken = true;
	o->gen++;
	o->unmark_seq++;
	cache_csc_drop_locked(o);
	memset(o->bitmap, 0, (o->nblocks / 64 + 1) * 8);
}

/* Drop every block and start a new incarnation (new salt) of the object
 * with the given identity (key NULL: keep the stored one). Order matters
 * for crashes: presence goes first, then data, then the new header. */
int cache_obj_reset_locked(struct cache_obj *o, const void *key,
			   size_t keylen, const void *coh, size_t cohlen,
			   uint64_t size)
{
	struct cache *c = o->c;
	struct meta_hdr h;
	int ret;

	GW_ASSERT_HELD(&o->lock);
	assert(o->opened);
	if (size > CACHE_OBJ_SIZE_MAX) {
		obj_too_big_locked(o, size);
		return 0;
	}
	if (!key) {
		key = o->hdr->key;
		keylen = o->hdr->keylen;
	}
	cache_meta_init(&h, c->block_size, key, keylen, coh, cohlen, size);
	h.last_use_ns = o->hdr->last_use_ns;
	o->gen++;
	o->unmark_seq++;
	cache_csc_drop_locked(o);	/* a new salt: none of them verifies */
	memset(o->bitmap, 0, (o->nblocks / 64 + 1) * 8);
	ret = cache_ftruncate(c, o->meta_fd, META_HDR_SIZE);
	if (!ret)
		ret = cache_ftruncate(c, o->data_fd, 0);
	if (!ret)
		ret = cache_meta_write_hdr(c, o->meta_fd, &h);
	if (!ret)
		ret = cache_obj_alloc_bitmap(o, size);
	if (!ret)
		*o->hdr = h;
	cache_obj_update_alloc(o);
	return ret;
}

/* An I/O error on this object: count it, drop the object's data, keep the
 * cache going. If even the drop fails the object is broken until its last
 * reference goes, when its files are removed. */
void cache_obj_fail_locked(struct cache_obj *o, int err, const char *what)
{
	GW_ASSERT_HELD(&o->lock);
	STAT_ADD(o->c, errors, 1);
	cache_log("I/O error (%s: %s) on object %s: dropped", what,
		  strerror(-err), o->name);
	if (err == -ENOSPC || err == -EDQUOT) {
		/* The filesystem is fuller than our thresholds knew: let the
		 * culler look now rather than at its next tick. */
		pthread_mutex_lock(&o->c->cull_lock);
		pthread_cond_signal(&o->c->cull_cond);
		pthread_mutex_unlock(&o->c->cull_lock);
	}
	if (o->broken || !o->opened)
		return;
	if (!cache_writable(o->c) ||
	    cache_obj_reset_locked(o, NULL, 0, o->hdr->coh, o->hdr->cohlen,
				   o->hdr->size)) {
		o->broken = true;
		o->gen++;
		o->unmark_seq++;
		memset(o->bitmap, 0, (o->nblocks / 64 + 1) * 8);
	}
}

/* Blocks [first, end) no longer hold what their bits say: cancel their
 * fills in flight, clear their presence bits; a failed metadata write
 * breaks the object. */
int cache_obj_drop_blocks_locked(struct cache_obj *o, uint64_t first,
				 uint64_t end)
{
	int ret = 0;

	GW_ASSERT_HELD(&o->lock);
	for (uint64_t b = first; b < end && b < o->nblocks; b++) {
		cache_obj_cancel_locked(o, b);
		if (!ret)
			ret = cache_obj_unmark_locked(o, b);
	}
	if (ret)
		cache_obj_fail_locked(o, ret, "metadata write");
	return ret;
}

/* ---- public: coherency -------------------------------------------------- */

int cache_obj_check(struct cache_obj *o, const void *coh, size_t cohlen,
		    uint64_t size)
{
	int ret = 0;

	if (cohlen > CACHE_COH_MAX)
		return -EINVAL;
	pthread_mutex_lock(&o->lock);
	if (o->broken) {
		ret = 1;
	} else if (o->hdr->cohlen != cohlen || memcmp(o->hdr->coh, coh, cohlen) ||
		   o->hdr->size != size) {
		if (cache_obj_reset_locked(o, NULL, 0, coh, cohlen, size))
			cache_obj_fail_locked(o, -EIO, "invalidate");
		ret = 1;
	}
	pthread_mutex_unlock(&o->lock);
	return ret;
}

void cache_obj_invalidate(struct cache_obj *o)
{
	pthread_mutex_lock(&o->lock);
	if (!o->broken &&
	    cache_obj_reset_locked(o, NULL, 0, o->hdr->coh, o->hdr->cohlen,
				   o->hdr->size))
		cache_obj_fail_locked(o, -EIO, "invalidate");
	pthread_mutex_unlock(&o->lock);
}

int cache_obj_set_coh(struct cache_obj *o, const void *coh, size_t cohlen,
		     uint64_t size)
{
	struct cache *c = o->c;
	uint32_t bs = c->block_size;
	uint64_t oldsize, keep, n;
	uint64_t *bm;
	int ret = 0;

	if (cohlen > CACHE_COH_MAX || (cohlen && !coh))
		return -EINVAL;
	pthread_mutex_lock(&o->lock);
	if (o->broken) {
		ret = -EIO;
		goto out;
	}
	if (size > CACHE_OBJ_SIZE_MAX) {
		obj_too_big_locked(o, size);
		goto out;
	}
	oldsize = o->hdr->size;
	/* 1. Blocks that stay valid: all whole blocks below both sizes. A
	 *    partial last block changes length (its checksum with it). Only
	 *    present blocks are dropped, a presence word at a time: the time
	 *    goes by what is cached, not by the file's size. */
	keep = (oldsize < size ? oldsize : size) / bs;
	if (size != oldsize) {
		cache_csc_drop_locked(o);
		cancel_from_locked(o, keep);
		for (uint64_t w = keep / 64; w <= o->nblocks / 64 && !ret; w++) {
			uint64_t bits = o->bitmap[w];

			while (bits && !ret) {
				uint64_t b = w * 64 + (uint64_t)__builtin_ctzll(bits);

				bits &= bits - 1;
				if (b >= keep && b < o->nblocks)
					ret = cache_obj_unmark_locked(o, b);
			}
		}
	}
	/* 2. The new identity, same salt: kept blocks stay verifiable. */
	o->hdr->cohlen = cohlen;
	memset(o->hdr->coh, 0, sizeof(o->hdr->coh));
	if (cohlen)
		memcpy(o->hdr->coh, coh, cohlen);
	o->hdr->size = size;
	if (!ret)
		ret = cache_meta_write_hdr(c, o->meta_fd, o->hdr);
	/* 3. Resize presence; give back the space of a shrunk file. */
	n = cache_meta_nblocks(size, bs);
	bm = calloc(n / 64 + 1, 8);
	if (!bm) {
		ret = ret ? ret : -ENOMEM;
	} else {
		memcpy(bm, o->bitmap, ((n < o->nblocks ? n : o->nblocks) / 64 + 1) * 8);
		if (n % 64)
			bm[n / 64] &= (1ull << (n % 64)) - 1;
		else
			bm[n / 64] = 0;
		free(o->bitmap);
		o->bitmap = bm;
		o->nblocks = n;
	}
	if (!ret && size < oldsize)
		ret = cache_ftruncate(c, o->data_fd, (off_t)keep * bs);
	if (ret)
		cache_obj_fail_locked(o, ret, "update");
	cache_obj_update_alloc(o);
out:
	pthread_mutex_unlock(&o->lock);
	return ret;
}
