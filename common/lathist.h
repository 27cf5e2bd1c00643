/* lathist.h - latency histograms (Prometheus histograms in seconds), shared
 * by gateway/ (reads from the origin and the cache) and nfsclient/ (every
 * origin call, by procedure).
 *
 * Recorded on hot paths from many threads: a relaxed atomic add per
 * bucket, no lock. Buckets are kept per bucket and summed into
 * Prometheus's cumulative `le` form only when printed, so a scrape racing
 * a recording may see _count a step ahead of the +Inf bucket, never a
 * bucket going down.
 */
#ifndef CACHEGW_LATHIST_H
#define CACHEGW_LATHIST_H

#include <stdint.h>
#include <stdio.h>

#define LAT_HIST_BUCKETS 16		/* finite buckets, 100us .. 10s */

struct lat_hist {
	uint64_t bucket[LAT_HIST_BUCKETS];	/* per bucket, not cumulative;
						 * atomic */
	uint64_t sum_ns;			/* atomic */
	uint64_t count;				/* atomic */
};

/* Upper bound of finite bucket i in ns: 100us .. 10s in 1-2.5-5 steps. */
static inline uint64_t lat_hist_bound_ns(unsigned i)
{
	static const uint64_t bounds[LAT_HIST_BUCKETS] = {
		100000, 250000, 500000,
		1000000, 2500000, 5000000,
		10000000, 25000000, 50000000,
		100000000, 250000000, 500000000,
		1000000000, 2500000000u, 5000000000u,
		10000000000u,
	};

	return bounds[i];
}

/* Record one duration of d nanoseconds. */
static inline void lat_hist_add(struct lat_hist *h, uint64_t d)
{
	unsigned i;

	for (i = 0; i < LAT_HIST_BUCKETS && d > lat_hist_bound_ns(i); i++)
		;
	/* i == LAT_HIST_BUCKETS: above the last bound, only in +Inf. */
	if (i < LAT_HIST_BUCKETS)
		__atomic_fetch_add(&h->bucket[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_ns, d, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
}

/* Print the _bucket, _sum and _count lines of name; labels ("proc=\"read\"")
 * go before le= in every line, or NULL. HELP and TYPE are the caller's. */
static inline void lat_hist_print_series(const struct lat_hist *h,
					 const char *name, const char *labels,
					 FILE *out)
{
	const char *l = labels ? labels : "", *sep = labels ? "," : "";
	uint64_t cum = 0, count;
	unsigned i;

	/* count first: buckets read after it can only have grown, so the
	 * printed +Inf (count) is never below the last finite bucket. */
	count = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
	for (i = 0; i < LAT_HIST_BUCKETS; i++) {
		cum += __atomic_load_n(&h->bucket[i], __ATOMIC_RELAXED);
		if (cum > count)
			count = cum;
		fprintf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, l, sep,
			(double)lat_hist_bound_ns(i) / 1e9,
			(unsigned long long)cum);
	}
	fprintf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, l, sep,
		(unsigned long long)count);
	fprintf(out, "%s_sum%s%s%s %.9f\n", name, labels ? "{" : "", l,
		labels ? "}" : "",
		(double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
	fprintf(out, "%s_count%s%s%s %llu\n", name, labels ? "{" : "", l,
		labels ? "}" : "", (unsigned long long)count);
}

#endif
