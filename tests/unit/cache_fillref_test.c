/* cache_fillref_test: cache_fill_ref writes the caller's aligned buffer in place: the bytes read back verified, the tail past the caller's bytes is zeroed in the buffer (never the caller's bytes past a shorter object's end), and release is called exactly once on every path (queued, refused as misaligned, past EOF, skipped as already present, cache closed under it), in every cache_write mode. */
#include "cache_helpers.h"

static void run(enum cache_write_mode mode, const char *dir)
{
	const uint32_t bs = 65536;
	const size_t size = 5 * bs + 777;	/* a partial last block */
	const size_t cap = 6 * bs;
	char *data = malloc(size), *back = malloc(size);
	char *buf = aligned_alloc(CACHE_BUF_ALIGN, cap);
	struct cache *c;
	struct cache_obj *o;

	CHECK(data && back && buf);
	t_pattern(data, size, 9);
	memcpy(buf, data, size);
	memset(buf + size, 0xAB, cap - size);	/* must come back zeroed */
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, mode, bs, 0);
	o = t_get(c, "ref", "v1", size);

	/* Queued: released once the write completed (after drain). */
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_fill_ref(o, buf, size, 0, t_rel, buf), 0);
	cache_drain(c);
	CHECK_EQ(atomic_load(&t_released), 1);
	for (size_t i = size; i < ALIGN_UP(size, CACHE_BUF_ALIGN); i++)
		CHECK_EQ(buf[i], 0);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* The same bytes again: nothing to mark, still released once. */
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_fill_ref(o, buf, size, 0, t_rel, buf), 0);
	cache_drain(c);
	CHECK_EQ(atomic_load(&t_released), 1);

	/* Refused: misaligned buffer, misaligned offset; past EOF is a no-op.
	 * Each releases before returning. */
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_fill_ref(o, buf + 512, bs, 0, t_rel, buf), -EINVAL);
	CHECK_EQ(atomic_load(&t_released), 1);
	CHECK_EQ(cache_fill_ref(o, buf, bs, 100, t_rel, buf), -EINVAL);
	CHECK_EQ(atomic_load(&t_released), 2);
	CHECK_EQ(cache_fill_ref(o, buf, bs, 8 * (uint64_t)bs, t_rel, buf), 0);
	CHECK_EQ(atomic_load(&t_released), 3);

	/* A fill longer than the object (the file grew at the origin): the
	 * cache writes what fits but never zeroes the caller's bytes past
	 * the object's end (other readers are reading them). */
	{
		char *big = aligned_alloc(CACHE_BUF_ALIGN, cap);
		struct cache_obj *o2 = t_get(c, "short", "v1", 2 * bs + 100);

		CHECK(big && o2);
		t_pattern(big, cap, 11);
		memcpy(back, big, cap < size ? cap : size);
		atomic_store(&t_released, 0);
		CHECK_EQ(cache_fill_ref(o2, big, 3 * bs + 5000, 0, t_rel, big), 0);
		cache_drain(c);
		CHECK_EQ(atomic_load(&t_released), 1);
		CHECK(!memcmp(big, back, 3 * bs + 5000));
		CHECK_EQ(cache_read(o2, back, 2 * bs + 100, 0), (ssize_t)(2 * bs + 100));
		CHECK(!memcmp(back, big, 2 * bs + 100));
		cache_obj_put(o2);
		free(big);
	}

	/* Released even when the cache is closed with the fill queued. */
	CHECK_EQ(cache_drop_range(o, 0, size), 0);
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_fill_ref(o, buf, size, 0, t_rel, buf), 0);
	cache_obj_put(o);
	cache_close(c);
	CHECK_EQ(atomic_load(&t_released), 1);

	/* After a reopen the blocks are there and verify. */
	t_reopen_check(t_path(dir), mode, bs, "ref", data, size);
	free(data);
	free(back);
	free(buf);
}

int main(void)
{
	run(CACHE_WRITE_DIRECT, "direct");
	run(CACHE_WRITE_DONTCACHE, "dontcache");
	run(CACHE_WRITE_BUFFERED, "buffered");
	run(CACHE_WRITE_FADVISE, "fadvise");
	return 0;
}
