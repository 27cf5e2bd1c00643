/* presence.c - which blocks of an object are present: its presence bitmap
 * in memory, marking a run of blocks present with their checksums (the
 * checksums first), unmarking a block, and stopping the fills in flight
 * from marking one. All under o->lock. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "cache_i.h"
#include "lockcheck.h"

int cache_obj_alloc_bitmap(struct cache_obj *o, uint64_t size)
{
	uint64_t n = cache_meta_nblocks(size, o->c->block_size);
	uint64_t *bm;

	if (size > CACHE_OBJ_SIZE_MAX)
		return -EFBIG;
	bm = calloc(n / 64 + 1, 8);
	if (!bm)
		return -ENOMEM;
	free(o->bitmap);
	o->bitmap = bm;
	o->nblocks = n;
	return 0;
}

/* Stop fills in flight from marking blk: their data may be overwritten by
 * another fill in any order, so neither may vouch for it. */
void cache_obj_cancel_locked(struct cache_obj *o, uint64_t blk)
{
	GW_ASSERT_HELD(&o->lock);
	for (struct cache_req *r = o->inflight; r; r = r->next)
		if (blk >= r->first && blk < r->first + r->nblk)
			r->skip[blk - r->first] = 1;
}

int cache_obj_unmark_locked(struct cache_obj *o, uint64_t blk)
{
	uint64_t *w = &o->bitmap[blk / 64];

	GW_ASSERT_HELD(&o->lock);
	if (!cache_bit(o->bitmap, blk))
		return 0;
	*w &= ~(1ull << (blk % 64));
	o->unmark_seq++;
	return cache_pwrite(o->c, o->meta_fd, w, 8,
			    cache_meta_word_off(o->c->block_size, blk));
}

/* Mark blocks [first, first + n), all under one presence word, present
 * with their checksums (n * cache_spb(bs) of them, contiguous on disk,
 * since a super-group holds whole words' worth of blocks). The checksums
 * go first: until the presence word says so, a half-written entry is never
 * consulted, and a stale one cannot verify (salted). */
int cache_obj_mark_run_locked(struct cache_obj *o, uint64_t first,
			      uint32_t n, const uint64_t *csums)
{
	uint32_t bs = o->c->block_size;
	uint64_t *w = &o->bitmap[first / 64];
	int ret;

	GW_ASSERT_HELD(&o->lock);
	assert(n && first / 64 == (first + n - 1) / 64);
	/* Whether or not the write made it, the cached copy is stale. */
	cache_csc_changed_locked(o, first * cache_spb(bs),
				 (uint64_t)n * cache_spb(bs));
	ret = cache_pwrite(o->c, o->meta_fd, csums,
			   (size_t)n * cache_spb(bs) * 8,
			   cache_meta_csum_off(bs, first));
	if (ret)
		return ret;
	for (uint32_t i = 0; i < n; i++)
		*w |= 1ull << ((first + i) % 64);
	return cache_pwrite(o->c, o->meta_fd, w, 8,
			    cache_meta_word_off(bs, first));
}
