/* cache_csc_test: the checksum cache of an open object (read.c). A warm read takes its sectors' checksums from memory (no pread of the metadata file: csum_loads does not move), still verifies every byte (a flipped data byte is caught, counted, the block dropped and refilled), never trusts a copy that a fill, a write, a truncate or a reset made stale (no false corruption, the new bytes read back), stays bounded for a huge object (CACHE_CSC_SLOTS_MAX chunks), and is gone with the object's last reference: a damaged checksum entry on disk is caught at the next open. */
#include "cache_helpers.h"

static uint64_t loads(struct cache *c)
{
	return t_stats(c).csum_loads;
}

int main(void)
{
	const uint32_t bs = 64 << 10;
	const size_t size = 8 * (size_t)bs;
	char *data = malloc(size), *back = malloc(size), *other = malloc(size);
	struct cache *c;
	struct cache_obj *o;
	uint64_t l;

	t_pattern(data, size, 3);
	t_pattern(other, size, 4);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
	o = t_get(c, "k", "v1", size);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);

	/* 1. The first read loads the checksums, the next ones of the same
	 *    chunk (256 KiB) do not, and return exact bytes. */
	l = loads(c);
	CHECK_EQ(cache_read(o, back, 4096, 5 * 4096), 4096);
	CHECK(!memcmp(back, data + 5 * 4096, 4096));
	CHECK_EQ(loads(c), l + 1);
	for (int i = 0; i < 64; i++) {
		CHECK_EQ(cache_read(o, back, 4096, (uint64_t)i * 4096), 4096);
		CHECK(!memcmp(back, data + (size_t)i * 4096, 4096));
	}
	CHECK_EQ(cache_read(o, back, 100, 3 * 4096 + 7), 100);
	CHECK(!memcmp(back, data + 3 * 4096 + 7, 100));
	CHECK_EQ(loads(c), l + 1);

	/* 2. Every byte is still verified: a flipped data byte under a
	 *    cached checksum fails the read, counted once, the block is
	 *    dropped; a refill reads back exact, without a false alarm. */
	t_flip(t_objfile(c, "k", false), 2 * bs + 4096 + 9);
	CHECK_EQ(cache_read(o, back, 4096, 2 * bs + 4096), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);
	CHECK_EQ(cache_read(o, back, 4096, 2 * bs), -ENODATA);	/* a miss */
	CHECK_EQ(cache_fill(o, data + 2 * bs, bs, 2 * bs), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);

	/* 3. A write through the cache (new bytes, new checksums, same
	 *    salt) of a cached chunk: the stale copy is not used. */
	CHECK_EQ(cache_read(o, back, 4096, bs), 4096);	/* cached */
	CHECK_EQ(cache_obj_set_coh(o, "v1", 2, size), 0);
	CHECK_EQ(cache_write(o, other + bs, 3 * 4096, bs), 0);
	cache_drain(c);
	memcpy(data + bs, other + bs, 3 * 4096);
	CHECK_EQ(cache_read(o, back, 4096, bs), 4096);
	CHECK(!memcmp(back, data + bs, 4096));
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);

	/* 4. Truncate and grow back, then refill with other bytes. */
	CHECK_EQ(cache_obj_set_coh(o, "v2", 2, 3 * (size_t)bs + 100), 0);
	CHECK_EQ(cache_read(o, back, 4096, 3 * bs), -ENODATA);
	CHECK_EQ(cache_obj_set_coh(o, "v3", 2, size), 0);
	CHECK_EQ(cache_fill(o, other + 3 * bs, size - 3 * bs, 3 * bs), 0);
	cache_drain(c);
	memcpy(data + 3 * bs, other + 3 * bs, size - 3 * bs);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);

	/* 5. A reset (someone else changed the file: a new salt): the old
	 *    copy verifies nothing, the new fill reads back. */
	CHECK_EQ(cache_obj_check(o, "v4", 2, size), 1);
	CHECK_EQ(cache_read(o, back, 4096, 0), -ENODATA);
	CHECK_EQ(cache_fill(o, other, size, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, other, size));
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);

	/* 6. A checksum entry damaged on disk while its chunk is cached:
	 *    the verified copy in memory still guards the (intact) data;
	 *    after the last reference the copy is gone and the next open
	 *    catches the damaged entry. */
	t_flip(t_objfile(c, "k", true), cache_meta_csum_off(bs, 1) + 8 * 2 + 1);
	CHECK_EQ(cache_read(o, back, 4096, bs + 2 * 4096), 4096);
	CHECK(!memcmp(back, other + bs + 2 * 4096, 4096));
	cache_obj_put(o);
	o = t_get(c, "k", "v4", size);
	CHECK(o->csc == NULL);
	CHECK_EQ(cache_read(o, back, 4096, bs + 2 * 4096), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 2);
	cache_obj_put(o);

	/* 7. Bounded: a 1 TiB object (sparse) read at 4200 places keeps at
	 *    most CACHE_CSC_SLOTS_MAX chunks, and reads back exact. */
	{
		const uint64_t big = 1ull << 40, step = big / 4200 / bs * bs;

		o = t_get(c, "huge", "v", big);
		for (uint64_t i = 0; i < 4200; i++)
			CHECK_EQ(cache_fill(o, data, bs, i * step), 0);
		cache_drain(c);
		for (uint64_t i = 0; i < 4200; i++) {
			CHECK_EQ(cache_read(o, back, 4096, i * step + 4096), 4096);
			CHECK(!memcmp(back, data + 4096, 4096));
		}
		CHECK(o->csc != NULL);
		CHECK_EQ(o->csc_slots, CACHE_CSC_SLOTS_MAX);
		CHECK_EQ(t_stats(c).corrupt_blocks, 2);
		cache_obj_put(o);
	}
	CHECK_EQ(t_stats(c).errors, 0);
	cache_close(c);
	free(data);
	free(back);
	free(other);
	return 0;
}
