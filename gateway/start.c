/* start.c - the request path as one, for the process that runs it: the
 * gateway made and freed, what the process opened handed to it, what
 * ties its rooms together at start, and its counters read for the
 * metrics.
 *
 * An inode is the inode room's, but the rooms above hang their own things
 * on it: the read path its fetches (which READ callbacks fill, so its
 * last READs must be waited for), the write path its uncommitted extents.
 * The inode table calls gw->it.evict before it frees an inode, and that
 * is set here, where every room is known, rather than the table calling
 * up into the rooms that use it.
 */
#include <stdlib.h>

#include "gateway.h"
#include "gw_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "lock_i.h"
#include "read_i.h"
#include "write_i.h"

struct gw *gw_new(struct gw_opts *o, bool successor)
{
	struct gw *gw = calloc(1, sizeof(*gw));

	if (!gw)
		return NULL;
	*gw = (struct gw){
		.o = o,
		.successor = successor,
		.win_lock = PTHREAD_MUTEX_INITIALIZER,
		.win_cond = PTHREAD_COND_INITIALIZER,
		.fill_lock = PTHREAD_MUTEX_INITIALIZER,
		.fill_cond = PTHREAD_COND_INITIALIZER,
		.fs_lock = PTHREAD_MUTEX_INITIALIZER,
		.owed_lock = PTHREAD_MUTEX_INITIALIZER,
		.md_epoch = gw_md_now_ns(),
	};
	return gw;
}

void gw_use_cache(struct gw *gw, struct cache *cache, struct nodes *nodes,
		  uint32_t generation)
{
	gw->cache = cache;
	gw->nodes = nodes;
	gw->generation = generation;
}

void gw_use_md(struct gw *gw, struct nodes_md *md)
{
	gw->md = md;
}

void gw_use_origin(struct gw *gw, struct nfsc *nfs)
{
	gw->nfs = nfs;
}

void gw_use_session(struct gw *gw, struct fuse_session *se)
{
	gw->se = se;
}

void gw_free(struct gw *gw)
{
	gw_locks_free(gw);
	free(gw);
}

static void inode_evict(struct gw *gw, struct gw_inode *ino)
{
	(void)gw;
	gw_inode_drop_fetch(ino);	/* waits for READs that fill ino->obj */
	gw_write_forget(ino);
}

int gw_gateway_init(struct gw *gw)
{
	int ret = gw_itable_init(&gw->it, nfsc_root(gw->nfs));

	if (ret)
		return ret;
	ret = gw_locks_init(gw);
	if (ret)
		return ret;
	gw->it.evict = inode_evict;
	gw_listings_init();
	gw_readahead_init();
	/* The root's kept attributes and ACCESS answers, as every new
	 * inode gets them (kept_md.c); no request runs yet. */
	gw_md_attach(gw, gw->it.root);
	return 0;
}

void gw_handover_freeze(struct gw *gw)
{
	gw_handles_freeze_records();
	gw->handing_over = true;
}

uint64_t gw_exit_commit_errors(struct gw *gw)
{
	return __atomic_load_n(&gw->exit_commit_errors, __ATOMIC_RELAXED);
}

uint64_t gw_fills_pending(struct gw *gw)
{
	return __atomic_load_n(&gw->fills_pending, __ATOMIC_ACQUIRE);
}

static void hist_copy(struct lat_hist *to, const struct gw_hist *from)
{
	/* count first, as lat_hist_print_series reads it */
	to->count = __atomic_load_n(&from->h.count, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < LAT_HIST_BUCKETS; i++)
		to->bucket[i] = __atomic_load_n(&from->h.bucket[i],
						__ATOMIC_RELAXED);
	to->sum_ns = __atomic_load_n(&from->h.sum_ns, __ATOMIC_RELAXED);
}

void gw_counters(struct gw *gw, struct gw_counters *c)
{
#define LOAD(f) __atomic_load_n(&gw->f, __ATOMIC_RELAXED)
	pthread_mutex_lock(&gw->win_lock);
	c->win_used = gw->win_used;
	c->win_waits = gw->win_waits;
	c->win_wait_ns = gw->win_wait_ns;
	c->win_used_max = gw->win_used_max;
	c->win_writes_max = gw->win_writes_max;
	pthread_mutex_unlock(&gw->win_lock);
	c->writepage_writes = LOAD(writepage_writes);
	c->write_spliced = LOAD(write_spliced);
	c->writepage_errors = LOAD(writepage_errors);
	c->resends = LOAD(resends);
	c->wcc_foreign = LOAD(wcc_foreign);
	c->fill_queue_skipped = LOAD(fill_queue_skipped);
	c->fill_queue_skipped_bytes = LOAD(fill_queue_skipped_bytes);
	c->kernel_cache_drops = LOAD(kernel_cache_drops);
	c->readahead_bytes = LOAD(readahead_bytes);
	c->readahead_throttled = LOAD(readahead_throttled);
	c->fetches = LOAD(fetches);
	c->fetch_bytes = LOAD(fetch_bytes);
	c->md_restored_attrs = LOAD(md_restored_attrs);
	c->md_restored_access = LOAD(md_restored_access);
	c->md_kept_lookups = LOAD(md_kept_lookups);
	c->known_absent = LOAD(known_absent);
	c->md_kept_listings = LOAD(md_kept_listings);
	c->walk_ahead_listings = LOAD(walk_ahead_listings);
	c->walk_ahead_used = LOAD(walk_ahead_used);
	c->walk_ahead_stale = LOAD(walk_ahead_stale);
	c->getattr_joined = LOAD(getattr_joined);
	c->cto_joined = LOAD(cto_joined);
	c->offline_answers = LOAD(offline_answers);
#undef LOAD
#define LOAD(f) __atomic_load_n(&gw->locks->f, __ATOMIC_RELAXED)
	if (gw->locks) {
		c->locks_granted = LOAD(granted);
		c->locks_denied = LOAD(denied);
		c->locks_waited = LOAD(waited);
		c->locks_interrupted = LOAD(interrupted);
		c->locks_released = LOAD(released);
		c->lock_owners = LOAD(owners);
		c->locks_reclaimed = LOAD(reclaimed);
		c->locks_lost = LOAD(lost);
	}
#undef LOAD
	hist_copy(&c->origin_read_lat, &gw->origin_read_lat);
	hist_copy(&c->cache_read_lat, &gw->cache_read_lat);
}
