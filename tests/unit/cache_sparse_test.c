/* cache_sparse_test: blocks that arrive as zeros are stored as holes (allocated bytes ~ the non-zero data only, in all four write modes, through cache_fill and cache_fill_ref; cache_size counts them so), read back exactly and verify, and a zero block over old data reads zeros. */
#include <sys/stat.h>

#include "cache_helpers.h"

#define BS (64u << 10)
#define NBLK 64u
#define SIZE ((size_t)NBLK * BS + 1000)	/* a short last block */

static const unsigned data_blocks[] = { 3, 10, 11, 40 };
#define NDATA (sizeof(data_blocks) / sizeof(data_blocks[0]))

static int releases;

static void on_release(void *arg)
{
	(void)arg;
	releases++;
}

static uint64_t data_alloc(struct cache *c, const char *key)
{
	struct stat st;

	CHECK_EQ(stat(t_objfile(c, key, false), &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/* Zeros except data_blocks[] (pattern) and a few bytes of block 20 (a
 * block that is not all zeros must not be taken for one). */
static void make_image(char *img)
{
	memset(img, 0, SIZE);
	for (size_t i = 0; i < NDATA; i++)
		t_pattern(img + (size_t)data_blocks[i] * BS, BS, 100 + i);
	img[20 * BS + BS - 1] = 1;
}

static void check_read(struct cache *c, struct cache_obj *o, const char *img)
{
	char *back = cache_alloc_aligned(SIZE);

	CHECK(cache_present(o, 0, 0));
	memset(back, 0x55, SIZE);
	CHECK_EQ(cache_read(o, back, SIZE, 0), (ssize_t)SIZE);
	CHECK(!memcmp(back, img, SIZE));
	/* Unaligned, across a hole and data. */
	CHECK_EQ(cache_read(o, back, 3 * BS, 2 * BS + 17), (ssize_t)(3 * BS));
	CHECK(!memcmp(back, img + 2 * BS + 17, 3 * BS));
	CHECK_EQ(t_stats(c).corrupt_blocks, 0);
	free(back);
}

static void run(enum cache_write_mode wm, const char *dir)
{
	/* Data plus one block for block 20 plus slack for metadata-free
	 * rounding; the whole object is 4 MiB. */
	const uint64_t want_max = (NDATA + 1) * BS + 64 * 1024;
	char *img = malloc(SIZE), *ref;
	struct cache_obj *a, *b, *z;
	struct cache_obj_info info;
	struct cache *c;
	uint64_t alloc;

	make_image(img);
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, wm, BS, 0);

	/* 1. cache_fill of the whole image in one call, and block by block. */
	a = t_get(c, "a", "v", SIZE);
	CHECK_EQ(cache_fill(a, img, SIZE, 0), 0);
	b = t_get(c, "b", "v", SIZE);
	for (size_t off = 0; off < SIZE; off += BS)
		CHECK_EQ(cache_fill(b, img + off, SIZE - off < BS ? SIZE - off : BS,
				    off), 0);
	cache_drain(c);
	alloc = data_alloc(c, "a");
	if (alloc > want_max)
		fprintf(stderr, "%s: a: %llu bytes allocated for %zu data blocks of %u\n",
			dir, (unsigned long long)alloc, NDATA + 1, BS);
	CHECK(alloc <= want_max);
	CHECK(data_alloc(c, "b") <= want_max);
	check_read(c, a, img);
	check_read(c, b, img);
	/* The cache accounts allocated bytes, not logical ones. */
	CHECK_EQ(cache_obj_info(c, cache_obj_get_name(a), &info), 0);
	CHECK_EQ(info.cached_bytes, SIZE);
	CHECK(info.alloc_bytes <= want_max + 64 * 1024);
	CHECK(t_stats(c).used_bytes < 3 * want_max + 1024 * 1024);

	/* 2. cache_fill_ref: the caller's buffer, released exactly once. */
	ref = cache_alloc_aligned(SIZE);
	memcpy(ref, img, SIZE);
	z = t_get(c, "ref", "v", SIZE);
	releases = 0;
	CHECK_EQ(cache_fill_ref(z, ref, SIZE, 0, on_release, NULL), 0);
	cache_drain(c);
	CHECK_EQ(releases, 1);
	CHECK(data_alloc(c, "ref") <= want_max);
	check_read(c, z, img);
	cache_obj_put(z);
	free(ref);

	/* 3. All zeros: nothing allocated, still present and verified. */
	{
		char *zeros = calloc(1, SIZE);

		z = t_get(c, "zero", "v", SIZE);
		CHECK_EQ(cache_fill(z, zeros, SIZE, 0), 0);
		cache_drain(c);
		CHECK(data_alloc(c, "zero") <= 64 * 1024);
		check_read(c, z, zeros);
		cache_obj_put(z);
		free(zeros);
	}

	/* 4. A zero block over an old data block (the file changed and was
	 *    written through): reads zeros, the space is given back. */
	{
		char *zblk = calloc(1, BS);

		alloc = data_alloc(c, "a");
		CHECK_EQ(cache_fill(a, zblk, BS, (uint64_t)data_blocks[0] * BS), 0);
		cache_drain(c);
		memset(img + (size_t)data_blocks[0] * BS, 0, BS);
		check_read(c, a, img);
		CHECK(data_alloc(c, "a") <= alloc - BS);
		free(zblk);
	}

	/* 5. After a restart: the same bytes, verified. */
	cache_obj_put(a);
	cache_obj_put(b);
	cache_close(c);
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, wm, BS, 0);
	a = t_get(c, "a", "v", SIZE);
	check_read(c, a, img);
	cache_obj_put(a);
	cache_close(c);

	/* 6. cache_size counts allocated bytes: three such objects (12 MiB
	 *    logical, under 1 MiB of data) fit in a 2 MiB cache, nothing is
	 *    culled or refused. */
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, wm, BS, 0);
	CHECK_EQ(cache_evict(c, NULL), 0);
	cache_close(c);
	c = t_open(t_path(dir), CACHE_OPEN_OWNER, wm, BS, 2u << 20);
	for (int i = 0; i < 3; i++) {
		char key[8];

		snprintf(key, sizeof(key), "cap%d", i);
		a = t_get(c, key, "v", SIZE);
		CHECK_EQ(cache_fill(a, img, SIZE, 0), 0);
		cache_drain(c);
		check_read(c, a, img);
		cache_obj_put(a);
	}
	CHECK_EQ(t_stats(c).culled_objects, 0);
	CHECK_EQ(t_stats(c).fills_skipped, 0);
	CHECK_EQ(t_stats(c).objects, 3);
	CHECK(t_stats(c).used_bytes <= 2u << 20);
	cache_close(c);
	free(img);
}

