/* lock_ranges.c - the ranges an owner holds at the origin, as POSIX
 * keeps them: a lock replaces what the owner held in its range (a read
 * lock inside a write lock splits it), an unlock cuts its range out.
 * Kept for the reclaim after the origin restarts (lock_reclaim.c). A
 * split that finds no memory leaves the owner's ranges unknown (it is
 * then not reclaimed but lost, never reclaimed wrongly). No merging of
 * neighbours: a reclaim asks for each range as it was granted.
 */
#include <stdlib.h>

#include "lock_i.h"

static uint64_t range_end(const struct nfsc_lock *lk)
{
	return lk->len == 0 || lk->off + lk->len < lk->off ? UINT64_MAX :
							     lk->off + lk->len;
}

void gw_lock_ranges_set(struct gw_lock_owner *o, const struct nfsc_lock *lk,
			bool add)
{
	uint64_t s = lk->off, e = range_end(lk);
	struct gw_lock_range **pp, *r, *n;

	/* Cut [s, e) out of every range. */
	for (pp = &o->ranges; (r = *pp);) {
		if (r->end <= s || r->start >= e) {
			pp = &r->next;
			continue;
		}
		if (r->start < s && r->end > e) {
			/* Split in two around [s, e). */
			n = malloc(sizeof(*n));
			if (!n) {
				o->ranges_unknown = true;
				return;
			}
			*n = (struct gw_lock_range){ .next = r->next,
				.start = e, .end = r->end,
				.exclusive = r->exclusive };
			r->end = s;
			r->next = n;
			pp = &n->next;
		} else if (r->start < s) {
			r->end = s;
			pp = &r->next;
		} else if (r->end > e) {
			r->start = e;
			pp = &r->next;
		} else {
			*pp = r->next;
			free(r);
		}
	}
	if (!add)
		return;
	n = malloc(sizeof(*n));
	if (!n) {
		o->ranges_unknown = true;
		return;
	}
	*n = (struct gw_lock_range){ .next = o->ranges, .start = s, .end = e,
				     .exclusive = lk->exclusive };
	o->ranges = n;
}

void gw_lock_ranges_free(struct gw_lock_owner *o)
{
	struct gw_lock_range *r;

	while ((r = o->ranges)) {
		o->ranges = r->next;
		free(r);
	}
}
