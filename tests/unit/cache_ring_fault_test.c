/* cache_ring_fault_test: an error from the fill ring's completion wait or submit fails the fills in flight (their objects dropped), never hangs drain or close, and the cache keeps filling other objects. */
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "cache_helpers.h"

#define BOUND_S 20	/* drain/close must return well within this */
#define NMORE 6		/* fills queued behind the one that fails */

static void on_alarm(int sig)
{
	static const char msg[] = "cache_ring_fault_test: hung (drain or close did not return)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

/* Fill o with data, drain, and expect it back. */
static void fill_and_check(struct cache *c, struct cache_obj *o,
			   const char *data, char *back, size_t size)
{
	alarm(BOUND_S);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	alarm(0);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
}

static void run(enum cache_write_mode wm, const char *dir)
{
	const uint32_t bs = 64 << 10;
	const size_t size = 8 * bs;
	char *data = malloc(size), *back = malloc(size);
	struct cache *c;
	struct cache_obj *a, *b, *d, *more[NMORE];
	uint64_t errs;
	ssize_t n;

	t_pattern(data, size, 3 + wm);
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, wm, bs, 0);
	a = t_get(c, "a", "v", size);
	b = t_get(c, "b", "v", size);
	d = t_get(c, "d", "v", size);
	fill_and_check(c, b, data, back, size);

	/* 1. A transient EINTR/EAGAIN from the wait is retried: the fill
	 *    completes and is kept. */
	cache_inject_error(c, CACHE_INJECT_RING_WAIT, EINTR, 1);
	fill_and_check(c, a, data, back, size);
	cache_inject_error(c, CACHE_INJECT_RING_WAIT, EAGAIN, 1);
	CHECK_EQ(cache_fill(d, data, size, 0), 0);
	alarm(BOUND_S);
	cache_drain(c);
	alarm(0);
	CHECK_EQ(cache_read(d, back, size, 0), (ssize_t)size);
	CHECK_EQ(t_stats(c).errors, 0);

	/* 2. A failed submit: that fill fails (object dropped), the next
	 *    one lands. */
	cache_obj_invalidate(a);
	errs = t_stats(c).errors;
	cache_inject_error(c, CACHE_INJECT_RING_SUBMIT, EIO, 1);
	CHECK_EQ(cache_fill(a, data, size, 0), 0);
	alarm(BOUND_S);
	cache_drain(c);
	alarm(0);
	CHECK(t_stats(c).errors > errs);
	CHECK_EQ(cache_read(a, back, size, 0), -ENODATA);
	fill_and_check(c, a, data, back, size);

	/* 3. A real error: the fill whose completion it hid fails, its
	 *    object is dropped, drain returns. */
	cache_obj_invalidate(a);
	errs = t_stats(c).errors;
	for (int i = 0; i < NMORE; i++) {
		char key[8];

		snprintf(key, sizeof(key), "m%d", i);
		more[i] = t_get(c, key, "v", size);
	}
	cache_inject_error(c, CACHE_INJECT_RING_WAIT, EIO, 1);
	CHECK_EQ(cache_fill(a, data, size, 0), 0);
	/* Others queued behind it: each lands or is dropped, whichever side
	 * of the failure it falls on. */
	for (int i = 0; i < NMORE; i++)
		CHECK_EQ(cache_fill(more[i], data, size, 0), 0);
	alarm(BOUND_S);
	cache_drain(c);
	alarm(0);
	CHECK(t_stats(c).errors > errs);
	CHECK_EQ(cache_read(a, back, size, 0), -ENODATA);
	for (int i = 0; i < NMORE; i++) {
		n = cache_read(more[i], back, size, 0);
		CHECK(n == -ENODATA ||
		      (n == (ssize_t)size && !memcmp(back, data, size)));
		cache_obj_put(more[i]);
	}
	/* What was cached before is still served. */
	CHECK_EQ(cache_read(b, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* 4. The cache keeps working: fills of other objects and of the
	 *    dropped one land and verify. */
	cache_obj_invalidate(d);
	fill_and_check(c, d, data, back, size);
	fill_and_check(c, a, data, back, size);

	/* 5. Many fills queued at once after it: all land and verify. */
	cache_obj_invalidate(a);
	cache_obj_invalidate(d);
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(cache_fill(a, data + i * bs, bs, (uint64_t)i * bs), 0);
		CHECK_EQ(cache_fill(d, data + i * bs, bs, (uint64_t)i * bs), 0);
	}
	alarm(BOUND_S);
	cache_drain(c);
	alarm(0);
	n = cache_read(a, back, size, 0);
	CHECK_EQ(n, (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	n = cache_read(d, back, size, 0);
	CHECK_EQ(n, (ssize_t)size);
	CHECK(!memcmp(back, data, size));

	/* 6. Close returns. */
	CHECK_EQ(t_stats(c).corrupt_blocks, 0);
	cache_obj_put(a);
	cache_obj_put(b);
	cache_obj_put(d);
	alarm(BOUND_S);
	cache_close(c);
	alarm(0);
	free(data);
	free(back);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	run(CACHE_WRITE_DIRECT, "direct");
	run(CACHE_WRITE_BUFFERED, "buffered");
	return 0;
}
