/* cache_inspect_test: the offline inspection API: iterate, info, verify (with and without repair), evict one or all. */
#include "cache_helpers.h"

static int count_cb(const struct cache_obj_info *info, void *arg)
{
	int *n = arg;

	CHECK(!info->damaged);
	CHECK_EQ(info->blocks_present, 2);
	CHECK(info->last_use_ns > 0);
	(*n)++;
	return 0;
}

int main(void)
{
	const uint32_t bs = 16 << 10;
	const size_t size = 2 * bs;
	char *data = malloc(size);
	char name[CACHE_NAME_LEN + 1];
	struct cache *c;
	uint64_t bad;
	int n = 0;

	t_pattern(data, size, 11);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, bs, 0);
	for (int i = 0; i < 5; i++) {
		char key[8];
		struct cache_obj *o;

		snprintf(key, sizeof(key), "k%d", i);
		o = t_get(c, key, "v", size);
		CHECK_EQ(cache_fill(o, data, size, 0), 0);
		cache_drain(c);
		cache_obj_put(o);
	}
	cache_close(c);

	c = t_open(t_path("c"), CACHE_OPEN_INSPECT, 0, 0, 0);
	CHECK_EQ(cache_iterate(c, count_cb, &n), 0);
	CHECK_EQ(n, 5);
	CHECK_EQ(cache_evict(c, NULL), -EROFS);
	t_flip(t_objfile(c, "k1", false), 5);
	t_flip(t_objfile(c, "k3", false), bs + 5);
	CHECK_EQ(cache_verify(c, NULL, 0, &bad), 0);
	CHECK_EQ(bad, 2);
	cache_close(c);

	c = t_open(t_path("c"), CACHE_OPEN_MODIFY, 0, 0, 0);
	CHECK_EQ(cache_verify(c, NULL, 1, &bad), 0);
	CHECK_EQ(bad, 2);
	CHECK_EQ(cache_verify(c, NULL, 0, &bad), 0);
	CHECK_EQ(bad, 0);
	cache_obj_name("k1", 2, name, sizeof(name));
	{
		struct cache_obj_info info;

		CHECK_EQ(cache_obj_info(c, name, &info), 0);
		CHECK_EQ(info.blocks_present, 1);
		CHECK_EQ(cache_verify(c, name, 0, &bad), 0);
		CHECK_EQ(cache_verify(c, "0000000000000000", 0, &bad), -ENOENT);
	}
	CHECK_EQ(cache_evict(c, name), 0);
	CHECK_EQ(cache_evict(c, name), -ENOENT);
	CHECK_EQ(t_stats(c).objects, 4);
	CHECK_EQ(cache_evict(c, NULL), 0);
	CHECK_EQ(t_stats(c).objects, 0);
	cache_close(c);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, 0, 0, 0);
	CHECK_EQ(t_stats(c).objects, 0);
	CHECK(t_stats(c).used_bytes < 64 * 1024);	/* overhead only */
	cache_close(c);
	free(data);
	return 0;
}
