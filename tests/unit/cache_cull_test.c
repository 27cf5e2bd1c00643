/* cache_cull_test: culling: least recently used first, referenced objects last, cache_size is a hard cap, bstop refuses fills, bcull culls. */
#include <time.h>
#include "cache_helpers.h"

static const uint32_t bs = 64 << 10;
static const size_t osize = 256 << 10;	/* 4 blocks per object */

static void put_obj(struct cache *c, const char *key, const char *data)
{
	struct cache_obj *o = t_get(c, key, "v", osize);

	CHECK_EQ(cache_fill(o, data, osize, 0), 0);
	cache_drain(c);
	cache_obj_put(o);
	CHECK(t_stats(c).used_bytes <= 2u << 20);
}

static bool exists(struct cache *c, const char *key)
{
	return access(t_objfile(c, key, true), F_OK) == 0;
}

/* Is key cached with all its data? */
static bool has_data(struct cache *c, const char *key, const char *data)
{
	char *back = malloc(osize);
	struct cache_obj *o;
	bool ok;

	if (!exists(c, key)) {
		free(back);
		return false;
	}
	o = t_get(c, key, "v", osize);
	ok = cache_read(o, back, osize, 0) == (ssize_t)osize &&
	     !memcmp(back, data, osize);
	cache_obj_put(o);
	free(back);
	return ok;
}

int main(void)
{
	const uint64_t cap = 2u << 20;	/* room for ~6 objects with overhead */
	char *data = malloc(4 << 20);
	char key[16];
	struct cache *c;
	struct cache_obj *held, *o;
	uint64_t used;

	t_pattern(data, 4 << 20, 5);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, bs, cap);
	/* 1. Fill a..e, then use a again: LRU order b c d e a. */
	for (char k = 'a'; k <= 'e'; k++) {
		snprintf(key, sizeof(key), "%c", k);
		put_obj(c, key, data);
	}
	CHECK(has_data(c, "a", data));
	/* 2. Keep filling: the cap holds and b goes first, a survives. */
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "n%d", i);
		put_obj(c, key, data);
	}
	used = t_stats(c).used_bytes;
	CHECK(used <= cap);
	CHECK(t_stats(c).culled_objects >= 1);
	CHECK(!exists(c, "b"));
	CHECK(has_data(c, "a", data));
	CHECK(has_data(c, "n2", data));

	/* 3. Referenced objects go last: hold one, fill many others; the held
	 *    one keeps its data while unreferenced ones are culled. */
	held = t_get(c, "held", "v", osize);
	CHECK_EQ(cache_fill(held, data, osize, 0), 0);
	cache_drain(c);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "m%d", i);
		put_obj(c, key, data);
	}
	{
		char *back = malloc(osize);

		CHECK_EQ(cache_read(held, back, osize, 0), (ssize_t)osize);
		free(back);
	}
	/* 4. When only referenced objects are left, their data goes. */
	{
		struct cache_obj *refs[8];
		int n = 0;

		for (int i = 0; i < 8; i++) {
			snprintf(key, sizeof(key), "r%d", i);
			refs[n] = t_get(c, key, "v", osize);
			if (cache_fill(refs[n], data, osize, 0) == 0)
				cache_drain(c);
			n++;
			CHECK(t_stats(c).used_bytes <= cap);
		}
		for (int i = 0; i < n; i++)
			cache_obj_put(refs[i]);
	}
	cache_obj_put(held);
	/* 5. A fill bigger than the cap is refused, counted. */
	o = t_get(c, "huge", "v", 4 << 20);
	CHECK_EQ(cache_fill(o, data, 4 << 20, 0), -ENOSPC);
	CHECK(t_stats(c).fills_skipped >= 1);
	cache_obj_put(o);
	CHECK(t_stats(c).used_bytes <= cap);
	CHECK_EQ(t_stats(c).errors, 0);
	cache_close(c);

	/* 6. Reopen: accounting rebuilt from disk, LRU order kept. */
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, 0, cap);
	CHECK(t_stats(c).used_bytes <= cap);
	CHECK(t_stats(c).used_bytes > 0);

	/* 7. Free-space thresholds (pretended): under bstop fills are refused;
	 *    under bcull the background thread culls. */
	{
		uint64_t before = t_stats(c).objects;
		struct timespec ts = { 0, 50 * 1000 * 1000 };

		CHECK(before > 2);
		__atomic_store_n(&c->fake_free_pct, 2, __ATOMIC_RELAXED);
		o = t_get(c, "late", "v", osize);
		CHECK_EQ(cache_fill(o, data, osize, 0), -ENOSPC);
		__atomic_store_n(&c->fake_free_pct, 5, __ATOMIC_RELAXED);
		for (int i = 0; i < 60 && t_stats(c).objects > 1; i++)
			nanosleep(&ts, NULL);
		CHECK_EQ(t_stats(c).objects, 1);	/* only "late", referenced */
		CHECK(t_stats(c).culled_objects >= before - 1);
	}
	__atomic_store_n(&c->fake_free_pct, -1, __ATOMIC_RELAXED);
	cache_obj_put(o);
	cache_close(c);
	free(data);
	return 0;
}
