/* fuzz_cache_conf: the input is cache_dir/cache.conf, the cache's header
 * (cache/dir.c: format version and block size). The cache is opened as
 * cachegw-inspect opens it (read-only: the same parse as the gateway's,
 * without the lock and the io_uring): a cache it accepts has a block size
 * the cache can use. */
#include <errno.h>

#include "fuzz.h"
#include "cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cache_opts o = { .dir = fz_dir(), .mode = CACHE_OPEN_INSPECT };
	struct cache *c;
	char err[512];

	fz_write("cache.conf", data, size);
	if (cache_open(&o, &c, err, sizeof(err)))
		return 0;
	{
		uint32_t bs = cache_block_size(c);

		FZ_CHECK(bs >= CACHE_BLOCK_MIN && bs <= CACHE_BLOCK_MAX &&
			 !(bs & (bs - 1)));
	}
	cache_close(c);
	return 0;
}
