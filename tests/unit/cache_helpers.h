/* cache_helpers.h - shared helpers of the cache/ unit tests: opening a
 * cache, patterns; checks and temp dirs from check.h. */
#ifndef CACHEGW_CACHE_HELPERS_H
#define CACHEGW_CACHE_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cache_i.h"	/* white-box tests poke at the on-disk format */
#include "check.h"

static inline struct cache *t_open(const char *dir, enum cache_open_mode mode,
				   enum cache_write_mode wm, uint32_t bs,
				   uint64_t max)
{
	struct cache_opts o = {
		.dir = dir, .mode = mode, .block_size = bs, .write_mode = wm,
		.max_bytes = max,
	};
	struct cache *c = NULL;
	char err[256];
	int ret = cache_open(&o, &c, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "cache_open(%s): %d: %s\n", dir, ret, err);
		exit(1);
	}
	return c;
}

static inline void t_pattern(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static inline struct cache_obj *t_get(struct cache *c, const char *key,
				      const char *coh, uint64_t size)
{
	struct cache_obj *o = NULL;
	int ret = cache_obj_get(c, key, strlen(key), coh, strlen(coh), size, &o);

	if (ret) {
		fprintf(stderr, "cache_obj_get(%s): %d\n", key, ret);
		exit(1);
	}
	return o;
}

/* Path of an object's data or metadata file. */
static inline char *t_objfile(struct cache *c, const char *key, bool meta)
{
	static char buf[2][512];
	static int i;
	char name[CACHE_NAME_LEN + 1], *p = buf[i++ % 2];

	cache_obj_name(key, strlen(key), name, sizeof(name));
	snprintf(p, 512, "%s/objects/%.2s/%s%s", cache_dir(c), name, name,
		 meta ? ".meta" : "");
	return p;
}

static inline void t_poke(const char *path, off_t off, const void *b,
			  size_t len)
{
	int fd = open(path, O_WRONLY);

	CHECK(fd >= 0);
	CHECK(pwrite(fd, b, len, off) == (ssize_t)len);
	close(fd);
}

/* XOR one byte of a file. */
static inline void t_flip(const char *path, off_t off)
{
	unsigned char b;
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0);
	CHECK(pread(fd, &b, 1, off) == 1);
	b ^= 0x5a;
	CHECK(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

static inline struct cache_stats t_stats(struct cache *c)
{
	struct cache_stats st;

	cache_get_stats(c, &st);
	return st;
}

/* t_check_obj: object o of cache c reads back whole (size bytes) as want,
 * and the cache has found no corrupt block. */
/* The end of a test: the cache saw corrupt damaged blocks and no I/O
 * error; o (may be NULL) and c are let go. */
static inline void t_finish(struct cache *c, struct cache_obj *o,
			    uint64_t corrupt)
{
	CHECK_EQ(t_stats(c).corrupt_blocks, corrupt);
	CHECK_EQ(t_stats(c).errors, 0);
	if (o)
		cache_obj_put(o);
	cache_close(c);
}

static inline void t_check_obj(struct cache *c, struct cache_obj *o,
			       const void *want, size_t size)
{
	char *back = calloc(1, size);

	CHECK(back);
	CHECK_EQ(cache_read(o, back, size, 0), (ssize_t)size);
	CHECK(!memcmp(back, want, size));
	CHECK_EQ(t_stats(c).corrupt_blocks, 0);
	free(back);
}

/* t_reopen_check: open the cache in dir again (owner, write mode wm, block
 * size bs) and check that object key (coherence "v1", size bytes) reads
 * back as want (t_check_obj); then close it again. */
static inline void t_reopen_check(const char *dir, enum cache_write_mode wm,
				  uint32_t bs, const char *key,
				  const void *want, size_t size)
{
	struct cache *c = t_open(dir, CACHE_OPEN_OWNER, wm, bs, 0);
	struct cache_obj *o = t_get(c, key, "v1", size);

	t_check_obj(c, o, want, size);
	cache_obj_put(o);
	cache_close(c);
}

/* A release callback for the *_ref calls that counts its calls. */
static atomic_int t_released;

static inline void t_rel(void *arg)
{
	CHECK(arg != NULL);
	atomic_fetch_add(&t_released, 1);
}

#endif
