/* fuzz_cache_meta: the input is an object's metadata file,
 * cache_dir/objects/XX/NAME.meta (cache/meta.c: header, presence bits,
 * a checksum per 4 KiB), beside its data file (FZ_OBJ_SIZE bytes of a
 * pattern). The object is looked at by name (cachegw-inspect: info,
 * verify), got by its key as the gateway gets it, read whole, verified
 * with repair, and evicted. Whatever the metadata says, a read returns
 * only the data file's own bytes (the checksums guard what is served),
 * never anything else. */
#include <errno.h>

#include "fuzz.h"
#include "cache_i.h"

#define READ_MAX (4 * FZ_OBJ_BS)

static struct cache *c;
static char name[CACHE_NAME_LEN + 1];
static char meta_path[64], data_path[64];
static uint8_t *data_file, *buf;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As meta.c seals them: the header (cache_meta_seal), and every other
 * time the checksums of the blocks the data file holds, for the header's
 * salt and size (cache_block_csums), where the file has room for them:
 * headers of any size, salt or identity that check, over presence bits
 * and checksums that may. Every other sealed header gets a size of at
 * most 16 blocks: a size up to the cache's limit (1 TiB) is as good a
 * header, but its 16 million blocks make each run ~30 ms. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	static uint8_t block[FZ_OBJ_BS];
	uint64_t cs[FZ_OBJ_BS / CACHE_SECTOR];
	struct meta_hdr h;

	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 4 == 0 || size < sizeof(h))
		return size;
	memcpy(&h, data, sizeof(h));
	if (seed / 8 % 2)
		h.size %= 16 * FZ_OBJ_BS + 1;
	cache_meta_seal(&h);
	memcpy(data, &h, sizeof(h));
	if (seed % 8 < 4 || h.block_size != FZ_OBJ_BS)
		return size;
	for (uint64_t blk = 0; blk * FZ_OBJ_BS < h.size && blk < 8; blk++) {
		uint64_t start = blk * FZ_OBJ_BS, off;
		size_t len = h.size - start < FZ_OBJ_BS ?
			     (size_t)(h.size - start) : FZ_OBJ_BS;

		off = (uint64_t)cache_meta_csum_off(FZ_OBJ_BS, blk);
		if (off + sizeof(cs) > size)
			break;
		for (size_t i = 0; i < len; i++)
			block[i] = fz_obj_byte(start + i);
		cache_block_csums(h.salt, FZ_OBJ_BS, blk, block, len, cs);
		memcpy(data + off, cs, sizeof(cs));
	}
	return size;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct cache_opts o = {
		.dir = fz_dir(),
		.mode = CACHE_OPEN_OWNER,
		.block_size = FZ_OBJ_BS,
		.write_mode = CACHE_WRITE_BUFFERED,
	};
	char err[512];

	(void)argc;
	(void)argv;
	if (cache_open(&o, &c, err, sizeof(err))) {
		fprintf(stderr, "cache_open: %s\n", err);
		abort();
	}
	FZ_CHECK(cache_obj_name(FZ_OBJ_KEY, strlen(FZ_OBJ_KEY), name,
				sizeof(name)) == 0);
	snprintf(meta_path, sizeof(meta_path), "objects/%.2s/%s.meta", name,
		 name);
	snprintf(data_path, sizeof(data_path), "objects/%.2s/%s", name, name);
	mkdir(fz_path("objects"), 0700);
	{
		char d[32];

		snprintf(d, sizeof(d), "objects/%.2s", name);
		mkdir(fz_path(d), 0700);
	}
	data_file = malloc(FZ_OBJ_SIZE);
	buf = aligned_alloc(4096, READ_MAX);
	FZ_CHECK(data_file && buf);
	for (uint64_t i = 0; i < FZ_OBJ_SIZE; i++)
		data_file[i] = fz_obj_byte(i);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cache_obj_info info;
	struct cache_obj *o;
	uint64_t bad = 0;

	fz_write(meta_path, data, size);
	fz_write(data_path, data_file, FZ_OBJ_SIZE);

	/* 1. By name, as cachegw-inspect looks at it. */
	if (cache_obj_info(c, name, &info) == 0 && !info.damaged) {
		FZ_CHECK(info.keylen <= CACHE_KEY_MAX &&
			 info.cohlen <= CACHE_COH_MAX);
		FZ_CHECK(info.blocks_present <= info.blocks_total);
		FZ_CHECK(info.cached_bytes <= info.size);
		(void)cache_verify(c, name, 0, &bad);

		/* 2. By its key, as the gateway gets it (its coherency data
		 * and size as kept), and read: only the data file's bytes. */
		if (cache_obj_get(c, FZ_OBJ_KEY, strlen(FZ_OBJ_KEY), info.coh,
				  info.cohlen, info.size, &o) == 0) {
			ssize_t n = cache_read(o, buf, READ_MAX, 0);

			if (n > 0) {
				FZ_CHECK((uint64_t)n <= info.size);
				for (ssize_t i = 0; i < n; i++)
					FZ_CHECK(buf[i] == fz_obj_byte((uint64_t)i));
			}
			n = cache_read(o, buf, 4096, FZ_OBJ_BS + 4096);
			for (ssize_t i = 0; i < n; i++)
				FZ_CHECK(buf[i] == fz_obj_byte(FZ_OBJ_BS + 4096 +
							       (uint64_t)i));
			(void)cache_present(o, 0, 0);
			(void)cache_next_absent(o, 0, info.size);
			(void)cache_next_present(o, 0, info.size);
			cache_obj_put(o);
		}
	}
	/* 3. Verified with repair (damaged blocks dropped, damaged
	 * metadata removed), then evicted: the next input starts afresh. */
	(void)cache_verify(c, name, 1, &bad);
	(void)cache_evict(c, name);
	return 0;
}
