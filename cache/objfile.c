/* objfile.c - an object's two files: their names and paths, opening them
 * (created if new, O_DIRECT where the filesystem takes it, the header
 * checked and damage counted, presence loaded), the header's check on
 * every get, and closing them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache_i.h"
#include "lockcheck.h"

/* ---- names and paths ---------------------------------------------------- */

int cache_obj_hash_name(const void *key, size_t keylen, uint64_t *hash,
			char *name)
{
	if (!key || !keylen || keylen > CACHE_KEY_MAX)
		return -EINVAL;
	*hash = XXH3_64bits(key, keylen);
	snprintf(name, CACHE_NAME_LEN + 1, "%016" PRIx64, *hash);
	return 0;
}

int cache_obj_name(const void *key, size_t keylen, char *name, size_t namelen)
{
	char buf[CACHE_NAME_LEN + 1];
	uint64_t h;
	int ret = cache_obj_hash_name(key, keylen, &h, buf);

	if (ret)
		return ret;
	if (namelen < sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(name, buf, sizeof(buf));
	return 0;
}

const char *cache_obj_get_name(const struct cache_obj *o)
{
	return o->name;
}

/* Relative to c->dirfd. Fanned out on the first two hex digits: 256 dirs
 * keep each directory small without a deep tree. */
int cache_obj_path(const struct cache *c, const char *name, bool meta,
		   char *buf, size_t len)
{
	int n = snprintf(buf, len, CACHE_OBJ_DIR "/%.2s/%s%s", name, name,
			 meta ? CACHE_META_SUFFIX : "");

	(void)c;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
/* ---- opening, the check on every get, closing (o->lock) ----------------- */

static void count_damaged(struct cache_obj *o)
{
	STAT_ADD(o->c, corrupt_blocks, 1);
	STAT_ADD(o->c, corrupt_objects, 1);
	cache_log("damaged metadata of object %s: dropped", o->name);
}

static int open_data(struct cache_obj *o, int flags)
{
	struct cache *c = o->c;
	char path[64];
	bool direct = c->write_mode == CACHE_WRITE_DIRECT &&
		      !__atomic_load_n(&c->no_direct, __ATOMIC_RELAXED);
	int fd;

	cache_obj_path(c, o->name, false, path, sizeof(path));
	fd = openat(c->dirfd, path, flags | (direct ? O_DIRECT : 0), 0600);
	if (fd < 0 && direct && errno == EINVAL) {
		/* tmpfs and some FUSE filesystems refuse O_DIRECT. */
		if (!__atomic_exchange_n(&c->no_direct, 1, __ATOMIC_RELAXED))
			cache_log("O_DIRECT refused on %s; using buffered I/O",
				  c->dir);
		direct = false;
		fd = openat(c->dirfd, path, flags, 0600);
	}
	if (fd < 0)
		return -errno;
	o->data_fd = fd;
	o->direct = direct;
	return 0;
}

/* Open (create) the files and load the header and presence bitmap. key NULL
 * accepts the stored identity (inspection by name). A damaged header is
 * counted and the object reset (writable modes) or -EBADMSG (INSPECT). */
int cache_obj_open_locked(struct cache_obj *o, const void *key,
			  size_t keylen, const void *coh, size_t cohlen,
			  uint64_t size, bool create)
{
	struct cache *c = o->c;
	/* Nothing inside the cache directory is reached through a link. */
	int flags = O_CLOEXEC | O_NOFOLLOW |
		    (cache_writable(c) ? O_RDWR : O_RDONLY);
	char path[64];
	struct stat st;
	int ret;

	GW_ASSERT_HELD(&o->lock);
	if (create) {
		snprintf(path, sizeof(path), CACHE_OBJ_DIR "/%.2s", o->name);
		if (!mkdirat(c->dirfd, path, 0700)) {
			pthread_mutex_lock(&c->lock);
			c->overhead += 4096;
			pthread_mutex_unlock(&c->lock);
		}
		flags |= O_CREAT;
	}
	o->hdr = calloc(1, sizeof(*o->hdr));
	if (!o->hdr)
		return -ENOMEM;
	cache_obj_path(c, o->name, true, path, sizeof(path));
	o->meta_fd = openat(c->dirfd, path, flags, 0600);
	if (o->meta_fd < 0) {
		ret = -errno;
		goto out_close;
	}
	ret = open_data(o, flags);
	if (ret)
		goto out_close;
	o->opened = true;
	if (fstat(o->meta_fd, &st) < 0) {
		ret = -errno;
		goto out_close;
	}
	/* 1. A new file (size 0) is not damage; anything else must parse. */
	ret = st.st_size ? cache_meta_read_hdr(c, o->meta_fd, o->hdr) : -ENODATA;
	if (ret == -EBADMSG && key)
		count_damaged(o);	/* by name (inspection) it is reported */
	if (ret && ret != -EBADMSG && ret != -ENODATA)
		goto out_close;
	if (ret && (!cache_writable(c) || !key))
		goto out_close;	/* inspection of a damaged object */
	/* 2. Key collision or changed coherency data: a new incarnation. */
	if (!ret && key && (o->hdr->keylen != keylen ||
			    memcmp(o->hdr->key, key, keylen) ||
			    o->hdr->cohlen != cohlen ||
			    memcmp(o->hdr->coh, coh, cohlen) ||
			    o->hdr->size != size))
		ret = -ESTALE;
	if (ret) {
		o->nblocks = 0;
		ret = cache_obj_alloc_bitmap(o, 0);
		if (!ret)
			ret = cache_obj_reset_locked(o, key, keylen, coh, cohlen,
						     size);
		if (ret) {
			STAT_ADD(c, errors, 1);
			cache_log("I/O error (create: %s) on object %s",
				  strerror(-ret), o->name);
			goto out_close;
		}
		return 0;
	}
	/* 3. A valid object: its presence bitmap. */
	ret = cache_obj_alloc_bitmap(o, o->hdr->size);
	if (!ret)
		ret = cache_meta_load_bitmap(c, o->meta_fd, o->nblocks, o->bitmap);
	if (ret)
		goto out_close;
	cache_obj_update_alloc(o);
	return 0;

out_close:
	cache_obj_close_locked(o);
	return ret;
}

/* Already open: the metadata on disk may have been damaged since (it is
 * re-read on every get, 512 bytes). */
int cache_obj_revalidate_locked(struct cache_obj *o, const void *coh,
				size_t cohlen, uint64_t size)
{
	struct meta_hdr h;
	int ret;

	GW_ASSERT_HELD(&o->lock);
	ret = cache_meta_read_hdr(o->c, o->meta_fd, &h);
	if (ret == -EBADMSG || (!ret && h.salt != o->hdr->salt)) {
		count_damaged(o);
		return cache_obj_reset_locked(o, NULL, 0, coh, cohlen, size);
	}
	if (ret) {
		cache_obj_fail_locked(o, ret, "metadata read");
		return 0;
	}
	return 0;
}

void cache_obj_close_locked(struct cache_obj *o)
{
	GW_ASSERT_HELD(&o->lock);
	if (o->data_fd >= 0)
		close(o->data_fd);
	if (o->meta_fd >= 0)
		close(o->meta_fd);
	o->data_fd = o->meta_fd = -1;
	free(o->hdr);
	free(o->bitmap);
	cache_csc_drop_locked(o);
	o->hdr = NULL;
	o->bitmap = NULL;
	o->opened = false;
	o->broken = false;
}
