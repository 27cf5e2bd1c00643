/* cache_inject_test: fault injection: a failing write (ENOSPC) or read (EIO) drops only that object, counts an error, and the cache keeps working. */
#include "cache_helpers.h"

int main(void)
{
	const uint32_t bs = 64 << 10;
	const size_t size = 4 * bs;
	char *data = malloc(size), *back = malloc(size);
	struct cache *c;
	struct cache_obj *a, *b;

	t_pattern(data, size, 9);
	/* Through the environment: the first write fails with ENOSPC. */
	setenv("CACHEGW_INJECT_WRITE_ERROR", "ENOSPC:1", 1);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 0);
	unsetenv("CACHEGW_INJECT_WRITE_ERROR");
	/* The new object's header write fails: no object, one error. */
	CHECK_EQ(cache_obj_get(c, "a", 1, "v", 1, size, &a), -ENOSPC);
	CHECK_EQ(t_stats(c).errors, 1);
	a = t_get(c, "a", "v", size);
	b = t_get(c, "b", "v", size);
	CHECK_EQ(cache_fill(b, data, size, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(b, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	cache_obj_put(a);
	cache_obj_put(b);

	/* A data write fails: that object is dropped, the other one stays. */
	a = t_get(c, "a", "v", size);
	b = t_get(c, "b", "v", size);
	cache_inject_error(c, CACHE_INJECT_WRITE, ENOSPC, 1);
	CHECK_EQ(cache_fill(a, data, size, 0), 0);	/* queued; fails later */
	cache_drain(c);
	CHECK(t_stats(c).errors >= 1);
	CHECK_EQ(cache_read(a, back, size, 0), -ENODATA);
	CHECK_EQ(cache_read(b, back, size, 0), (ssize_t)size);
	/* It keeps working: refill a. */
	CHECK_EQ(cache_fill(a, data, size, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(a, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* A read fails: -EIO, object dropped, counted. */
	{
		uint64_t errs = t_stats(c).errors;

		cache_inject_error(c, CACHE_INJECT_READ, EIO, 1);
		CHECK_EQ(cache_read(a, back, size, 0), -EIO);
		CHECK_EQ(t_stats(c).errors, errs + 1);
		CHECK_EQ(cache_read(a, back, size, 0), -ENODATA);
		CHECK_EQ(cache_read(b, back, size, 0), (ssize_t)size);
	}
	/* Every write failing for a while: fills and drops, never bad data,
	 * and after the disk recovers everything works again. */
	cache_inject_error(c, CACHE_INJECT_WRITE, EIO, -1);
	CHECK_EQ(cache_fill(a, data, size, 0) <= 0, 1);
	cache_drain(c);
	{
		ssize_t n = cache_read(a, back, size, 0);

		CHECK(n == -ENODATA || n == -EIO);
	}
	cache_obj_put(a);	/* broken objects are removed at last put */
	cache_inject_error(c, 0, 0, 0);
	a = t_get(c, "a", "v", size);
	CHECK_EQ(cache_fill(a, data, size, 0), 0);
	cache_drain(c);
	t_check_obj(c, a, data, size);
	cache_obj_put(a);
	cache_obj_put(b);
	cache_close(c);
	free(data);
	free(back);
	return 0;
}
