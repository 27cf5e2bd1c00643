/* table.c - the node-id table in memory: entry slots (a free list
 * threads the empty ones), handle bytes in one arena, and two
 * open-addressing hash tables (linear probing, backward-shift deletion):
 * id -> entry, handle -> entry. No I/O; callers hold the table's lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "nodes_i.h"

static uint64_t id_home(const struct nodes *t, uint64_t id)
{
	return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) >> t->tab_shift;
}

static uint64_t h_home(const struct nodes *t, uint32_t h32)
{
	return (uint32_t)(h32 * 0x9E3779B1u) >> t->tab_shift;
}

uint32_t tab_h32(const void *h, size_t hlen)
{
	return (uint32_t)XXH3_64bits(h, hlen);
}

const uint8_t *tab_handle(const struct nodes *t,
				 const struct tab_ent *e)
{
	return t->arena + e->hoff;
}

/* Entry index of id, or UINT32_MAX. Lock held. */
uint32_t tab_id_lookup(const struct nodes *t, uint64_t id)
{
	NODES_ASSERT_HELD(t);
	uint64_t mask = t->tab_cap - 1, i;

	if (!t->tab_cap)
		return UINT32_MAX;
	for (i = id_home(t, id); t->idtab[i]; i = (i + 1) & mask)
		if (t->ents[t->idtab[i] - 1].id == id)
			return t->idtab[i] - 1;
	return UINT32_MAX;
}

/* Slot of handle h in htab, or UINT64_MAX. Lock held. */
uint64_t tab_h_slot(const struct nodes *t, const void *h, size_t hlen,
		       uint32_t h32)
{
	NODES_ASSERT_HELD(t);
	uint64_t mask = t->tab_cap - 1, i;

	if (!t->tab_cap)
		return UINT64_MAX;
	for (i = h_home(t, h32); t->htab[i].ent1; i = (i + 1) & mask) {
		const struct tab_ent *e = &t->ents[t->htab[i].ent1 - 1];

		if (t->htab[i].h32 == h32 && e->hlen == hlen &&
		    !memcmp(tab_handle(t, e), h, hlen))
			return i;
	}
	return UINT64_MAX;
}

static void id_insert(struct nodes *t, uint32_t idx)
{
	uint64_t mask = t->tab_cap - 1, i;

	for (i = id_home(t, t->ents[idx].id); t->idtab[i]; i = (i + 1) & mask)
		;
	t->idtab[i] = idx + 1;
}

static void h_insert(struct nodes *t, uint32_t idx, uint32_t h32)
{
	uint64_t mask = t->tab_cap - 1, i;

	for (i = h_home(t, h32); t->htab[i].ent1; i = (i + 1) & mask)
		;
	t->htab[i].ent1 = idx + 1;
	t->htab[i].h32 = h32;
}

/* True if home k lies cyclically outside (i, j]: the entry at j may move
 * to the hole at i. */
static bool may_shift(uint64_t i, uint64_t j, uint64_t k)
{
	return i <= j ? (k <= i || k > j) : (k <= i && k > j);
}

static void id_delete(struct nodes *t, uint64_t id)
{
	uint64_t mask = t->tab_cap - 1, i, j;

	for (i = id_home(t, id); t->ents[t->idtab[i] - 1].id != id;
	     i = (i + 1) & mask)
		;
	for (j = (i + 1) & mask; t->idtab[j]; j = (j + 1) & mask) {
		if (may_shift(i, j, id_home(t, t->ents[t->idtab[j] - 1].id))) {
			t->idtab[i] = t->idtab[j];
			i = j;
		}
	}
	t->idtab[i] = 0;
}

static void h_delete(struct nodes *t, uint64_t i)
{
	uint64_t mask = t->tab_cap - 1, j;

	for (j = (i + 1) & mask; t->htab[j].ent1; j = (j + 1) & mask) {
		if (may_shift(i, j, h_home(t, t->htab[j].h32))) {
			t->htab[i] = t->htab[j];
			i = j;
		}
	}
	t->htab[i].ent1 = 0;
}

