/* cache_write_test: each cache_write strategy (direct, dontcache, buffered, fadvise) fills and reads back exact bytes, also after reopen. */
#include "cache_helpers.h"

int main(void)
{
	const uint32_t bs = 128 << 10;
	const size_t size = 10 * bs + 4095;
	const char *names[] = { "direct", "dontcache", "buffered", "fadvise" };
	char *data = malloc(size), *back = malloc(size);

	for (int m = CACHE_WRITE_DIRECT; m <= CACHE_WRITE_FADVISE; m++) {
		struct cache *c;
		struct cache_obj *o;

		t_pattern(data, size, 10 + m);
		c = t_open(t_path(names[m]), CACHE_OPEN_OWNER, m, bs, 0);
		o = t_get(c, "file", "v", size);
		/* In pieces, out of order, as a readahead window would. */
		CHECK_EQ(cache_fill(o, data + 4 * bs, 4 * bs, 4 * bs), 0);
		CHECK_EQ(cache_fill(o, data + 8 * bs, size - 8 * bs, 8 * bs), 0);
		CHECK_EQ(cache_fill(o, data, 4 * bs, 0), 0);
		cache_drain(c);
		memset(back, 0, size);
		CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
		CHECK(!memcmp(back, data, size));
		/* Unaligned sub-range. */
		CHECK_EQ(cache_read(o, back, 3 * bs, bs / 2 + 7), (ssize_t)(3 * bs));
		CHECK(!memcmp(back, data + bs / 2 + 7, 3 * bs));
		CHECK_EQ(t_stats(c).fill_bytes, size);
		CHECK_EQ(t_stats(c).errors, 0);
		CHECK_EQ(t_stats(c).corrupt_blocks, 0);
		cache_obj_put(o);
		cache_close(c);

		c = t_open(t_path(names[m]), CACHE_OPEN_OWNER, m, bs, 0);
		o = t_get(c, "file", "v", size);
		memset(back, 0, size);
		CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
		CHECK(!memcmp(back, data, size));
		CHECK_EQ(t_stats(c).hit_bytes, size);
		cache_obj_put(o);
		cache_close(c);
		fprintf(stderr, "%s: ok\n", names[m]);
	}
	free(data);
	free(back);
	return 0;
}
