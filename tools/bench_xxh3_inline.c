/* bench_xxh3_inline - the XXH_INLINE_ALL variants of bench_xxh3, in a file
 * of their own: XXH_INLINE_ALL defines every xxhash symbol static here. */
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t bx_inline(const void *p, size_t len, uint64_t seed);

uint64_t bx_inline(const void *p, size_t len, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, len, seed);
}
