/* cache_ownwrite_test: cache_write (the gateway's own writes) never waits for a disk that is behind. With fills in flight past its budget it takes nothing, returns -EAGAIN, counts the write in writes_skipped, and leaves the range a miss: the bytes cached before it are dropped, never served. With the disk caught up it caches the write. */
#include "cache_helpers.h"

#define MiB (1u << 20)
#define BIG (48 * MiB)		/* a fill that keeps the disk busy */
#define TRIES 5

int main(void)
{
	const uint32_t bs = 64 << 10;
	const size_t wlen = MiB, osize = 8 * MiB;
	char *old = malloc(wlen), *new = malloc(wlen), *back = malloc(wlen);
	char *big = malloc(BIG);
	struct cache_obj *o, *busy;
	struct cache_stats st;
	struct cache *c;
	int ret = 0, tries;

	CHECK(old && new && back && big);
	t_pattern(old, wlen, 1);
	t_pattern(new, wlen, 2);
	t_pattern(big, BIG, 3);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
	o = t_get(c, "written", "v1", osize);
	busy = t_get(c, "busy", "v1", BIG);

	/* 1. An idle disk: the write is cached and read back. */
	CHECK_EQ(cache_write(o, old, wlen, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, wlen, 0), (ssize_t)wlen);
	CHECK(!memcmp(back, old, wlen));
	CHECK_EQ(t_stats(c).writes_skipped, 0);

	/* 2. A disk behind: BIG bytes of fills just queued. The write over
	 *    the cached range is not taken; its old bytes must be gone. The
	 *    disk may have caught up before the write came (a fast device):
	 *    then it is cached, and the next try queues the fill again. */
	for (tries = 0; tries < TRIES; tries++) {
		cache_obj_invalidate(busy);
		CHECK_EQ(cache_fill(busy, big, BIG, 0), 0);
		ret = cache_write(o, new, wlen, 0);
		if (ret == -EAGAIN)
			break;
		CHECK_EQ(ret, 0);
		cache_drain(c);
		CHECK_EQ(cache_read(o, back, wlen, 0), (ssize_t)wlen);
		CHECK(!memcmp(back, new, wlen));
		/* Back to the old bytes for the next try. */
		CHECK_EQ(cache_write(o, old, wlen, 0), 0);
		cache_drain(c);
	}
	fprintf(stderr, "cache_ownwrite_test: skipped after %d tries\n",
		tries + 1);
	CHECK_EQ(ret, -EAGAIN);
	st = t_stats(c);
	CHECK_EQ(st.writes_skipped, 1);
	CHECK_EQ(st.writes_skipped_bytes, wlen);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, wlen, 0), -ENODATA);
	CHECK_EQ(cache_read(o, back, bs, wlen - bs), -ENODATA);
	/* The busy fill itself was whole. */
	for (size_t off = 0; off < BIG; off += wlen) {
		CHECK_EQ(cache_read(busy, back, wlen, off), (ssize_t)wlen);
		CHECK(!memcmp(back, big + off, wlen));
	}

	/* 3. Caught up: the same write is cached again. */
	CHECK_EQ(cache_write(o, new, wlen, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, wlen, 0), (ssize_t)wlen);
	CHECK(!memcmp(back, new, wlen));
	CHECK_EQ(t_stats(c).writes_skipped, 1);
	cache_obj_put(busy);
	t_finish(c, o, 0);
	free(old);
	free(new);
	free(back);
	free(big);
	return 0;
}
