/* gw_lockranges_test: the ranges a lock owner holds at the origin
 * (gateway/lock/lock_ranges.c), which a reclaim asks for again after the
 * origin restarts: POSIX's rules (a lock replaces what the owner held in
 * its range, a read lock inside a write lock splits it in three, an
 * unlock cuts its range out, len 0 runs to the end of the file), and an
 * unlock of everything leaves nothing. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "lock_i.h"

static struct nfsc_lock L(uint64_t off, uint64_t len, bool excl)
{
	struct nfsc_lock lk;

	memset(&lk, 0, sizeof(lk));
	lk.off = off;
	lk.len = len;
	lk.exclusive = excl;
	return lk;
}

/* The owner's ranges, sorted, as "start-end:w|r ..." (end "E" for the
 * end of the file). */
static const char *show(struct gw_lock_owner *o)
{
	static char buf[512];
	struct gw_lock_range *r, *best;
	uint64_t from = 0;
	size_t n = 0;
	bool any = true;

	buf[0] = 0;
	while (any) {
		any = false;
		best = NULL;
		for (r = o->ranges; r; r = r->next)
			if (r->start >= from && (!best || r->start < best->start))
				best = r;
		if (!best)
			break;
		any = true;
		if (best->end == UINT64_MAX)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      "%s%llu-E:%c", n ? " " : "",
					      (unsigned long long)best->start,
					      best->exclusive ? 'w' : 'r');
		else
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      "%s%llu-%llu:%c", n ? " " : "",
					      (unsigned long long)best->start,
					      (unsigned long long)best->end,
					      best->exclusive ? 'w' : 'r');
		from = best->start + 1;
	}
	return buf;
}

#define EXPECT(o, want) do { \
	const char *_got = show(o); \
	if (strcmp(_got, want)) { \
		fprintf(stderr, "%s:%d: ranges '%s', expected '%s'\n", \
			__FILE__, __LINE__, _got, want); \
		exit(1); \
	} \
} while (0)

int main(void)
{
	struct gw_lock_owner o;
	struct nfsc_lock lk;

	memset(&o, 0, sizeof(o));
	lk = L(0, 100, true);
	gw_lock_ranges_set(&o, &lk, true);
	EXPECT(&o, "0-100:w");
	/* A read lock inside: split in three. */
	lk = L(40, 10, false);
	gw_lock_ranges_set(&o, &lk, true);
	EXPECT(&o, "0-40:w 40-50:r 50-100:w");
	/* The same lock again changes nothing. */
	gw_lock_ranges_set(&o, &lk, true);
	EXPECT(&o, "0-40:w 40-50:r 50-100:w");
	/* An unlock across two ranges. */
	lk = L(30, 30, false);
	gw_lock_ranges_set(&o, &lk, false);
	EXPECT(&o, "0-30:w 60-100:w");
	/* A lock to the end of the file over the tail. */
	lk = L(80, 0, false);
	gw_lock_ranges_set(&o, &lk, true);
	EXPECT(&o, "0-30:w 60-80:w 80-E:r");
	/* An unlock of a hole changes nothing. */
	lk = L(35, 5, false);
	gw_lock_ranges_set(&o, &lk, false);
	EXPECT(&o, "0-30:w 60-80:w 80-E:r");
	/* An unlock in the middle of the open-ended range. */
	lk = L(1000, 24, false);
	gw_lock_ranges_set(&o, &lk, false);
	EXPECT(&o, "0-30:w 60-80:w 80-1000:r 1024-E:r");
	/* A whole-file write lock (flock) replaces everything. */
	lk = L(0, 0, true);
	gw_lock_ranges_set(&o, &lk, true);
	EXPECT(&o, "0-E:w");
	/* An offset near the top: len running past 2^64 is to the end. */
	lk = L(UINT64_MAX - 10, 100, false);
	gw_lock_ranges_set(&o, &lk, false);
	EXPECT(&o, "0-18446744073709551605:w");
	/* Unlock of everything. */
	lk = L(0, 0, false);
	gw_lock_ranges_set(&o, &lk, false);
	EXPECT(&o, "");
	CHECK(!o.ranges && !o.ranges_unknown);
	lk = L(5, 5, true);
	gw_lock_ranges_set(&o, &lk, true);
	gw_lock_ranges_free(&o);
	CHECK(!o.ranges);
	return 0;
}
