/* scan.c - rebuilding the registry at open, and offline inspection: walk,
 * info, verify, evict. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"

/* Parse "<16 hex>" or "<16 hex>.meta"; 1 if name is an object file. */
static int parse_obj_name(const char *name, uint64_t *hash, bool *meta)
{
	size_t len = strlen(name);
	char buf[CACHE_NAME_LEN + 1], *end;

	if (len == CACHE_NAME_LEN)
		*meta = false;
	else if (len == CACHE_NAME_LEN + strlen(CACHE_META_SUFFIX) &&
		 !strcmp(name + CACHE_NAME_LEN, CACHE_META_SUFFIX))
		*meta = true;
	else
		return 0;
	memcpy(buf, name, CACHE_NAME_LEN);
	buf[CACHE_NAME_LEN] = 0;
	if (strspn(buf, "0123456789abcdef") != CACHE_NAME_LEN)
		return 0;
	*hash = strtoull(buf, &end, 16);
	return 1;
}

/* Call fn(name) for every object on disk (named by either of its files,
 * once). Stops at the first non-zero return. */
static int walk_disk(struct cache *c, int (*fn)(struct cache *c,
						const char *name, void *arg),
		     void *arg)
{
	int ofd = openat(c->dirfd, CACHE_OBJ_DIR,
			 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *od = ofd >= 0 ? fdopendir(ofd) : NULL;
	struct dirent *de;
	int ret = 0;

	if (!od) {
		if (ofd >= 0)
			close(ofd);
		return errno == ENOENT ? 0 : -errno;
	}
	while (!ret && (de = readdir(od))) {
		int sfd;
		DIR *sd;
		struct dirent *se;

		if (de->d_name[0] == '.' || strlen(de->d_name) != 2)
			continue;
		sfd = openat(ofd, de->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		sd = sfd >= 0 ? fdopendir(sfd) : NULL;
		if (!sd) {
			if (sfd >= 0)
				close(sfd);
			continue;
		}
		while (!ret && (se = readdir(sd))) {
			uint64_t hash;
			bool meta;
			char name[CACHE_NAME_LEN + 1];

			if (!parse_obj_name(se->d_name, &hash, &meta))
				continue;
			/* Name the object once: by its metadata file, or by
			 * its data file when the metadata is missing. */
			if (!meta) {
				char m[64];

				snprintf(m, sizeof(m), "%.16s" CACHE_META_SUFFIX,
					 se->d_name);
				if (!faccessat(sfd, m, F_OK, 0))
					continue;
			}
			memcpy(name, se->d_name, CACHE_NAME_LEN);
			name[CACHE_NAME_LEN] = 0;
			ret = fn(c, name, arg);
		}
		closedir(sd);
	}
	closedir(od);
	return ret;
}

/* ---- at open --------------------------------------------------------------- */

static uint64_t blocks_at(int dirfd, const char *path)
{
	struct stat st;

	if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return (uint64_t)st.st_blocks * 512;
}

/* One object: its allocation from two fstatat()s and its last use from
 * 8 bytes of its header. The header is validated later, on first get,
 * which keeps a scan of thousands of objects to a few syscalls each. */
static int scan_one(struct cache *c, const char *name, void *arg)
{
	struct cache_obj *o;
	char path[64];
	uint64_t hash, alloc, last_use = 0;
	bool meta;
	int fd;

	(void)arg;
	parse_obj_name(name, &hash, &meta);
	cache_obj_path(c, name, false, path, sizeof(path));
	alloc = blocks_at(c->dirfd, path);
	cache_obj_path(c, name, true, path, sizeof(path));
	alloc += blocks_at(c->dirfd, path);
	fd = openat(c->dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		if (pread(fd, &last_use, 8, META_LAST_USE_OFF) != 8)
			last_use = 0;
		close(fd);
	}
	o = cache_obj_lookup_locked(c, hash);
	if (!o)
		o = cache_obj_new_locked(c, hash);
	if (!o)
		return -ENOMEM;
	o->last_use_ns = last_use;
	cache_account_locked(c, o, alloc);
	return 0;
}

static int cmp_last_use(const void *a, const void *b)
{
	const struct cache_obj *x = *(struct cache_obj *const *)a;
	const struct cache_obj *y = *(struct cache_obj *const *)b;

	return x->last_use_ns < y->last_use_ns ? -1 :
	       x->last_use_ns > y->last_use_ns;
}

int cache_scan(struct cache *c, char *err, size_t errlen)
{
	struct cache_obj **all, *o;
	size_t n = 0;
	int ret;

	pthread_mutex_lock(&c->lock);
	c->overhead = blocks_at(c->dirfd, ".") + blocks_at(c->dirfd, CACHE_OBJ_DIR) +
		      blocks_at(c->dirfd, CACHE_CONF_NAME) +
		      blocks_at(c->dirfd, CACHE_LOCK_NAME);
	for (unsigned i = 0; i < 256; i++) {
		char p[16];

		snprintf(p, sizeof(p), CACHE_OBJ_DIR "/%02x", i);
		c->overhead += blocks_at(c->dirfd, p);
	}
	ret = walk_disk(c, scan_one, NULL);
	if (ret)
		goto out;
	/* LRU order from the persisted last-use times. */
	all = malloc((c->nobj + 1) * sizeof(*all));
	if (!all) {
		ret = -ENOMEM;
		goto out;
	}
	for (o = c->lru_head; o; o = o->lnext)
		all[n++] = o;
	qsort(all, n, sizeof(*all), cmp_last_use);
	c->lru_head = c->lru_tail = NULL;
	for (size_t i = 0; i < n; i++)
		cache_lru_append_locked(c, all[i]);
	free(all);
	__atomic_store_n(&c->stats.used_bytes, c->used + c->overhead,
			 __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&c->lock);
	if (ret)
		seterr(err, errlen, "cache_dir %s: scanning objects: %s",
			      c->dir, strerror(-ret));
	return ret;
}

/* ---- inspection -------------------------------------------------------------- */

int cache_obj_info(struct cache *c, const char *name,
		   struct cache_obj_info *info)
{
	struct cache_obj *o;
	int ret = cache_obj_ref_by_name(c, name, &o);

	if (ret == -ENOENT)
		return ret;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", name);
	pthread_mutex_lock(&o->lock);
	if (ret || !o->opened) {
		info->damaged = 1;
	} else {
		uint32_t bs = c->block_size;

		info->keylen = o->hdr->keylen;
		memcpy(info->key, o->hdr->key, info->keylen);
		info->cohlen = o->hdr->cohlen;
		memcpy(info->coh, o->hdr->coh, info->cohlen);
		info->size = o->hdr->size;
		info->block_size = bs;
		info->blocks_total = o->nblocks;
		info->last_use_ns = o->hdr->last_use_ns;
		for (uint64_t b = 0; b < o->nblocks; b++) {
			if (!cache_bit(o->bitmap, b))
				continue;
			info->blocks_present++;
			info->cached_bytes += (b + 1) * bs <= info->size ?
					      bs : info->size - b * bs;
		}
	}
	pthread_mutex_unlock(&o->lock);
	pthread_mutex_lock(&c->lock);
	info->alloc_bytes = o->alloc_bytes;
	info->open_refs = o->refs - 1;
	pthread_mutex_unlock(&c->lock);
	cache_obj_put(o);
	return 0;
}

struct iter_arg {
	int (*fn)(const struct cache_obj_info *info, void *arg);
	void *arg;
};

static int iter_one(struct cache *c, const char *name, void *arg)
{
	struct iter_arg *ia = arg;
	struct cache_obj_info info;

	if (cache_obj_info(c, name, &info))
		return 0;	/* gone meanwhile */
	return ia->fn(&info, ia->arg);
}

int cache_iterate(struct cache *c,
		  int (*fn)(const struct cache_obj_info *info, void *arg),
		  void *arg)
{
	struct iter_arg ia = { fn, arg };

	return walk_disk(c, iter_one, &ia);
}

static int evict_one(struct cache *c, const char *name, void *arg)
{
	struct cache_obj *o;
	char path[64];
	uint64_t hash;
	bool meta;

	(void)arg;
	if (!parse_obj_name(name, &hash, &meta) || meta)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	o = cache_obj_lookup_locked(c, hash);
	if (!o) {
		/* Not registered: only files nobody in this process uses. */
		int found = 0;

		cache_obj_path(c, name, false, path, sizeof(path));
		found |= !unlinkat(c->dirfd, path, 0);
		cache_obj_path(c, name, true, path, sizeof(path));
		found |= !unlinkat(c->dirfd, path, 0);
		pthread_mutex_unlock(&c->lock);
		return found ? 0 : -ENOENT;
	}
	if (!o->refs) {
		cache_obj_forget_free(c, o);
		return 0;
	}
	/* In use in this process: drop the data, keep the identity. */
	cache_obj_drop_data(c, o, "evict");
	return 0;
}

/* readdir may still return an entry of a file just removed with its
 * sibling: gone is what we want. */
static int evict_walk_one(struct cache *c, const char *name, void *arg)
{
	int ret = evict_one(c, name, arg);

	return ret == -ENOENT ? 0 : ret;
}

int cache_evict(struct cache *c, const char *name)
{
	if (!cache_writable(c))
		return -EROFS;
	if (name)
		return evict_one(c, name, NULL);
	return walk_disk(c, evict_walk_one, NULL);
}

struct verify_arg {
	bool repair;
	uint64_t bad;
};

static int verify_one(struct cache *c, const char *name, void *arg)
{
	struct verify_arg *va = arg;
	struct cache_obj *o;
	int ret = cache_obj_ref_by_name(c, name, &o);

	if (ret == -ENOENT)
		return 0;
	if (ret) {
		/* Damaged metadata: all of the object is suspect. */
		cache_obj_put(o);
		va->bad++;
		cache_log("object %s: damaged metadata%s", name,
			  va->repair ? ", removed" : "");
		return va->repair ? evict_walk_one(c, name, NULL) : 0;
	}
	pthread_mutex_lock(&o->lock);
	ret = o->opened ? cache_obj_verify_locked(o, va->repair, &va->bad) : 0;
	pthread_mutex_unlock(&o->lock);
	cache_obj_put(o);
	return ret;
}

int cache_verify(struct cache *c, const char *name, int repair,
		 uint64_t *bad)
{
	struct verify_arg va = { repair != 0, 0 };
	int ret;

	if (repair && !cache_writable(c))
		return -EROFS;
	if (name) {
		char path[64];

		cache_obj_path(c, name, true, path, sizeof(path));
		if (strlen(name) != CACHE_NAME_LEN ||
		    faccessat(c->dirfd, path, F_OK, 0))
			return -ENOENT;
		ret = verify_one(c, name, &va);
	} else {
		ret = walk_disk(c, verify_one, &va);
	}
	*bad = va.bad;
	return ret;
}
