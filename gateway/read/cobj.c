/* cobj.c - the link between an inode and its cache object.
 *
 * The gateway decides what identifies a file (the key: export + origin
 * file handle) and what a version of it is (the coherency blob: size,
 * fileid, mtime, ctime); cache/ stores both opaquely. Changes the gateway
 * makes itself move the blob forward instead of dropping the data.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cache.h"
#include "keep_i.h"
#include "read_i.h"

/* What identifies an origin file across gateway runs: the export (hashed,
 * so that long export paths fit CACHE_KEY_MAX) and the file handle. */
struct gw_key {
	char magic[4];			/* "nfs3" */
	uint64_t export_hash;
	uint8_t fh[NFSC_FH_MAX];
} __attribute__((packed));

/* The origin's version of a file: any change means the data changed. */
struct gw_coh {
	uint64_t size;
	uint64_t fileid;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
} __attribute__((packed));

static size_t make_key(struct gw *gw, const struct nfsc_fh *fh,
		       struct gw_key *k)
{
	const char *srv = nfsc_server(gw->nfs), *exp = nfsc_export(gw->nfs);
	size_t ls = strlen(srv), le = strlen(exp);
	char *id = malloc(ls + le + 2);

	memcpy(k->magic, "nfs3", 4);
	k->export_hash = 0;
	if (id) {
		memcpy(id, srv, ls + 1);
		memcpy(id + ls + 1, exp, le + 1);
		k->export_hash = XXH3_64bits(id, ls + le + 2);
		free(id);
	}
	memcpy(k->fh, fh->data, fh->len);
	return offsetof(struct gw_key, fh) + fh->len;
}

static void make_coh(const struct nfsc_attr *a, struct gw_coh *c)
{
	memset(c, 0, sizeof(*c));
	c->size = a->size;
	c->fileid = a->fileid;
	c->mtime_s = a->mtime.tv_sec;
	c->mtime_ns = a->mtime.tv_nsec;
	c->ctime_s = a->ctime.tv_sec;
	c->ctime_ns = a->ctime.tv_nsec;
}

/* ino->obj with a reference of the caller's own, or NULL. ino->obj's own
 * reference is dropped by the last release (and the object then closed or
 * culled) as soon as ino->lock is let go: whoever uses the object after
 * that needs its own, taken under the lock. */
struct cache_obj *gw_inode_obj(struct gw_inode *ino)
{
	struct cache_obj *obj;

	pthread_mutex_lock(&ino->lock);
	obj = cache_obj_grab(ino->obj);
	pthread_mutex_unlock(&ino->lock);
	return obj;
}

/* Check the attached object, if any, against c: 1 if its data was dropped
 * because the file changed, 0 if not (or none is attached: *attached). */
static int check_attached(struct gw_inode *ino, const struct gw_coh *c,
			  uint64_t size, bool *attached)
{
	struct cache_obj *obj;
	bool writing;
	int ret;

	pthread_mutex_lock(&ino->lock);
	obj = cache_obj_grab(ino->obj);
	/* A difference may be our own unanswered write (its answer updates
	 * the coherency data): not a change by someone else. */
	writing = gw_inode_writing(ino);
	pthread_mutex_unlock(&ino->lock);
	*attached = obj != NULL;
	if (!obj)
		return 0;
	ret = writing ? 0 : cache_obj_check(obj, c, sizeof(*c), size);
	cache_obj_put(obj);
	if (ret > 0)
		gw_inode_drop_fetch(ino);
	return ret;
}

int gw_cache_attach(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_attr *a)
{
	struct cache_obj *obj;
	struct gw_key k;
	struct gw_coh c;
	bool attached;
	size_t klen;
	int ret;

	if (!gw->cache || a->type != NFSC_REG)
		return 0;
	make_coh(a, &c);
	ret = check_attached(ino, &c, a->size, &attached);
	if (attached)
		return ret;
	klen = make_key(gw, &ino->fh, &k);
	ret = cache_obj_get(gw->cache, &k, klen, &c, sizeof(c), a->size, &obj);
	if (ret)
		return ret;
	pthread_mutex_lock(&ino->lock);
	if (!ino->obj) {
		ino->obj = obj;
		obj = NULL;
	}
	pthread_mutex_unlock(&ino->lock);
	if (obj)		/* another thread attached first */
		cache_obj_put(obj);
	return 0;
}

