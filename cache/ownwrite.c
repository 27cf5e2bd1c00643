/* ownwrite.c - the caller's own writes into the cache: cache_write and
 * cache_write_ref (bytes the caller wrote to the origin, merged with the
 * cached copy of partial edge blocks and then filled like read data, but
 * dropped rather than waited for when the cache disk is behind), and
 * cache_drop_range (blocks that no longer match the origin). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"

int cache_drop_range(struct cache_obj *o, uint64_t off, size_t len)
{
	uint32_t bs = o->c->block_size;
	int ret = 0;

	if (!len)
		return 0;
	pthread_mutex_lock(&o->lock);
	if (o->opened && !o->broken)
		ret = cache_obj_drop_blocks_locked(o, off / bs,
						   (off + len - 1) / bs + 1);
	pthread_mutex_unlock(&o->lock);
	return ret;
}

/* Bring the edge block b into blk (its logical length blen): the caller's
 * bytes over the verified cached copy. false if there is no such copy. */
static bool merge_edge(struct cache_obj *o, uint64_t b, size_t blen,
		       char *blk, const char *buf, uint64_t off, size_t len)
{
	uint64_t bstart = b * o->c->block_size;
	uint64_t s = off > bstart ? off : bstart;
	uint64_t e = off + len < bstart + blen ? off + len : bstart + blen;

	if (cache_read(o, blk, blen, bstart) != (ssize_t)blen)
		return false;
	memcpy(blk + (s - bstart), buf + (s - off), e - s);
	return true;
}

int cache_write(struct cache_obj *o, const void *buf, size_t len,
		uint64_t off)
{
	uint32_t bs = o->c->block_size;
	uint64_t size, first, last, start, end;
	bool head, tail;
	char *tmp;
	int ret;

	pthread_mutex_lock(&o->lock);
	size = o->opened ? o->hdr->size : 0;
	pthread_mutex_unlock(&o->lock);
	if (off + len > size)
		len = off < size ? size - off : 0;	/* size was set first */
	if (!len)
		return 0;
	/* 1. The block-aligned span the write touches, clipped at EOF, in
	 *    an aligned buffer the fill takes over (one copy, not two). */
	first = off / bs;
	last = (off + len - 1) / bs;
	start = first * bs;
	end = (last + 1) * bs < size ? (last + 1) * bs : size;
	tmp = cache_alloc_aligned(end - start);
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp + (off - start), buf, len);
	/* 2. Partial edges: merge with what is cached, else leave them out
	 *    (dropped: the cached copy no longer matches the origin). From
	 *    here until the fill is planned, no other own write may read
	 *    these blocks (o->write_lock). */
	head = off != start;
	tail = off + len != end;
	pthread_mutex_lock(&o->write_lock);
	if (first == last && (head || tail)) {
		if (!merge_edge(o, first, end - start, tmp, buf, off, len)) {
			ret = cache_drop_range(o, start, 1);
			pthread_mutex_unlock(&o->write_lock);
			free(tmp);
			return ret;
		}
	} else {
		if (head && !merge_edge(o, first, bs, tmp, buf, off, len)) {
			cache_drop_range(o, start, 1);
			start += bs;
		}
		if (tail && !merge_edge(o, last, end - last * bs,
					tmp + (last - first) * bs, buf, off, len)) {
			cache_drop_range(o, last * bs, 1);
			end = last * bs;
		}
	}
	/* 3. Fill the rest like any fill, but without waiting for room in
	 *    the fill queue; cache_fill_own frees tmp in every case. */
	ret = 0;
	if (end > start)
		ret = cache_fill_own(o, tmp + (start - first * bs),
				     end - start, start, free, tmp);
	else
		free(tmp);
	if (ret)
		cache_drop_range(o, start, end - start);
	pthread_mutex_unlock(&o->write_lock);
	return ret;
}

int cache_write_ref(struct cache_obj *o, void *buf, size_t len, uint64_t off,
		    void (*release)(void *), void *arg)
{
	uint32_t bs = o->c->block_size;
	uint64_t size;
	int ret;

	pthread_mutex_lock(&o->lock);
	size = o->opened ? o->hdr->size : 0;
	pthread_mutex_unlock(&o->lock);
	if (!len || off % bs || off >= size ||
	    (len % bs && off + len < size)) {
		/* Edges to merge, or nothing to write: cache_write's way. */
		ret = cache_write(o, buf, len, off);
		release(arg);
		return ret;
	}
	/* Whole blocks: no edge to merge, nothing read; the write lock still
	 * orders this fill against the merges of other own writes.
	 * cache_fill_own clips at the object's end and releases buf in every
	 * case. */
	pthread_mutex_lock(&o->write_lock);
	ret = cache_fill_own(o, buf, len, off, release, arg);
	if (ret)
		cache_drop_range(o, off, len);
	pthread_mutex_unlock(&o->write_lock);
	return ret;
}
