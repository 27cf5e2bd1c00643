/* cache_sector_test: checksums per 4 KiB sector (format 2): a read verifies only the sectors it returns, a damaged sector fails the reads that touch it and drops its whole block, a partial last sector verifies, and big blocks (1 MiB: 256 checksums a block) survive a reopen; the presence words of 32768 blocks share one page ahead of their checksums (opening an object reads that page, not the checksums). */
#include "cache_helpers.h"

static void one_size(uint32_t bs, enum cache_write_mode mode)
{
	const uint32_t spb = bs / 4096;
	const size_t size = 3 * (size_t)bs + 5000;	/* partial last sector */
	char *data = malloc(size), *back = malloc(size);
	struct cache *c;
	struct cache_obj *o;

	t_pattern(data, size, bs / 4096);
	c = t_open(t_path(bs == 65536 ? "c64k" : "c1m"), CACHE_OPEN_OWNER, mode,
		   bs, 0);
	o = t_get(c, "k", "v", size);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	cache_obj_put(o);
	cache_close(c);

	/* 1. Reopen: presence and every checksum come back from disk. */
	c = t_open(t_path(bs == 65536 ? "c64k" : "c1m"), CACHE_OPEN_OWNER, mode,
		   0, 0);
	o = t_get(c, "k", "v", size);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	/* The partial last sector, alone and unaligned. */
	CHECK_EQ(cache_read(o, back, 100, size - 90), 90);
	CHECK(!memcmp(back, data + size - 90, 90));

	/* 2. A flipped byte in sector spb-1 of block 1: reads of other
	 *    sectors of that block still hit, since they do not read it. */
	t_flip(t_objfile(c, "k", false), (off_t)bs + (spb - 1) * 4096 + 123);
	CHECK_EQ(cache_read(o, back, 4096, (uint64_t)bs + 2 * 4096), 4096);
	CHECK(!memcmp(back, data + bs + 2 * 4096, 4096));
	CHECK_EQ(cache_read(o, back, 10, (uint64_t)bs + 4090), 10);	/* 2 sectors */
	CHECK(!memcmp(back, data + bs + 4090, 10));
	CHECK_EQ(t_stats(c).corrupt_blocks, 0);
	/* 3. A read that touches it fails, once counted, and drops the
	 *    whole block (presence is per block). */
	CHECK_EQ(cache_read(o, back, 200, (uint64_t)bs + (spb - 1) * 4096 + 50),
		 -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);
	CHECK_EQ(cache_read(o, back, 4096, (uint64_t)bs + 2 * 4096), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 1);
	CHECK_EQ(cache_read(o, back, bs, 0), (ssize_t)bs);
	CHECK_EQ(cache_read(o, back, bs, 2 * (uint64_t)bs), (ssize_t)bs);
	/* 4. A refill repairs it. */
	CHECK_EQ(cache_fill(o, data + bs, bs, bs), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* 5. A checksum entry of a middle sector damaged: only reads of that
	 *    sector fail. (Once the object is reopened: while it is open, a
	 *    verified copy of the entry is kept in memory, cache_csc_test.) */
	t_flip(t_objfile(c, "k", true), cache_meta_csum_off(bs, 2) + 8 * 1 + 5);
	cache_obj_put(o);
	o = t_get(c, "k", "v", size);
	CHECK_EQ(cache_read(o, back, 4096, 2 * (uint64_t)bs), 4096);
	CHECK_EQ(cache_read(o, back, 4096, 2 * (uint64_t)bs + 4096), -ENODATA);
	t_finish(c, o, 2);
	free(data);
	free(back);
}

int main(void)
{
	/* The layout: presence words side by side, then the checksums. */
	CHECK_EQ(cache_meta_word_off(65536, 0), 512);
	CHECK_EQ(cache_meta_word_off(65536, 64), 520);
	CHECK_EQ(cache_meta_word_off(65536, 32767), 512 + 4088);
	CHECK_EQ(cache_meta_csum_off(65536, 0), 512 + 4096);
	CHECK_EQ(cache_meta_csum_off(65536, 1), 512 + 4096 + 16 * 8);
	CHECK_EQ(cache_meta_word_off(65536, 32768),
		 512 + 4096 + 32768 * 16 * 8);
	CHECK_EQ(cache_meta_csum_off(4096, 32768),
		 512 + 2 * 4096 + 32768 * 8);
	one_size(64 << 10, CACHE_WRITE_DIRECT);
	one_size(1 << 20, CACHE_WRITE_BUFFERED);
	return 0;
}
