/* obj.c - objects: the registry, get/put, coherency, reset; their files are
 * objfile.c's, their presence presence.c's. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"
#include "lockcheck.h"

/* ---- registry (c->lock) ---------------------------------------------------- */

struct cache_obj *cache_obj_lookup_locked(struct cache *c, uint64_t hash)
{
	struct cache_obj *o;

	GW_ASSERT_HELD(&c->lock);
	if (!c->hsize)
		return NULL;
	for (o = c->htab[hash & (c->hsize - 1)]; o; o = o->hnext)
		if (o->hash == hash)
			return o;
	return NULL;
}

static int htab_grow_locked(struct cache *c)
{
	size_t nsize = c->hsize ? c->hsize * 2 : 1024;
	struct cache_obj **nt;

	GW_ASSERT_HELD(&c->lock);
	nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < c->hsize; i++) {
		struct cache_obj *o = c->htab[i], *next;

		for (; o; o = next) {
			next = o->hnext;
			o->hnext = nt[o->hash & (nsize - 1)];
			nt[o->hash & (nsize - 1)] = o;
		}
	}
	free(c->htab);
	c->htab = nt;
	c->hsize = nsize;
	return 0;
}

/* A new, unopened object at the most-recent end of the LRU. */
struct cache_obj *cache_obj_new_locked(struct cache *c, uint64_t hash)
{
	struct cache_obj *o;
	size_t b;

	GW_ASSERT_HELD(&c->lock);
	if (c->nobj >= c->hsize && htab_grow_locked(c))
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->c = c;
	o->hash = hash;
	snprintf(o->name, sizeof(o->name), "%016" PRIx64, hash);
	o->data_fd = o->meta_fd = -1;
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_init(&o->write_lock, NULL);
	b = hash & (c->hsize - 1);
	o->hnext = c->htab[b];
	c->htab[b] = o;
	c->nobj++;
	__atomic_store_n(&c->stats.objects, c->nobj, __ATOMIC_RELAXED);
	cache_lru_append_locked(c, o);
	return o;
}

/* Unlink the object's files and take it out of the registry. refs == 0.
 * The caller frees it after taking and dropping o->lock, which waits out a
 * cache_obj_put() still closing its files. */
void cache_obj_forget_locked(struct cache *c, struct cache_obj *o)
{
	struct cache_obj **pp = &c->htab[o->hash & (c->hsize - 1)];
	char path[64];

	GW_ASSERT_HELD(&c->lock);
	assert(o->refs == 0 && !o->removed);
	if (!cache_obj_path(c, o->name, false, path, sizeof(path)))
		unlinkat(c->dirfd, path, 0);
	if (!cache_obj_path(c, o->name, true, path, sizeof(path)))
		unlinkat(c->dirfd, path, 0);
	while (*pp != o)
		pp = &(*pp)->hnext;
	*pp = o->hnext;
	c->nobj--;
	__atomic_store_n(&c->stats.objects, c->nobj, __ATOMIC_RELAXED);
	cache_lru_unlink_locked(c, o);
	cache_account_locked(c, o, 0);
	o->removed = true;
}

void cache_obj_free(struct cache_obj *o)
{
	pthread_mutex_lock(&o->lock);
	cache_obj_close_locked(o);
	pthread_mutex_unlock(&o->lock);
	pthread_mutex_destroy(&o->lock);
	pthread_mutex_destroy(&o->write_lock);
	free(o);
}

void cache_close_objects(struct cache *c)
{
	for (size_t i = 0; i < c->hsize; i++) {
		struct cache_obj *o = c->htab[i], *next;

		for (; o; o = next) {
			next = o->hnext;
			if (o->refs)
				cache_log("object %s still referenced at close",
					  o->name);
			cache_obj_free(o);
		}
	}
	free(c->htab);
	c->htab = NULL;
	c->hsize = c->nobj = 0;
}

/* ---- allocation accounting ----------------------------------------------- */

