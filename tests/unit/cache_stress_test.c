/* cache_stress_test: threads filling, reading, invalidating and culling the same objects at once: reads are exact or -ENODATA, counters stay sane, no corruption is reported. */
#include <pthread.h>
#include <time.h>
#include "cache_helpers.h"

#define NKEYS 8
#define NTHREADS 4
static const uint32_t bs = 32 << 10;
static const size_t osize = 8 * (32 << 10) + 999;
static struct cache *c;
static char *datas[NKEYS];
static int stop;			/* __atomic: read by the workers */
static int failures;

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char *back = malloc(osize);

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int k = rand_r(&seed) % NKEYS, op = rand_r(&seed) % 100;
		char key[8];
		struct cache_obj *o;
		uint64_t b = rand_r(&seed) % 9, off = b * bs;
		size_t len = b == 8 ? osize - off : bs;

		snprintf(key, sizeof(key), "s%d", k);
		if (cache_obj_get(c, key, strlen(key), "v", 1, osize, &o))
			continue;	/* -ENOSPC under the cap is fine */
		if (op < 40) {
			cache_fill(o, datas[k] + off, len, off);
		} else if (op < 45) {
			cache_fill(o, datas[k], osize, 0);
		} else if (op < 47) {
			cache_obj_invalidate(o);
		} else {
			ssize_t n = cache_read(o, back, len, off);

			if (n != -ENODATA && (n != (ssize_t)len ||
					      memcmp(back, datas[k] + off, len))) {
				fprintf(stderr, "bad read %s blk %llu: %zd\n", key,
					(unsigned long long)b, n);
				__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
			}
		}
		cache_obj_put(o);
	}
	free(back);
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];
	struct timespec ts = { 1, 500 * 1000 * 1000 };
	struct cache_stats st;

	for (int k = 0; k < NKEYS; k++) {
		datas[k] = malloc(osize);
		t_pattern(datas[k], osize, 100 + k);
	}
	/* A cap of about three objects keeps culling busy. */
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, bs, 1u << 20);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	nanosleep(&ts, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	cache_drain(c);
	st = t_stats(c);
	fprintf(stderr, "reads %llu hits %llu fills %llu culled %llu used %llu\n",
		(unsigned long long)st.reads, (unsigned long long)st.hit_bytes,
		(unsigned long long)st.fills, (unsigned long long)st.culled_objects,
		(unsigned long long)st.used_bytes);
	CHECK_EQ(failures, 0);
	CHECK(st.hit_bytes > 0);
	CHECK(st.used_bytes <= 1u << 20);
	CHECK_EQ(st.errors, 0);
	CHECK_EQ(st.corrupt_blocks, 0);
	cache_close(c);
	for (int k = 0; k < NKEYS; k++)
		free(datas[k]);
	return 0;
}
