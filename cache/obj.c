/* obj.c - objects: the registry, get/put and references (by key, by name,
 * a holder's extra); what they hold is presence.c's and coherency.c's,
 * their files objfile.c's. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
