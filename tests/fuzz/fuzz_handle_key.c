/* fuzz_handle_key: the input is cache_dir/handle-key, the secret the
 * node-ids' generations are made from (gateway/handlekey.c). It is loaded
 * as at a start (a damaged one is made anew); loaded again, the secret and
 * the cutover are the same: a restart gives every handle its generation
 * back. */
#include <endian.h>
#include <errno.h>

#include <xxhash.h>

#include "fuzz.h"
#include "gw_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As handlekey.c seals it: XXH3-64 of the first 24 bytes, little-endian,
 * after them. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	uint64_t h;

	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 4 == 0 || size < 32)
		return size;
	h = htole64(XXH3_64bits(data, 24));
	memcpy(data + 24, &h, 8);
	return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw gw = { 0 }, again = { 0 };

	fz_write("handle-key", data, size);
	if (gw_handle_key_load(&gw, fz_dir(), 1000))
		return 0;
	FZ_CHECK(gw_handle_key_load(&again, fz_dir(), 2000) == 0);
	FZ_CHECK(again.handle_key == gw.handle_key);
	FZ_CHECK(again.handle_cutover == gw.handle_cutover);
	for (uint64_t id = 2; id < 10; id++)
		FZ_CHECK(gw_node_generation(&gw, id) ==
			 gw_node_generation(&again, id));
	return 0;
}
