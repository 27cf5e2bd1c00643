/* cull.c - culling: making room under cache_size in the caller's thread
 * (cache_reserve), and the culler thread for the free-space thresholds
 * brun/bcull/bstop (cachefilesd's names and meaning). Least recently used
 * objects go first, objects in use last (their data only). */
#include <errno.h>
#include <sys/statvfs.h>
#include <time.h>

#include "cache_i.h"
#include "worker.h"
#include "lockcheck.h"

/* Cull one object, least recently used first, referenced objects last
 * (their data is dropped, their identity kept). self, whose fill is asking
 * for room, is never the victim. Entered and left with c->lock held; drops
 * it while freeing. 0 if something was culled, -ENOSPC if nothing could. */
static int cull_one_locked(struct cache *c, struct cache_obj *self)
{
	struct cache_obj *o;

	GW_ASSERT_HELD(&c->lock);
	for (o = c->lru_head; o; o = o->lnext)
		if (!o->refs && o != self)
			break;
	if (o) {
		STAT_ADD(c, culled_objects, 1);
		cache_obj_forget_free(c, o);
		pthread_mutex_lock(&c->lock);
		return 0;
	}
	/* An object with only its header left has nothing more to give. */
	for (o = c->lru_head; o; o = o->lnext)
		if (o != self && o->alloc_bytes > 4096)
			break;
	if (!o)
		return -ENOSPC;
	STAT_ADD(c, culled_objects, 1);
	cache_obj_drop_data(c, o, "cull");
	pthread_mutex_lock(&c->lock);
	return 0;
}

/* Account bytes about to be written. With cache_size set, cull until they
 * fit; -ENOSPC if they cannot. Runs in the caller's thread (a few unlinks)
 * so the cap holds before the write, not eventually. */
int cache_reserve(struct cache *c, struct cache_obj *self, uint64_t bytes)
{
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	while (c->max_bytes &&
	       c->used + c->overhead + c->reserved + bytes > c->max_bytes) {
		if (bytes > c->max_bytes || c->used == 0) {
			ret = -ENOSPC;
			break;
		}
		ret = cull_one_locked(c, self);
		if (ret)
			break;
	}
	if (!ret)
		c->reserved += bytes;
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/* Below bcull, free what brun asks for. The amount is computed once from
 * statvfs and then counted down from our own accounting: free space reported
 * by the filesystem lags behind unlinks (journal commit), and re-reading it
 * would cull too much. */
static void cull_for_space(struct cache *c)
{
	struct statvfs sv;
	uint64_t need, start;
	unsigned pct = cache_free_pct(c);

	if (pct >= c->bcull)
		return;
	if (fstatvfs(c->dirfd, &sv) < 0)
		return;
	need = (uint64_t)sv.f_blocks * sv.f_frsize / 100 * (c->brun - pct);
	pthread_mutex_lock(&c->lock);
	start = c->used;
	while (c->used + need > start && !cull_one_locked(c, NULL))
		;
	pthread_mutex_unlock(&c->lock);
}

static void *cull_main(void *arg)
{
	struct cache *c = arg;

	pthread_mutex_lock(&c->cull_lock);
	while (!c->cull_stop) {
		struct timespec ts;

		pthread_mutex_unlock(&c->cull_lock);
		cull_for_space(c);
		pthread_mutex_lock(&c->cull_lock);
		if (c->cull_stop)
			break;
		/* Woken early by a fill refused under bstop. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&c->cull_cond, &c->cull_lock, &ts);
	}
	pthread_mutex_unlock(&c->cull_lock);
	return NULL;
}

int cache_cull_start(struct cache *c)
{
	int ret = pthread_create(&c->cull_thread, NULL, cull_main, c);

	if (ret)
		return -ret;
	c->cull_up = true;
	return 0;
}

void cache_cull_stop(struct cache *c)
{
	if (!c->cull_up)
		return;
	worker_stop(c->cull_thread, &c->cull_lock, &c->cull_cond,
		    &c->cull_stop);
	c->cull_up = false;
}
