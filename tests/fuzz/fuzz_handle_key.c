/* fuzz_handle_key: the input is cache_dir/handle-key, the key the
 * node-ids' generations are made from (gateway/inode/handlekey.c), in
 * either format (CGWHKEY2, or an older CGWHKEY1 that a start rewrites).
 * It is loaded as at a start (a damaged one is made anew); loaded again,
 * the key and the cutovers are the same: a restart gives every handle its
 * generation back. */
#include <endian.h>
#include <errno.h>

#include <xxhash.h>

#include "fuzz.h"
#include "inode_i.h"

#define KEY1_LEN 32
#define KEY2_LEN 56

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As handlekey.c seals it: XXH3-64 of the bytes before the last 8,
 * little-endian, after them; a file of either format's length only (the
 * loader takes no other). */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	size_t len;
	uint64_t h;

	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 4 == 0 || size < KEY1_LEN)
		return size;
	len = size >= KEY2_LEN ? KEY2_LEN : KEY1_LEN;
	h = htole64(XXH3_64bits(data, len - 8));
	memcpy(data + len - 8, &h, 8);
	return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw gw = { 0 }, again = { 0 };

	fz_write("handle-key", data, size);
	if (gw_handle_key_load(&gw, fz_dir(), 1000))
		return 0;
	FZ_CHECK(gw_handle_key_load(&again, fz_dir(), 2000) == 0);
	FZ_CHECK(!memcmp(again.hkey.key, gw.hkey.key, GW_HANDLE_KEY_LEN));
	FZ_CHECK(again.hkey.cutover == gw.hkey.cutover);
	FZ_CHECK(again.hkey.old_seed == gw.hkey.old_seed);
	FZ_CHECK(again.hkey.old_cutover == gw.hkey.old_cutover);
	for (uint64_t id = 2; id < 10; id++)
		FZ_CHECK(gw_node_generation(&gw, id) ==
			 gw_node_generation(&again, id));
	return 0;
}
