/* hist.c - the gateway's latency histograms for the metrics: a
 * common/lathist.h histogram timed from a gw_now_ns() start.
 */
#include <stdio.h>
#include <time.h>

#include "gw_i.h"

uint64_t gw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void gw_hist_record(struct gw_hist *h, uint64_t start_ns)
{
	uint64_t now = gw_now_ns();

	lat_hist_add(&h->h, now > start_ns ? now - start_ns : 0);
}