void cache_obj_update_alloc(struct cache_obj *o)
{
	struct cache *c = o->c;
	struct stat st;
	uint64_t alloc = 0;

	if (o->data_fd >= 0 && !fstat(o->data_fd, &st))
		alloc += (uint64_t)st.st_blocks * 512;
	if (o->meta_fd >= 0 && !fstat(o->meta_fd, &st))
		alloc += (uint64_t)st.st_blocks * 512;
	pthread_mutex_lock(&c->lock);
	if (!o->removed)
		cache_account_locked(c, o, alloc);
	pthread_mutex_unlock(&c->lock);
}

/* ---- open, reset, failure (o->lock) ---------------------------------------- */

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

/* ---- public: get/put ------------------------------------------------------- */

static void persist_last_use(struct cache_obj *o)
{
	uint64_t now = cache_now_ns();

	if (!o->opened || o->broken || !cache_writable(o->c))
		return;
	o->hdr->last_use_ns = now;
	/* Advisory (outside the header checksum): errors only cost LRU order. */
	(void)cache_pwrite(o->c, o->meta_fd, &now, 8, META_LAST_USE_OFF);
}

int cache_obj_get(struct cache *c, const void *key, size_t keylen,
		  const void *coh, size_t cohlen, uint64_t size,
		  struct cache_obj **out)
{
	struct cache_obj *o;
	uint64_t hash, reserved = 0;
	char name[CACHE_NAME_LEN + 1];
	int ret;

	if (cohlen > CACHE_COH_MAX || (cohlen && !coh))
		return -EINVAL;
	if (size > CACHE_OBJ_SIZE_MAX)
		return -EFBIG;	/* not cached (cache.h) */
	ret = cache_obj_hash_name(key, keylen, &hash, name);
	if (ret)
		return ret;
	if (!cache_writable(c))
		return -EROFS;	/* inspection goes by name */

	/* 1. Find or create the registry entry and take a reference. A new
	 *    object's files take room: make it first (cache_size is a cap). */
	pthread_mutex_lock(&c->lock);
	o = cache_obj_lookup_locked(c, hash);
	if (!o && c->max_bytes) {
		pthread_mutex_unlock(&c->lock);
		reserved = 2 * 4096;
		ret = cache_reserve(c, NULL, reserved);
		if (ret)
			return ret;
		pthread_mutex_lock(&c->lock);
		o = cache_obj_lookup_locked(c, hash);
	}
	if (!o)
		o = cache_obj_new_locked(c, hash);
	if (!o) {
		pthread_mutex_unlock(&c->lock);
		cache_unreserve(c, reserved);
		return -ENOMEM;
	}
	cache_obj_ref_locked(c, o, CACHE_REF_GET, 1);
	cache_lru_touch_locked(c, o);
	pthread_mutex_unlock(&c->lock);

	/* 2. Open, or re-check what is open, against the caller's view. */
	pthread_mutex_lock(&o->lock);
	if (!o->opened) {
		ret = cache_obj_open_locked(o, key, keylen, coh, cohlen, size,
					    true);
	} else {
		ret = cache_obj_revalidate_locked(o, coh, cohlen, size);
		if (!ret && !o->broken &&
		    (o->hdr->keylen != keylen || memcmp(o->hdr->key, key, keylen)))
			ret = cache_obj_reset_locked(o, key, keylen, coh, cohlen,
						     size);
		if (!ret && !o->broken &&
		    (o->hdr->cohlen != cohlen || memcmp(o->hdr->coh, coh, cohlen) ||
		     o->hdr->size != size))
			ret = cache_obj_reset_locked(o, NULL, 0, coh, cohlen, size);
	}
	if (!ret)
		persist_last_use(o);
	pthread_mutex_unlock(&o->lock);
	cache_unreserve(c, reserved);
	if (ret) {
		cache_obj_put(o);
		return ret;
	}
	*out = o;
	return 0;
}

void cache_obj_ref_locked(struct cache *c, struct cache_obj *o,
			  enum cache_ref_why why, int n)
{
	GW_ASSERT_HELD(&c->lock);
	assert(o->refs >= 0 && n > 0 && why < CACHE_REF_NWHY);
	o->refs += n;
#ifdef CACHEGW_LOCK_CHECKS
	c->refs_taken[why] += (uint64_t)n;
#endif
}

