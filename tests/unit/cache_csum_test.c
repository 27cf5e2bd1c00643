/* cache_csum_test: a flipped byte in a data file or a checksum entry is caught (-ENODATA, counted, logged), then a refill reads back exact. */
#include "cache_helpers.h"

int main(void)
{
	const uint32_t bs = 64 << 10;
	const size_t size = 4 * bs;
	char *data = malloc(size), *back = malloc(size);
	struct cache *c;
	struct cache_obj *o;

	t_pattern(data, size, 2);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
	o = t_get(c, "k", "v1", size);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* 1. Data byte flipped in block 2. */
	t_flip(t_objfile(c, "k", false), 2 * bs + 77);
	CHECK_EQ(cache_read(o, back, 100, 2 * bs + 50), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);
	/* Dropped: a miss now, not counted twice; the others still hit. */
	CHECK_EQ(cache_read(o, back, bs, 2 * bs), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);
	CHECK_EQ(cache_read(o, back, bs, bs), (ssize_t)bs);
	CHECK(!memcmp(back, data + bs, bs));
	/* Refill ("from the origin") and read exact. */
	CHECK_EQ(cache_fill(o, data + 2 * bs, bs, 2 * bs), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* 2. Checksum entry of block 0 flipped, caught at the next open
	 *    (while the object is open a verified copy of the entries is
	 *    kept in memory: cache_csc_test). */
	t_flip(t_objfile(c, "k", true), cache_meta_csum_off(bs, 0) + 3);
	cache_obj_put(o);
	o = t_get(c, "k", "v1", size);
	CHECK_EQ(cache_read(o, back, size, 0), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 2);
	CHECK_EQ(cache_fill(o, data, bs, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* 3. A block punched out under us (reads as zeros). */
	{
		int fd = open(t_objfile(c, "k", false), O_RDWR);

		CHECK(fd >= 0);
		CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				3 * bs, bs) == 0);
		close(fd);
	}
	CHECK_EQ(cache_read(o, back, bs, 3 * bs), -ENODATA);
	t_finish(c, o, 3);
	free(data);
	free(back);
	return 0;
}
