/* read.c - the read path and the link between inodes and cache objects.
 *
 * 1. A read whose blocks are all present and verify is served from the
 *    cache (cache_read checks every block's XXH3).
 * 2. Else, if the inode's last origin fetch covers it, from that buffer:
 *    fills are asynchronous, so the kernel's next sequential request may
 *    arrive before the blocks fetched for the previous one are marked
 *    present; this avoids fetching them twice.
 * 3. Else the covering whole blocks are read from the origin (rsize READs
 *    in parallel over the connections), the reply goes out, and the blocks
 *    are handed to the cache, which writes them without blocking us.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cache.h"
#include "gw_i.h"

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

static size_t make_key(struct gw *gw, const struct gw_inode *ino,
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
	memcpy(k->fh, ino->fh.data, ino->fh.len);
	return offsetof(struct gw_key, fh) + ino->fh.len;
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

int gw_cache_attach(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_attr *a)
{
	struct cache_obj *obj;
	struct gw_key k;
	struct gw_coh c;
	size_t klen;
	int ret;

	if (!gw->cache || a->type != NFSC_REG)
		return 0;
	make_coh(a, &c);
	pthread_mutex_lock(&ino->lock);
	obj = ino->obj;
	pthread_mutex_unlock(&ino->lock);
	if (obj) {
		ret = cache_obj_check(obj, &c, sizeof(c), a->size);
		if (ret > 0)
			gw_inode_drop_fetch(ino);
		return ret;
	}
	klen = make_key(gw, ino, &k);
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

void gw_inode_drop_fetch(struct gw_inode *ino)
{
	char *old;

	pthread_mutex_lock(&ino->lock);
	old = ino->fetch;
	ino->fetch = NULL;
	ino->fetch_len = 0;
	pthread_mutex_unlock(&ino->lock);
	free(old);
}

/* Serve [off, off+size) from the last fetch if it covers it (or covers it
 * up to the end of the file). Returns bytes copied or -ENODATA. */
static ssize_t from_fetch(struct gw_inode *ino, char *buf, size_t size,
			  uint64_t off)
{
	ssize_t ret = -ENODATA;

	pthread_mutex_lock(&ino->lock);
	if (ino->fetch && off >= ino->fetch_off &&
	    off <= ino->fetch_off + ino->fetch_len) {
		size_t skip = (size_t)(off - ino->fetch_off);
		size_t have = ino->fetch_len - skip;

		if (have >= size || ino->fetch_eof) {
			ret = (ssize_t)(have < size ? have : size);
			memcpy(buf, ino->fetch + skip, (size_t)ret);
		}
	}
	pthread_mutex_unlock(&ino->lock);
	return ret;
}

void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *f, size_t size, off_t off)
{
	uint64_t uoff = (uint64_t)off, bs, start, end;
	struct cache_obj *obj;
	struct nfsc_attr a;
	bool has_attr = false;
	char *buf, *old;
	ssize_t got;
	size_t skip, n;

	pthread_mutex_lock(&ino->lock);
	obj = ino->obj;
	pthread_mutex_unlock(&ino->lock);

	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* 1. the cache */
	if (obj) {
		got = cache_read(obj, buf, size, uoff);
		if (got >= 0)
			goto reply;
	}
	/* 2. the last fetch */
	got = from_fetch(ino, buf, size, uoff);
	if (got >= 0)
		goto reply;
	free(buf);

	/* 3. the origin, whole cache blocks */
	bs = gw->cache ? cache_block_size(gw->cache) : 4096;
	start = uoff & ~(bs - 1);
	end = (uoff + size + bs - 1) & ~(bs - 1);
	buf = malloc(end - start);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = nfsc_pread(gw->nfs, &f->cred, &ino->fh, buf, end - start, start,
			 &a, &has_attr);
	if (has_attr)
		gw_inode_set_attr(ino, &a);
	if (got < 0) {
		fuse_reply_err(req, (int)-got);
		free(buf);
		return;
	}
	skip = (size_t)(uoff - start);
	n = (size_t)got > skip ? (size_t)got - skip : 0;
	fuse_reply_buf(req, buf + skip, n < size ? n : size);
	/* Whole blocks, or the tail of the file: the cache takes a copy. */
	if (obj && got > 0)
		cache_fill(obj, buf, (size_t)got, start);
	pthread_mutex_lock(&ino->lock);
	old = ino->fetch;
	ino->fetch = buf;
	ino->fetch_off = start;
	ino->fetch_len = (size_t)got;
	ino->fetch_eof = (uint64_t)got < end - start;
	pthread_mutex_unlock(&ino->lock);
	free(old);
	return;

reply:
	fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}
