/* cache_badmeta_test: damaged metadata (bad magic, truncated, flipped header byte, other version) drops the object; no bad data is ever returned. */
#include "cache_helpers.h"

static const uint32_t bs = 16 << 10;
static const size_t size = 5 * (16 << 10);

static void fill(struct cache *c, const char *key, const char *data)
{
	struct cache_obj *o = t_get(c, key, "v", size);

	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	cache_obj_put(o);
}

/* After damage: a get succeeds, every read misses, a refill works. */
static void expect_dropped(struct cache *c, const char *key, const char *data)
{
	char *back = malloc(size);
	struct cache_obj *o = t_get(c, key, "v", size);

	for (size_t off = 0; off < size; off += bs)
		CHECK_EQ(cache_read(o, back, bs, off), -ENODATA);
	CHECK_EQ(cache_fill(o, data, size, 0), 0);
	cache_drain(c);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, data, size));
	cache_obj_put(o);
	free(back);
}

int main(void)
{
	char *data = malloc(size);
	const char *keys[] = { "magic", "trunc", "hdrbyte", "version", "live" };
	struct cache *c;
	struct meta_hdr h;
	uint64_t corrupt;

	t_pattern(data, size, 3);
	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, bs, 0);
	for (int i = 0; i < 5; i++)
		fill(c, keys[i], data);
	cache_close(c);

	/* Damage four objects while the cache is closed. */
	c = t_open(t_path("c"), CACHE_OPEN_INSPECT, CACHE_WRITE_BUFFERED, 0, 0);
	t_flip(t_objfile(c, "magic", true), 0);
	CHECK_EQ(truncate(t_objfile(c, "trunc", true), 100), 0);
	t_flip(t_objfile(c, "hdrbyte", true), offsetof(struct meta_hdr, size));
	{
		/* A well-formed header of another version: still dropped. */
		int fd = open(t_objfile(c, "version", true), O_RDWR);

		CHECK(fd >= 0);
		CHECK(pread(fd, &h, sizeof(h), 0) == sizeof(h));
		h.version = 99;
		cache_meta_seal(&h);
		CHECK(pwrite(fd, &h, sizeof(h), 0) == sizeof(h));
		close(fd);
	}
	/* Inspection reports them damaged without changing anything. */
	{
		struct cache_obj_info info;
		char name[CACHE_NAME_LEN + 1];
		uint64_t bad = 0;

		cache_obj_name("magic", 5, name, sizeof(name));
		CHECK_EQ(cache_obj_info(c, name, &info), 0);
		CHECK(info.damaged);
		CHECK_EQ(cache_verify(c, NULL, 0, &bad), 0);
		CHECK_EQ(bad, 4);
		CHECK_EQ(cache_verify(c, NULL, 1, &bad), -EROFS);
	}
	cache_close(c);

	c = t_open(t_path("c"), CACHE_OPEN_OWNER, CACHE_WRITE_BUFFERED, 0, 0);
	for (int i = 0; i < 4; i++) {
		expect_dropped(c, keys[i], data);
		CHECK_EQ(t_stats(c).corrupt_objects, (uint64_t)i + 1);
	}
	corrupt = t_stats(c).corrupt_blocks;
	CHECK_EQ(corrupt, 4);

	/* Damage while the object is open: caught on the next get. */
	{
		struct cache_obj *o = t_get(c, "live", "v", size);
		char *back = malloc(size);

		CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
		t_flip(t_objfile(c, "live", true), 2);
		cache_obj_put(o);	/* still open? no: last ref closes it */
		o = t_get(c, "live", "v", size);
		CHECK_EQ(cache_read(o, back, size, 0), -ENODATA);
		CHECK_EQ(t_stats(c).corrupt_objects, 5);
		/* And with a reference held across the damage. */
		CHECK_EQ(cache_fill(o, data, size, 0), 0);
		cache_drain(c);
		t_flip(t_objfile(c, "live", true), 9);
		{
			struct cache_obj *o2 = t_get(c, "live", "v", size);

			CHECK_EQ(cache_read(o2, back, size, 0), -ENODATA);
			CHECK_EQ(t_stats(c).corrupt_objects, 6);
			cache_obj_put(o2);
		}
		cache_obj_put(o);
		free(back);
	}
	CHECK_EQ(t_stats(c).errors, 0);
	cache_close(c);
	free(data);
	return 0;
}
