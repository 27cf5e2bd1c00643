/* csc.c - the checksum cache of an open object: copies of stored checksums
 * of recently read sectors, so that a warm read needs no pread of the
 * metadata file (the data is still verified on every read); dropped on
 * every change of what it copies. All under o->lock (see cache_i.h). */
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "lockcheck.h"

void cache_csc_drop_locked(struct cache_obj *o)
{
	GW_ASSERT_HELD(&o->lock);
	free(o->csc);
	o->csc = NULL;
	o->csc_slots = 0;
	o->csc_seq++;
}

/* The stored checksums of sectors [first, first + n) change (or may). */
void cache_csc_changed_locked(struct cache_obj *o, uint64_t first,
			      uint64_t n)
{
	GW_ASSERT_HELD(&o->lock);
	o->csc_seq++;
	if (!o->csc || !n)
		return;
	for (uint64_t k = first / CACHE_CSC_CHUNK;
	     k <= (first + n - 1) / CACHE_CSC_CHUNK; k++) {
		struct cache_csum_chunk *ch = &o->csc[k % o->csc_slots];

		if (ch->tag == k + 1)
			ch->tag = 0;
	}
}

/* Copy the cached checksums of sectors [s0, s0 + n) to out: true if every
 * chunk they fall in is cached. */
bool cache_csc_lookup_locked(struct cache_obj *o, uint64_t s0, uint64_t n,
			     uint64_t *out)
{
	uint64_t k0 = s0 / CACHE_CSC_CHUNK, k1 = (s0 + n - 1) / CACHE_CSC_CHUNK;

	GW_ASSERT_HELD(&o->lock);
	if (!o->csc)
		return false;
	for (uint64_t k = k0; k <= k1; k++)
		if (o->csc[k % o->csc_slots].tag != k + 1)
			return false;
	for (uint64_t k = k0; k <= k1; k++) {
		const struct cache_csum_chunk *ch = &o->csc[k % o->csc_slots];
		uint64_t a = k * CACHE_CSC_CHUNK, b = a + CACHE_CSC_CHUNK;

		if (a < s0)
			a = s0;
		if (b > s0 + n)
			b = s0 + n;
		memcpy(out + (a - s0), ch->v + (a % CACHE_CSC_CHUNK), (b - a) * 8);
	}
	return true;
}

/* Cache chunks [k0, k0 + nk), whose checksums are at v (nk *
 * CACHE_CSC_CHUNK of them), read from disk while o->csc_seq was seq. */
void cache_csc_insert_locked(struct cache_obj *o, uint64_t k0, uint64_t nk,
			     const uint64_t *v, uint64_t seq)
{
	GW_ASSERT_HELD(&o->lock);
	if (!o->opened || o->broken || o->csc_seq != seq)
		return;		/* they changed meanwhile: not a copy */
	if (!o->csc) {
		uint64_t nsec = (o->hdr->size + CACHE_SECTOR - 1) / CACHE_SECTOR;
		uint64_t slots = (nsec + CACHE_CSC_CHUNK - 1) / CACHE_CSC_CHUNK;

		if (slots > CACHE_CSC_SLOTS_MAX)
			slots = CACHE_CSC_SLOTS_MAX;
		if (!slots)
			return;
		o->csc = calloc(slots, sizeof(*o->csc));
		if (!o->csc)
			return;	/* no cache: the next read preads again */
		o->csc_slots = (uint32_t)slots;
	}
	for (uint64_t i = 0; i < nk; i++) {
		struct cache_csum_chunk *ch = &o->csc[(k0 + i) % o->csc_slots];

		memcpy(ch->v, v + i * CACHE_CSC_CHUNK, sizeof(ch->v));
		ch->tag = k0 + i + 1;
	}
}

