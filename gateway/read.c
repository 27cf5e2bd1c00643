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

#include "cache.h"
#include "gw_i.h"

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