void cache_obj_forget_free(struct cache *c, struct cache_obj *o)
{
	GW_ASSERT_HELD(&c->lock);
	assert(!o->refs);
	cache_obj_forget_locked(c, o);
	pthread_mutex_unlock(&c->lock);
	/* Wait out a cache_obj_put() still closing its files. */
	pthread_mutex_lock(&o->lock);
	pthread_mutex_unlock(&o->lock);
	cache_obj_free(o);
}

void cache_obj_drop_data(struct cache *c, struct cache_obj *o,
			 const char *what)
{
	GW_ASSERT_HELD(&c->lock);
	cache_obj_ref_locked(c, o, CACHE_REF_DROP_DATA, 1);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&o->lock);
	if (o->opened && !o->broken &&
	    cache_obj_reset_locked(o, NULL, 0, o->hdr->coh, o->hdr->cohlen,
				   o->hdr->size))
		cache_obj_fail_locked(o, -EIO, what);
	pthread_mutex_unlock(&o->lock);
	cache_obj_put(o);
}

void cache_obj_put(struct cache_obj *o)
{
	struct cache *c;
	bool last, removed = false;

	if (!o)
		return;
	c = o->c;
	pthread_mutex_lock(&o->lock);
	pthread_mutex_lock(&c->lock);
	assert(o->refs > 0);
	last = --o->refs == 0;
	if (last && o->broken && !o->removed) {
		cache_obj_forget_locked(c, o);
		removed = true;
	} else if (!o->removed) {
		cache_lru_touch_locked(c, o);
	}
	pthread_mutex_unlock(&c->lock);
	if (last)
		cache_obj_close_locked(o);
	pthread_mutex_unlock(&o->lock);
	if (removed) {
		pthread_mutex_destroy(&o->lock);
		pthread_mutex_destroy(&o->write_lock);
		free(o);
	}
}

/* Another reference for a holder of one, as cachefiles_grab_object: the
 * caller must already hold a reference to o (or hold the lock under which a
 * pointer to o carries one), because an object without references may be
 * closed or culled (freed) at any moment. Never blocks on o->lock. */
struct cache_obj *cache_obj_grab(struct cache_obj *o)
{
	if (!o)
		return NULL;
	pthread_mutex_lock(&o->c->lock);
	assert(o->refs > 0);
	cache_obj_ref_locked(o->c, o, CACHE_REF_GRAB, 1);
	pthread_mutex_unlock(&o->c->lock);
	return o;
}

/* A reference to the object named name, opened without checking identity
 * (inspection, verify, evict). -ENOENT if there is none; -EBADMSG if its
 * metadata is damaged (the reference is still returned in *out then). */
int cache_obj_ref_by_name(struct cache *c, const char *name,
			  struct cache_obj **out)
{
	struct cache_obj *o;
	char path[64], *end;
	uint64_t hash;
	int ret;

	if (strlen(name) != CACHE_NAME_LEN)
		return -ENOENT;
	hash = strtoull(name, &end, 16);
	if (*end)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	o = cache_obj_lookup_locked(c, hash);
	if (!o) {
		/* INSPECT of a live cache: the gateway may have created it
		 * since our scan. */
		cache_obj_path(c, name, true, path, sizeof(path));
		if (faccessat(c->dirfd, path, F_OK, 0) == 0)
			o = cache_obj_new_locked(c, hash);
	}
	if (!o) {
		pthread_mutex_unlock(&c->lock);
		return -ENOENT;
	}
	cache_obj_ref_locked(c, o, CACHE_REF_BY_NAME, 1);
	pthread_mutex_unlock(&c->lock);

	pthread_mutex_lock(&o->lock);
	ret = 0;
	if (!o->opened)
		ret = cache_obj_open_locked(o, NULL, 0, NULL, 0, 0, false);
	pthread_mutex_unlock(&o->lock);
	*out = o;
	return ret;
}

/* ---- public: coherency ---------------------------------------------------- */

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
