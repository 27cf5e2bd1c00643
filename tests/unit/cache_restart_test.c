/* cache_restart_test: closing and reopening the cache reuses every valid block; accounting is rebuilt from disk. */
#include "cache_helpers.h"

int main(void)
{
	const uint32_t bs = 256 << 10;
	const size_t size = 6 * bs + 17;
	char *data = malloc(size), *back = malloc(size);
	struct cache_stats st;
	struct cache *c;
	struct cache_obj *o;
	uint64_t used;

	t_pattern(data, size, 8);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
	for (int i = 0; i < 3; i++) {
		char key[8];

		snprintf(key, sizeof(key), "o%d", i);
		o = t_get(c, key, "coh", size);
		CHECK_EQ(cache_fill(o, data, size, 0), 0);
		cache_obj_put(o);
	}
	cache_drain(c);
	used = t_stats(c).used_bytes;
	CHECK(used >= 3 * size);
	cache_close(c);

	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, 0, 0);
	st = t_stats(c);
	CHECK_EQ(st.objects, 3);
	CHECK_EQ(st.used_bytes, used);
	for (int i = 0; i < 3; i++) {
		char key[8];

		snprintf(key, sizeof(key), "o%d", i);
		o = t_get(c, key, "coh", size);
		CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
		CHECK(!memcmp(back, data, size));
		cache_obj_put(o);
	}
	st = t_stats(c);
	CHECK_EQ(st.hit_bytes, 3 * size);
	CHECK_EQ(st.miss_bytes, 0);
	CHECK_EQ(st.fill_bytes, 0);
	cache_close(c);
	free(data);
	free(back);
	return 0;
}