/* A filesystem that cannot punch holes: the zeros are written after all,
 * and read back right. */
static void run_no_punch(void)
{
	char *img = malloc(SIZE);
	struct cache *c;
	struct cache_obj *a;

	make_image(img);
	c = t_open(t_path("nopunch"), CACHE_OPEN_OWNER, CACHE_WRITE_DIRECT, BS, 0);
	a = t_get(c, "a", "v", SIZE);
	/* The first zero run's fallocate is refused. */
	cache_inject_error(c, CACHE_INJECT_WRITE, EOPNOTSUPP, 1);
	CHECK_EQ(cache_fill(a, img, 3 * BS, 0), 0);
	cache_drain(c);
	CHECK_EQ(t_stats(c).errors, 0);
	CHECK(data_alloc(c, "a") >= 3 * BS);
	CHECK_EQ(cache_fill(a, img + 3 * BS, SIZE - 3 * BS, 3 * BS), 0);
	cache_drain(c);
	check_read(c, a, img);
	CHECK_EQ(t_stats(c).errors, 0);
	cache_obj_put(a);
	cache_close(c);
	free(img);
}

int main(void)
{
	run(CACHE_WRITE_DIRECT, "direct");
	run(CACHE_WRITE_DONTCACHE, "dontcache");
	run(CACHE_WRITE_BUFFERED, "buffered");
	run(CACHE_WRITE_FADVISE, "fadvise");
	run_no_punch();
	return 0;
}
