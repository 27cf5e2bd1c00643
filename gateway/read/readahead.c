/* readahead.c - readahead policy: how far ahead of a sequential reader
 * the gateway fetches, without making its reads wait for it.
 */
#include <stdint.h>

#include "cache.h"
#include "inode_i.h"
#include "read_i.h"


/* Keep the readahead front readahead-window bytes ahead of a sequential
 * reader, fetching what lies between without waiting for it. */
void gw_readahead_push(struct gw *gw, struct gw_inode *ino,
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
	if (!gw->o->fill_skip &&
	    __atomic_load_n(&gw->fill_queued_bytes, __ATOMIC_RELAXED) >
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
		f = gw_fetch_at_locked(ino, from);
		pthread_mutex_unlock(&ino->lock);
		if (!f)
			break;
		from = f->off + f->len;
		gw_fetch_put(ino, f);
		if (from >= to)
			return;
	}
	f = gw_fetch_gap(gw, ino, cr, from, to, bs);
	if (f) {
		__atomic_add_fetch(&gw->readahead_bytes, f->len,
				   __ATOMIC_RELAXED);
		gw_fetch_put(ino, f);
	}
}