/* Make room for one more live entry in both tables (load <= 0.7). */
static int tab_reserve(struct nodes *t)
{
	uint64_t cap, old_cap = t->tab_cap;
	uint32_t *idtab;
	struct hslot *htab, *old_h = t->htab;
	unsigned shift;

	if ((t->live + 1) * 10 <= old_cap * 7)
		return 0;
	cap = old_cap ? old_cap * 2 : 1024;
	if (cap > (1ull << 32))
		return -ENOSPC;
	for (shift = 32; (1ull << (32 - shift)) < cap; shift--)
		;
	idtab = calloc(cap, sizeof(*idtab));
	htab = calloc(cap, sizeof(*htab));
	if (!idtab || !htab)
		goto out_nomem;
	free(t->idtab);
	t->idtab = idtab;
	t->htab = htab;
	t->tab_cap = cap;
	t->tab_shift = shift;
	for (uint32_t idx = 0; idx < t->nents; idx++)
		if (t->ents[idx].id)
			id_insert(t, idx);
	for (uint64_t i = 0; i < old_cap; i++)
		if (old_h[i].ent1)
			h_insert(t, old_h[i].ent1 - 1, old_h[i].h32);
	free(old_h);
	return 0;

out_nomem:
	free(idtab);
	free(htab);
	return -ENOMEM;
}

/* ---- entries ------------------------------------------------------------ */

/* Rewrite the arena without the bytes of removed handles. */
static int arena_compact(struct nodes *t)
{
	uint64_t cap = t->live_hbytes + t->live_hbytes / 2 + 4096, len = 0;
	uint8_t *a = malloc(cap);

	if (!a)
		return -ENOMEM;
	for (uint32_t idx = 0; idx < t->nents; idx++) {
		struct tab_ent *e = &t->ents[idx];

		if (!e->id)
			continue;
		memcpy(a + len, tab_handle(t, e), e->hlen);
		e->hoff = (uint32_t)len;
		len += e->hlen;
	}
	free(t->arena);
	t->arena = a;
	t->arena_len = len;
	t->arena_cap = cap;
	t->arena_dead = 0;
	return 0;
}

/* Insert a live entry (id and handle known absent). Lock held (wr). */
int tab_add(struct nodes *t, uint64_t id, uint64_t parent,
		   const void *h, size_t hlen, uint32_t h32)
{
	NODES_ASSERT_WR(t);
	struct tab_ent *e;
	uint32_t idx;
	int ret;

	ret = tab_reserve(t);
	if (ret)
		return ret;
	if (t->arena_len + hlen > t->arena_cap) {
		uint64_t cap = t->arena_cap ? t->arena_cap * 2 : 65536;
		uint8_t *a;

		if (t->arena_dead > t->arena_len / 2 &&
		    !arena_compact(t) && t->arena_len + hlen <= t->arena_cap)
			goto have_room;
		if (cap > NODES_ARENA_MAX)
			cap = NODES_ARENA_MAX;
		if (t->arena_len + hlen > cap)
			return -ENOSPC;
		a = realloc(t->arena, cap);
		if (!a)
			return -ENOMEM;
		t->arena = a;
		t->arena_cap = cap;
	}
have_room:
	if (t->free1) {
		idx = t->free1 - 1;
		t->free1 = (uint32_t)t->ents[idx].parent;
	} else {
		if (t->nents == t->ents_cap) {
			uint64_t cap = t->ents_cap ? t->ents_cap * 2ull : 4096;
			struct tab_ent *n;

			if (cap > NODES_SLOTS_MAX)
				cap = NODES_SLOTS_MAX;
			if (cap <= t->nents)
				return -ENOSPC;
			n = realloc(t->ents, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			t->ents = n;
			t->ents_cap = (uint32_t)cap;
		}
		idx = t->nents++;
	}
	e = &t->ents[idx];
	e->id = id;
	e->parent = parent;
	e->hoff = (uint32_t)t->arena_len;
	e->hlen = (uint8_t)hlen;
	memcpy(t->arena + t->arena_len, h, hlen);
	t->arena_len += hlen;
	id_insert(t, idx);
	h_insert(t, idx, h32);
	t->live++;
	t->live_hbytes += hlen;
	return 0;
}

/* Drop the live entry idx. Lock held (wr). */
void tab_remove(struct nodes *t, uint32_t idx)
{
	NODES_ASSERT_WR(t);
	struct tab_ent *e = &t->ents[idx];
	const uint8_t *h = tab_handle(t, e);
	uint32_t h32 = tab_h32(h, e->hlen);

	h_delete(t, tab_h_slot(t, h, e->hlen, h32));
	id_delete(t, e->id);
	t->live--;
	t->live_hbytes -= e->hlen;
	t->arena_dead += e->hlen;
	e->id = 0;
	e->parent = t->free1;
	t->free1 = idx + 1;
}
