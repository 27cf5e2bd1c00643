/* cache_bigsize_test: sizes an origin (or whoever answers for it) may send are bounded before any memory or time is spent on them: the block count of sizes near 2^64 does not wrap; cache_obj_get refuses sizes past CACHE_OBJ_SIZE_MAX (1 TiB) with EFBIG; an object whose file grows past it (set_coh, check) drops its data, serves nothing, and a new object is made once the file is small again; an object at the limit, filled near its end, shrinks to 0 in well under a second (the walk goes by what is cached), its last block gone. */
#include <time.h>

#include "cache_helpers.h"

#define BS 4096u

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
	struct cache *c;
	struct cache_obj *o = NULL, *o2;
	char *blk = cache_alloc_aligned(BS), *back = cache_alloc_aligned(BS);
	const uint64_t max = CACHE_OBJ_SIZE_MAX;
	double t0;

	/* 1. The block count. */
	CHECK(cache_meta_nblocks(UINT64_MAX, BS) == (1ull << 52));
	CHECK(cache_meta_nblocks(UINT64_MAX - BS + 1, BS) == (1ull << 52) - 1);
	CHECK(cache_meta_nblocks(UINT64_MAX - BS + 2, BS) == (1ull << 52));
	CHECK(cache_meta_nblocks(0, BS) == 0);
	CHECK(cache_meta_nblocks(1, BS) == 1);

	c = t_open(t_path("big"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, BS, 0);
	/* 2. Refused at the door of the cache. */
	CHECK_EQ(cache_obj_get(c, "k", 1, "v1", 2, UINT64_MAX, &o), -EFBIG);
	CHECK_EQ(cache_obj_get(c, "k", 1, "v1", 2, UINT64_MAX - BS + 2, &o), -EFBIG);
	CHECK_EQ(cache_obj_get(c, "k", 1, "v1", 2, (1ull << 63) - 1, &o), -EFBIG);
	CHECK_EQ(cache_obj_get(c, "k", 1, "v1", 2, max + 1, &o), -EFBIG);
	CHECK(o == NULL);

	/* 3. At the limit: cached near its end, shrunk to 0 quickly. */
	o = t_get(c, "k", "v1", max);
	t_pattern(blk, BS, 7);
	CHECK_EQ(cache_fill(o, blk, BS, max - BS), 0);
	cache_drain(c);
	CHECK(cache_present(o, max - BS, BS));
	CHECK_EQ(cache_read(o, back, BS, max - BS), (ssize_t)BS);
	CHECK(!memcmp(back, blk, BS));
	t0 = now_s();
	CHECK_EQ(cache_obj_set_coh(o, "v2", 2, 0), 0);
	CHECK(now_s() - t0 < 2.0);	/* was a walk of 2^28 blocks */
	CHECK(!cache_present(o, 0, BS));

	/* 4. Grown past the limit (set_coh): nothing served, nothing kept. */
	CHECK_EQ(cache_obj_set_coh(o, "v3", 2, BS), 0);
	CHECK_EQ(cache_fill(o, blk, BS, 0), 0);
	cache_drain(c);
	CHECK(cache_present(o, 0, BS));
	CHECK_EQ(cache_obj_set_coh(o, "v4", 2, 1ull << 50), 0);
	CHECK(!cache_present(o, 0, BS));
	cache_fill(o, blk, BS, 0);	/* not stored: the object is dropped */
	cache_drain(c);
	CHECK(!cache_present(o, 0, BS));
	cache_obj_put(o);

	/* 5. Small again: a new object caches as before. */
	o = t_get(c, "k", "v5", BS);
	CHECK(!cache_present(o, 0, BS));
	CHECK_EQ(cache_fill(o, blk, BS, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, BS, 0), (ssize_t)BS);
	CHECK(!memcmp(back, blk, BS));
	/* 6. Past the limit through a coherency check (the origin's new
	 *    size): invalidated, nothing served. */
	o2 = cache_obj_grab(o);
	CHECK_EQ(cache_obj_check(o2, "v6", 2, UINT64_MAX), 1);
	CHECK(!cache_present(o2, 0, BS));
	cache_obj_put(o2);
	cache_obj_put(o);

	cache_close(c);
	free(blk);
	free(back);
	t_cleanup();
	return 0;
}
