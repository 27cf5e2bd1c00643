/* bench_xxh3_avx2 - XXH_INLINE_ALL with the AVX2 path, compiled with
 * -mavx2 (meson.build); bench_xxh3 calls it only if cpuid says AVX2. */
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

uint64_t bx_inline_avx2(const void *p, size_t len, uint64_t seed);

uint64_t bx_inline_avx2(const void *p, size_t len, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, len, seed);
}
