/* cache_crash_test: a crash between data write and mark (data without mark, garbage mark, stale mark, SIGKILL mid-fill) leaves blocks absent or failing their checksum, never bad data. */
#include <signal.h>
#include <sys/wait.h>
#include "cache_helpers.h"

static const uint32_t bs = 32 << 10;

/* Set the presence bit of blk and store csum, as a torn mark would. */
static void forge_mark(const char *meta, uint64_t blk, uint64_t csum)
{
	uint64_t w = 0;
	int fd = open(meta, O_RDWR);

	CHECK(fd >= 0);
	CHECK(pwrite(fd, &csum, 8, cache_meta_csum_off(bs, blk)) == 8);
	if (pread(fd, &w, 8, cache_meta_word_off(bs, blk)) != 8)
		w = 0;
	w |= 1ull << (blk % 64);
	CHECK(pwrite(fd, &w, 8, cache_meta_word_off(bs, blk)) == 8);
	close(fd);
}

int main(void)
{
	const size_t size = 8 * bs;
	char *data = malloc(size), *other = malloc(size), *back = malloc(size);
	struct cache *c;
	struct cache_obj *o;
	uint64_t stale;
	int fd;

	t_pattern(data, size, 6);
	t_pattern(other, size, 7);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, bs, 0);
	o = t_get(c, "k", "v", size);
	CHECK_EQ(cache_fill(o, data, bs, 0), 0);	/* block 0: complete */
	cache_drain(c);
	cache_obj_put(o);
	cache_close(c);

	/* 1. Data written, mark never written (crash in between). */
	fd = open(t_path("c/objects"), O_RDONLY);	/* just a sanity probe */
	CHECK(fd >= 0);
	close(fd);
	c = t_open(t_path("c"), CACHE_OPEN_INSPECT, CACHE_WRITE_BUFFERED, 0, 0);
	t_poke(t_objfile(c, "k", false), 1 * bs, data + bs, bs);
	/* 2. Mark of garbage for block 2 whose data is also written. */
	t_poke(t_objfile(c, "k", false), 2 * bs, data + 2 * bs, bs);
	forge_mark(t_objfile(c, "k", true), 2, 0x0123456789abcdefull);
	/* 3. Mark present, no data ever written (hole). */
	forge_mark(t_objfile(c, "k", true), 3, 0);
	cache_close(c);

	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, 0, 0);
	o = t_get(c, "k", "v", size);
	CHECK_EQ(cache_read(o, back, bs, 0), (ssize_t)bs);	/* complete one */
	CHECK(!memcmp(back, data, bs));
	CHECK_EQ(cache_read(o, back, bs, bs), -ENODATA);	/* absent */
	CHECK_EQ(cache_read(o, back, bs, 2 * bs), -ENODATA);	/* fails csum */
	CHECK_EQ(cache_read(o, back, bs, 3 * bs), -ENODATA);
	CHECK_EQ(t_stats(c).corrupt_blocks, 2);

	/* 4. A stale mark from an older incarnation: a valid checksum of the
	 *    old bytes, restored after invalidation, next to new bytes. */
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	fd = open(t_objfile(c, "k", true), O_RDONLY);
	CHECK(pread(fd, &stale, 8, cache_meta_csum_off(bs, 4)) == 8);
	close(fd);
	CHECK_EQ(cache_obj_check(o, "v2", 2, size), 1);
	CHECK_EQ(cache_fill(o, other, 4 * bs, 0), 0);	/* new bytes, blocks 0-3 */
	cache_drain(c);
	t_poke(t_objfile(c, "k", false), 4 * bs, data + 4 * bs, bs);
	forge_mark(t_objfile(c, "k", true), 4, stale);
	cache_obj_put(o);
	o = t_get(c, "k", "v2", size);	/* reopen: reloads the bitmap */
	CHECK_EQ(cache_read(o, back, 4 * bs, 0), (ssize_t)(4 * bs));
	CHECK(!memcmp(back, other, 4 * bs));
	CHECK_EQ(cache_read(o, back, bs, 4 * bs), -ENODATA);
	/* The same stale entry moved to another index cannot verify either. */
	forge_mark(t_objfile(c, "k", true), 5, stale);
	cache_obj_put(o);
	o = t_get(c, "k", "v2", size);
	CHECK_EQ(cache_read(o, back, bs, 5 * bs), -ENODATA);
	cache_obj_put(o);
	cache_close(c);

	/* 5. SIGKILL in the middle of fills; afterwards only exact bytes. */
	{
		pid_t pid = fork();

		CHECK(pid >= 0);
		if (pid == 0) {
			struct cache *cc = t_open(t_path("c2"), CACHE_OPEN_OWNER,
						  CACHE_WRITE_DIRECT, bs, 0);
			char kk[16];

			for (int i = 0; ; i++) {
				struct cache_obj *oo;

				snprintf(kk, sizeof(kk), "f%d", i % 20);
				if (cache_obj_get(cc, kk, strlen(kk), "v", 1, size, &oo))
					_exit(3);
				cache_fill(oo, data, size, 0);
				cache_obj_put(oo);
				if (i == 200)
					kill(getpid(), SIGKILL);
			}
		}
		int st;

		waitpid(pid, &st, 0);
		CHECK(WIFSIGNALED(st));
		c = t_open(t_path("c2"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, 0, 0);
		for (int i = 0; i < 20; i++) {
			char kk[16];

			snprintf(kk, sizeof(kk), "f%d", i);
			o = t_get(c, kk, "v", size);
			for (uint64_t b = 0; b < 8; b++) {
				ssize_t n = cache_read(o, back, bs, b * bs);

				CHECK(n == -ENODATA || n == (ssize_t)bs);
				if (n > 0)
					CHECK(!memcmp(back, data + b * bs, bs));
			}
			cache_obj_put(o);
		}
		cache_close(c);
	}
	free(data);
	free(other);
	free(back);
	return 0;
}
