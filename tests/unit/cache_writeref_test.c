/* cache_writeref_test: cache_write_ref, the gateway's own write given as a buffer the cache may keep. Whole blocks, and a run of blocks that reaches the object's end, are written from the buffer itself: release comes once, after the write, and the tail up to CACHE_BUF_ALIGN is zeroed in the buffer. Any other write (an edge inside a block) is copied and merged with the cached block as by cache_write, and released before the call returns: the buffer scribbled over afterwards changes nothing cached. In every case the bytes read back are the written ones over the old. */
#include "cache_helpers.h"

static void run(enum cache_write_mode mode, const char *dir)
{
	const uint32_t bs = 65536;
	const size_t size = 4 * bs + 300;	/* a partial last block */
	const size_t cap = 5 * bs;
	char *model = malloc(size), *back = malloc(size);
	char *buf = aligned_alloc(CACHE_BUF_ALIGN, cap);
	struct cache *c;
	struct cache_obj *o;
	size_t tail;

	CHECK(model && back && buf);
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, mode, bs, 0);
	o = t_get(c, "w", "v1", size);

	/* 1. Whole blocks 0-2: written from buf, released after. */
	t_pattern(buf, 3 * bs, 1);
	memcpy(model, buf, 3 * bs);
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_write_ref(o, buf, 3 * bs, 0, t_rel, buf), 0);
	cache_drain(c);
	CHECK_EQ(atomic_load(&t_released), 1);
	CHECK_EQ(cache_read(o, back, 3 * bs, 0), (ssize_t)(3 * bs));
	CHECK(!memcmp(back, model, 3 * bs));

	/* 2. Blocks 3 and the partial 4, to the object's end: written from
	 *    buf, its tail past the bytes zeroed up to the buffer unit. */
	tail = size - 3 * bs;
	t_pattern(buf, tail, 2);
	memset(buf + tail, 0xAB, cap - tail);
	memcpy(model + 3 * bs, buf, tail);
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_write_ref(o, buf, tail, 3 * (uint64_t)bs, t_rel, buf), 0);
	cache_drain(c);
	CHECK_EQ(atomic_load(&t_released), 1);
	for (size_t i = tail; i < ALIGN_UP(tail, CACHE_BUF_ALIGN); i++)
		CHECK_EQ(buf[i], 0);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, model, size));

	/* 3. Inside block 1: copied, merged with the cached block, released
	 *    before the call returns; scribbling on buf then changes
	 *    nothing. */
	t_pattern(buf, 1000, 3);
	memcpy(model + bs + 100, buf, 1000);
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_write_ref(o, buf, 1000, bs + 100, t_rel, buf), 0);
	CHECK_EQ(atomic_load(&t_released), 1);
	memset(buf, 0x5A, cap);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, model, size));

	/* 4. From a block's start, ending inside a later block short of the
	 *    end: copied too (its last block is an edge to merge). */
	t_pattern(buf, bs + 50, 4);
	memcpy(model, buf, bs + 50);
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_write_ref(o, buf, bs + 50, 0, t_rel, buf), 0);
	CHECK_EQ(atomic_load(&t_released), 1);
	memset(buf, 0x5A, cap);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, model, size));

	/* 5. Nothing to write (past the end, or empty): released, 0. */
	atomic_store(&t_released, 0);
	CHECK_EQ(cache_write_ref(o, buf, bs, 8 * (uint64_t)bs, t_rel, buf), 0);
	CHECK_EQ(cache_write_ref(o, buf, 0, 0, t_rel, buf), 0);
	CHECK_EQ(atomic_load(&t_released), 2);

	/* After a reopen the blocks are there and verify. */
	cache_obj_put(o);
	cache_close(c);
	t_reopen_check(t_path(dir), mode, bs, "w", model, size);
	free(model);
	free(back);
	free(buf);
}

int main(void)
{
	run(CACHE_WRITE_DIRECT, "direct");
	run(CACHE_WRITE_BUFFERED, "buffered");
	return 0;
}
