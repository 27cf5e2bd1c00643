/* cache_meta_test: metadata round trip (key, coherency blob, size, presence) across close/reopen, and coherency checks. */
#include "cache_helpers.h"

int main(void)
{
	const uint32_t bs = 64 << 10;
	const size_t size = 3 * bs + 1000;	/* partial last block */
	char *data = malloc(size), *back = malloc(size);
	struct cache_obj_info info;
	struct meta_hdr h;
	struct cache *c;
	struct cache_obj *o;
	char name[CACHE_NAME_LEN + 1];
	int fd;

	t_pattern(data, size, 1);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, bs, 0);
	CHECK_EQ(cache_block_size(c), bs);
	o = t_get(c, "origin:/export/fh-0001", "mtime=1;size=197608", size);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	cache_obj_put(o);
	cache_close(c);

	/* The header on disk parses and carries what we stored. */
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, 0, 0);
	CHECK_EQ(cache_block_size(c), bs);	/* an existing cache keeps its own */
	fd = open(t_objfile(c, "origin:/export/fh-0001", true), O_RDONLY);
	CHECK(fd >= 0);
	CHECK(pread(fd, &h, sizeof(h), 0) == sizeof(h));
	close(fd);
	CHECK_EQ(cache_meta_check(&h, bs), 0);
	CHECK_EQ(h.size, size);
	CHECK_EQ(h.keylen, strlen("origin:/export/fh-0001"));
	CHECK(!memcmp(h.coh, "mtime=1;size=197608", h.cohlen));
	CHECK(h.last_use_ns > 0);

	/* Inspection API agrees. */
	cache_obj_name("origin:/export/fh-0001", 22, name, sizeof(name));
	CHECK_EQ(cache_obj_info(c, name, &info), 0);
	CHECK(!info.damaged);
	CHECK_EQ(info.size, size);
	CHECK_EQ(info.blocks_total, 4);
	CHECK_EQ(info.blocks_present, 4);
	CHECK_EQ(info.cached_bytes, size);
	CHECK_EQ(info.cohlen, 19);
	CHECK(info.alloc_bytes >= size);

	/* Same coherency: data reused, exact. */
	o = t_get(c, "origin:/export/fh-0001", "mtime=1;size=197608", size);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	CHECK_EQ(cache_read(o, back, 10, size - 5), 5);	/* clipped */
	CHECK_EQ(cache_obj_check(o, "mtime=1;size=197608", 19, size), 0);
	/* update keeps whole blocks below the new size, drops the old tail. */
	CHECK_EQ(cache_obj_set_coh(o, "mtime=2", 7, size + bs), 0);
	CHECK_EQ(cache_read(o, back, 3 * bs, 0), (ssize_t)(3 * bs));
	CHECK(!memcmp(back, data, 3 * bs));
	CHECK_EQ(cache_read(o, back, 100, 3 * bs), -ENODATA);
	/* A changed blob drops everything. */
	CHECK_EQ(cache_obj_check(o, "mtime=3", 7, size), 1);
	CHECK_EQ(cache_read(o, back, bs, 0), -ENODATA);
	cache_obj_put(o);
	/* A get with another blob also drops. */
	o = t_get(c, "origin:/export/fh-0001", "mtime=3", size);
	CHECK_EQ(cache_fill(o, data, bs, 0), 0);
	cache_drain(c);
	cache_obj_put(o);
	o = t_get(c, "origin:/export/fh-0001", "mtime=4", size);
	CHECK_EQ(cache_read(o, back, bs, 0), -ENODATA);
	cache_obj_put(o);
	/* Write-through of the caller's own writes: set_coh, then cache_write
	 * at odd offsets; whole blocks and merged edges read back exact. */
	o = t_get(c, "origin:/export/fh-0001", "mtime=4", size);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	memcpy(data + bs - 10, "0123456789ABCDEFGHIJ", 20);	/* spans 0|1 */
	memcpy(data + 2 * bs + 5, "xyz", 3);			/* inside 2 */
	CHECK_EQ(cache_obj_set_coh(o, "mtime=5", 7, size), 0);
	CHECK_EQ(cache_write(o, data + bs - 10, 20, bs - 10), 0);
	CHECK_EQ(cache_write(o, data + 2 * bs + 5, 3, 2 * bs + 5), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	/* An edge without a cached copy is dropped, never left stale. */
	CHECK_EQ(cache_drop_range(o, 0, 1), 0);
	memcpy(data + 100, "qq", 2);
	CHECK_EQ(cache_write(o, data + 100, 2, 100), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, bs, 0), -ENODATA);
	CHECK_EQ(cache_read(o, back, size - bs, bs), (ssize_t)(size - bs));
	CHECK(!memcmp(back, data + bs, size - bs));
	cache_obj_put(o);
	CHECK_EQ(t_stats(c).corrupt_blocks, 0);
	CHECK_EQ(t_stats(c).objects, 1);
	cache_close(c);
	free(data);
	free(back);
	return 0;
}
