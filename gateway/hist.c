/* hist.c - latency histograms for the metrics (Prometheus histograms).
 *
 * Recorded on hot paths (every origin READ, every cache read) from many
 * threads: a relaxed atomic add per bucket, no lock. Buckets are kept
 * per bucket and summed into Prometheus's cumulative `le` form only when
 * printed, so a scrape racing a recording may see _count a step ahead of
 * the +Inf bucket, never a bucket going down.
 */
#include <stdio.h>
#include <time.h>

#include "gw_i.h"

/* Upper bounds in ns: 100us .. 10s, in 1-2.5-5 steps. */
static const uint64_t bounds_ns[GW_HIST_BUCKETS] = {
	100000, 250000, 500000,
	1000000, 2500000, 5000000,
	10000000, 25000000, 50000000,
	100000000, 250000000, 500000000,
	1000000000, 2500000000u, 5000000000u,
	10000000000u,
};

uint64_t gw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void gw_hist_record(struct gw_hist *h, uint64_t start_ns)
{
	uint64_t now = gw_now_ns(), d = now > start_ns ? now - start_ns : 0;
	unsigned i;

	for (i = 0; i < GW_HIST_BUCKETS && d > bounds_ns[i]; i++)
		;
	/* i == GW_HIST_BUCKETS: above the last bound, only in +Inf. */
	if (i < GW_HIST_BUCKETS)
		__atomic_fetch_add(&h->bucket[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_ns, d, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
}

void gw_hist_print(const struct gw_hist *h, const char *name,
		   const char *help, FILE *out)
{
	uint64_t cum = 0, count;
	unsigned i;

	/* count first: buckets read after it can only have grown, so the
	 * printed +Inf (count) is never below the last finite bucket. */
	count = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
	fprintf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (i = 0; i < GW_HIST_BUCKETS; i++) {
		cum += __atomic_load_n(&h->bucket[i], __ATOMIC_RELAXED);
		if (cum > count)
			count = cum;
		fprintf(out, "%s_bucket{le=\"%g\"} %llu\n", name,
			(double)bounds_ns[i] / 1e9, (unsigned long long)cum);
	}
	fprintf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name,
		(unsigned long long)count);
	fprintf(out, "%s_sum %.9f\n", name,
		(double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
	fprintf(out, "%s_count %llu\n", name, (unsigned long long)count);
}
