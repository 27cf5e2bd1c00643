/* cache_bitmap_test: the presence bitmap: sparse fills, misses on absent blocks, several bitmap groups, persistence across reopen. */
#include "cache_helpers.h"

int main(void)
{
	const uint32_t bs = 4096;
	const uint64_t nblk = 200;		/* > 3 groups of 64 */
	const size_t size = nblk * bs - 123;
	const uint64_t filled[] = { 0, 2, 5, 63, 64, 70, 130, 199 };
	const int nf = sizeof(filled) / sizeof(filled[0]);
	char *data = malloc(size), *back = malloc(size);
	struct cache_obj_info info;
	char name[CACHE_NAME_LEN + 1];
	struct cache *c;
	struct cache_obj *o;

	t_pattern(data, size, 4);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
	o = t_get(c, "sparse", "v", size);
	for (int i = 0; i < nf; i++) {
		uint64_t b = filled[i];
		size_t len = b == nblk - 1 ? size - b * bs : bs;

		CHECK_EQ(cache_fill(o, data + b * bs, len, b * bs), 0);
	}
	/* Misaligned or short (not at EOF) fills are refused. */
	CHECK_EQ(cache_fill(o, data, bs, 100), -EINVAL);
	CHECK_EQ(cache_fill(o, data, 100, bs), -EINVAL);
	cache_drain(c);
	cache_obj_put(o);
	cache_close(c);

	for (int round = 0; round < 2; round++) {
		c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
		cache_obj_name("sparse", 6, name, sizeof(name));
		CHECK_EQ(cache_obj_info(c, name, &info), 0);
		CHECK_EQ(info.blocks_total, nblk);
		CHECK_EQ(info.blocks_present, nf);
		CHECK_EQ(info.cached_bytes, (nf - 1) * (uint64_t)bs + (bs - 123));
		o = t_get(c, "sparse", "v", size);
		for (uint64_t b = 0; b < nblk; b++) {
			bool present = false;
			size_t len = b == nblk - 1 ? size - b * bs : bs;

			for (int i = 0; i < nf; i++)
				present |= filled[i] == b;
			if (present) {
				CHECK_EQ(cache_read(o, back, bs, b * bs), (ssize_t)len);
				CHECK(!memcmp(back, data + b * bs, len));
			} else {
				CHECK_EQ(cache_read(o, back, bs, b * bs), -ENODATA);
			}
		}
		/* A read spanning a present and an absent block misses. */
		CHECK_EQ(cache_read(o, back, 2 * bs, 0), -ENODATA);
		CHECK_EQ(cache_read(o, back, 10, size + 10), 0);	/* past EOF */
		t_finish(c, o, 0);
	}
	free(data);
	free(back);
	return 0;
}
