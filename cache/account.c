/* account.c - what the cache holds and may still take: the LRU list, the
 * bytes objects use (an object's own from fstat of its files), the bytes
 * reserved for fills in flight, and the cache filesystem's free space in
 * percent. cull.c decides from these what goes. */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cache_i.h"
#include "lockcheck.h"

/* ---- LRU (c->lock) ------------------------------------------------------ */

void cache_lru_unlink_locked(struct cache *c, struct cache_obj *o)
{
	GW_ASSERT_HELD(&c->lock);
	if (o->lprev)
		o->lprev->lnext = o->lnext;
	else if (c->lru_head == o)
		c->lru_head = o->lnext;
	if (o->lnext)
		o->lnext->lprev = o->lprev;
	else if (c->lru_tail == o)
		c->lru_tail = o->lprev;
	o->lprev = o->lnext = NULL;
}

void cache_lru_append_locked(struct cache *c, struct cache_obj *o)
{
	GW_ASSERT_HELD(&c->lock);
	o->lprev = c->lru_tail;
	o->lnext = NULL;
	if (c->lru_tail)
		c->lru_tail->lnext = o;
	else
		c->lru_head = o;
	c->lru_tail = o;
}

void cache_lru_touch_locked(struct cache *c, struct cache_obj *o)
{
	GW_ASSERT_HELD(&c->lock);
	o->last_use_ns = cache_now_ns();
	cache_lru_unlink_locked(c, o);
	cache_lru_append_locked(c, o);
}

static void publish_used_locked(struct cache *c)
{
	GW_ASSERT_HELD(&c->lock);
	__atomic_store_n(&c->stats.used_bytes, c->used + c->overhead,
			 __ATOMIC_RELAXED);
}

void cache_account_locked(struct cache *c, struct cache_obj *o,
			  uint64_t alloc)
{
	GW_ASSERT_HELD(&c->lock);
	c->used = c->used - o->alloc_bytes + alloc;
	o->alloc_bytes = alloc;
	publish_used_locked(c);
}

/* ---- allocation accounting ---------------------------------------------- */

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
/* ---- free space and reservations ---------------------------------------- */

unsigned cache_free_pct(struct cache *c)
{
	return cache_free_pct_after(c, 0);
}

/* Percent of the cache filesystem free once the fills in flight and extra
 * more bytes are written. */
unsigned cache_free_pct_after(struct cache *c, uint64_t extra)
{
	struct statvfs sv;
	uint64_t avail, pending;
	int fake = __atomic_load_n(&c->fake_free_pct, __ATOMIC_RELAXED);

	if (fake >= 0)
		return fake;
	if (fstatvfs(c->dirfd, &sv) < 0 || !sv.f_blocks)
		return 100;
	/* Fills queued but not yet written (c->reserved) will take space
	 * that statvfs does not show as used yet: count them, or a burst of
	 * fills queued while above bstop lands far below it. */
	pthread_mutex_lock(&c->lock);
	pending = c->reserved;
	pthread_mutex_unlock(&c->lock);
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	pending += extra;
	avail = avail > pending ? avail - pending : 0;
	return (unsigned)(avail * 100 / ((uint64_t)sv.f_blocks * sv.f_frsize));
}

void cache_unreserve(struct cache *c, uint64_t bytes)
{
	if (!bytes)
		return;
	pthread_mutex_lock(&c->lock);
	c->reserved -= bytes;
	pthread_mutex_unlock(&c->lock);
}