int gw_cache_check(struct gw *gw, struct gw_inode *ino,
		   const struct nfsc_attr *a)
{
	struct gw_coh c;
	bool attached;

	if (!gw->cache || a->type != NFSC_REG)
		return 0;
	make_coh(a, &c);
	return check_attached(ino, &c, a->size, &attached);
}

void gw_cache_drop(struct gw *gw, struct gw_inode *ino)
{
	struct cache_obj *obj = gw_inode_obj(ino);

	(void)gw;
	if (obj)
		cache_obj_invalidate(obj);
	cache_obj_put(obj);
}

void gw_cache_own_change(struct gw *gw, struct gw_inode *ino,
			 const struct nfsc_attr *a, bool size_changed)
{
	struct cache_obj *obj = gw_inode_obj(ino);
	struct gw_coh c;

	(void)gw;
	(void)size_changed;	/* cache_obj_set_coh trims to the new size */
	if (!obj)
		return;
	make_coh(a, &c);
	GW_ASSERT_NOT_HELD(&ino->lock);	/* coh_lock: no other gateway lock */
	pthread_mutex_lock(&ino->coh_lock);
	ino->coh_attr = *a;	/* a change (truncate) is the newest */
	ino->coh_set = true;
	if (cache_obj_set_coh(obj, &c, sizeof(c), a->size) < 0)
		cache_obj_invalidate(obj);
	pthread_mutex_unlock(&ino->coh_lock);
	cache_obj_put(obj);
}

void gw_cache_own_write(struct gw *gw, struct gw_inode *ino,
			const struct nfsc_attr *a, char *buf, size_t len,
			uint64_t off)
{
	struct cache_obj *obj = gw_inode_obj(ino);
	struct gw_coh c;
	int ret = 0;

	if (!obj)
		return;
	/* Parallel WRITEs of one file are answered in any order. One
	 * answered before a later one, but handled after it, carries the
	 * older size: given to the cache it would trim the blocks the later
	 * write just cached (test 32 in writeback mode under ASan missed a
	 * MiB of them in 2 runs of 4). The newest attributes stand; the bytes
	 * are ours either way. */
	GW_ASSERT_NOT_HELD(&ino->lock);	/* coh_lock: no other gateway lock */
	pthread_mutex_lock(&ino->coh_lock);
	if (!ino->coh_set || !gw_attr_newer(&ino->coh_attr, a)) {
		ino->coh_attr = *a;
		ino->coh_set = true;
		make_coh(a, &c);
		ret = cache_obj_set_coh(obj, &c, sizeof(c), a->size);
	}
	if (ret < 0)
		cache_obj_invalidate(obj);
	else if (gw->o->cache_writes_around)
		cache_drop_range(obj, off, len);
	else {
		/* The fill holds its own reference until written. */
		gw_buf_ref(buf);
		if (cache_write_ref(obj, buf, len, off, gw_buf_release_cb,
				    buf) < 0)
			cache_drop_range(obj, off, len);
	}
	pthread_mutex_unlock(&ino->coh_lock);
	cache_obj_put(obj);
}

int gw_cache_state(struct gw *gw, const struct nfsc_fh *fh,
		   const struct nfsc_attr *a, uint64_t *cached, bool *complete)
{
	char name[CACHE_NAME_LEN + 1];
	struct cache_obj_info *info;
	struct gw_key k;
	struct gw_coh c;
	size_t klen;
	int ret;

	*cached = 0;
	*complete = false;
	if (!gw->cache)
		return -ENOTSUP;
	if (a->type != NFSC_REG)
		return -EINVAL;
	if (a->size == 0) {
		*complete = true;	/* nothing to fetch */
		return 0;
	}
	klen = make_key(gw, fh, &k);
	ret = cache_obj_name(&k, klen, name, sizeof(name));
	if (ret)
		return ret;
	info = malloc(sizeof(*info));
	if (!info)
		return -ENOMEM;
	/* By name, through the cache's registry: the live object's own
	 * bitmap if it is open, and no object is made for a file that has
	 * none (a dry run must not change the cache). */
	ret = cache_obj_info(gw->cache, name, info);
	if (ret == -ENOENT) {
		ret = 0;
		goto out;
	}
	if (ret || info->damaged)
		goto out;
	/* Blocks of another version of the file are dropped by the next
	 * open: they count for nothing. */
	make_coh(a, &c);
	if (info->cohlen != sizeof(c) || memcmp(info->coh, &c, sizeof(c)) ||
	    info->size != a->size)
		goto out;
	*cached = info->cached_bytes;
	*complete = info->blocks_present == info->blocks_total;
out:
	free(info);
	return ret;
}
