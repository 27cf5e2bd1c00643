/* stats.c - counters and the one-line log. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cache_i.h"
#include "logline.h"

_Static_assert(sizeof(struct cache_stats) % sizeof(uint64_t) == 0,
	       "cache_stats holds only uint64_t counters");

void cache_get_stats(struct cache *c, struct cache_stats *st)
{
	const uint64_t *src = (const uint64_t *)&c->stats;
	uint64_t *dst = (uint64_t *)st;

	/* Every field is a uint64_t updated atomically; copy each atomically
	 * (the snapshot as a whole is not, and need not be, consistent). */
	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* One line per event on stderr, prefixed so the gateway's log can be
 * grepped; built in one buffer so concurrent lines do not interleave. */
void cache_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_linev("cache", fmt, ap);
	va_end(ap);
}
