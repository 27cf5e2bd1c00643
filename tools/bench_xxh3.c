/* bench_xxh3 - throughput of the XXH3-64 variants the cache could use, on
 * this CPU, for the sizes it hashes (a 4 KiB sector, a 64 KiB block):
 *
 *   lib         XXH3_64bits_withSeed from libxxhash (Debian 0.8.1: built
 *               for the x86-64 baseline, SSE2)
 *   dispatch    XXH3_64bits_withSeed_dispatch from the same library: picks
 *               scalar/SSE2/AVX2/AVX512 at run time from cpuid
 *   inline      XXH_INLINE_ALL, compiled here with the default flags (SSE2)
 *   inline-avx2 XXH_INLINE_ALL with XXH_VECTOR=XXH_AVX2 in a function built
 *               for AVX2 (run only if the CPU has it)
 *
 * Prints MB/s (10^6 bytes per second of this thread's CPU time, so that
 * other jobs on a shared machine do not count) per variant and size, best
 * of 5 runs of about 0.2 s each, and checks that all variants give the
 * same hashes.
 *
 *   bench_xxh3 [SECONDS_PER_RUN]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>
#include <xxh_x86dispatch.h>	/* XXH3_64bits_withSeed_dispatch */

#undef XXH3_64bits_withSeed
XXH_PUBLIC_API XXH64_hash_t XXH3_64bits_withSeed(const void *, size_t,
						 XXH64_hash_t);

uint64_t bx_inline(const void *p, size_t len, uint64_t seed);
uint64_t bx_inline_avx2(const void *p, size_t len, uint64_t seed);

typedef uint64_t (*hash_fn)(const void *, size_t, uint64_t);

static uint64_t lib(const void *p, size_t len, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, len, seed);
}

static uint64_t dispatch(const void *p, size_t len, uint64_t seed)
{
	return XXH3_64bits_withSeed_dispatch(p, len, seed);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Hash the whole buffer in len-sized pieces, as a fill does, for secs. */
static double run(hash_fn f, const char *buf, size_t total, size_t len,
		  double secs, uint64_t *sink)
{
	double best = 0;

	for (int r = 0; r < 5; r++) {
		double t0 = now_s(), t;
		uint64_t bytes = 0, x = 0;

		do {
			for (size_t off = 0; off + len <= total; off += len)
				x ^= f(buf + off, len, off / len + 1);
			bytes += total;
			t = now_s() - t0;
		} while (t < secs);
		*sink ^= x;
		if (bytes / t / 1e6 > best)
			best = bytes / t / 1e6;
	}
	return best;
}

int main(int argc, char **argv)
{
	const size_t total = 1u << 20;	/* in L2: the hash, not the memory */
	const size_t sizes[] = { 4096, 65536 };
	double secs = argc > 1 ? atof(argv[1]) : 0.2;
	struct { const char *name; hash_fn f; int ok; } v[] = {
		{ "lib", lib, 1 },
		{ "dispatch", dispatch, 1 },
		{ "inline", bx_inline, 1 },
		{ "inline-avx2", bx_inline_avx2, 0 },
	};
	char *buf = malloc(total);
	uint64_t sink = 0;

	if (!buf || secs <= 0) {
		fprintf(stderr, "usage: bench_xxh3 [SECONDS_PER_RUN]\n");
		return 2;
	}
	for (size_t i = 0; i < total; i++)
		buf[i] = (char)(i * 2654435761u >> 13);
	__builtin_cpu_init();
	v[3].ok = __builtin_cpu_supports("avx2");
	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		if (v[k].ok && v[k].f(buf, 4096, 7) != lib(buf, 4096, 7)) {
			fprintf(stderr, "bench_xxh3: %s gives another hash\n", v[k].name);
			return 1;
		}
	}
	printf("variant      size   MB/s\n");
	for (size_t s = 0; s < 2; s++)
		for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
			if (!v[k].ok) {
				printf("%-11s %5zuK  - (no AVX2)\n", v[k].name, sizes[s] >> 10);
				continue;
			}
			printf("%-11s %5zuK  %.0f\n", v[k].name, sizes[s] >> 10,
			       run(v[k].f, buf, total, sizes[s], secs, &sink));
		}
	return sink == 42;	/* keeps the hashes from being optimised out */
}
