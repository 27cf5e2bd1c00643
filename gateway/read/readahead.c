/* readahead.c - readahead policy: how far ahead of a sequential reader
 * the gateway fetches, without making its reads wait for it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "config.h"
#include "injectenv.h"
#include "inode_i.h"
#include "read_i.h"

/* CACHEGW_INJECT_READAHEAD_HOLD=MS[:COUNT] (tests only, test 18): a push
 * is held between its two scans of the cache's blocks (MS ms, then until
 * the file CACHEGW_INJECT_RELEASE names exists, at most 120 s), so that a
 * block can become present between them, as a fill or a write completing
 * does by chance. Unset, a push tests two zeroes. */
static unsigned ra_hold_ms;
static int ra_hold_count;
static const char *ra_release;

void gw_readahead_init(void)
{
#if CACHEGW_FAULT_INJECTION
	const char *v = inject_getenv("CACHEGW_INJECT_READAHEAD_HOLD",
				      &ra_hold_count);

	if (!v)
		return;
	ra_hold_ms = (unsigned)atoi(v);
	ra_release = getenv("CACHEGW_INJECT_RELEASE");
	fprintf(stderr, "cachegw: fault injection: "
		"CACHEGW_INJECT_READAHEAD_HOLD=%s\n", v);
#endif
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void inject_hold(uint64_t from)
{
	unsigned waited = 0;
	int c = __atomic_load_n(&ra_hold_count, __ATOMIC_RELAXED);

	if (!ra_hold_ms && !ra_release)
		return;
	do {
		if (c == 0)
			return;
	} while (c > 0 && !__atomic_compare_exchange_n(&ra_hold_count, &c,
						       c - 1, false,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED));
	fprintf(stderr, "cachegw: inject: readahead held between its cache "
		"scans at %llu\n", (unsigned long long)from);
	sleep_ms(ra_hold_ms);
	while (ra_release && access(ra_release, F_OK) != 0 && waited < 120000) {
		sleep_ms(50);
		waited += 50;
	}
}


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
		inject_hold(from);
		/* Two looks, not one: a fill, or a write through the
		 * gateway into the cache, that completed between them makes
		 * the block at from present (seen: 35_concurrency's appender
		 * and readers, 1 run in 20). Then there is nothing to fetch;
		 * a fetch of [from, from) would never complete, and every
		 * later write and last close of the file would wait for it
		 * (gw_inode_drop_fetch). */
		to = cache_next_present(obj, from, to);
		if (to <= from)
			return;
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
