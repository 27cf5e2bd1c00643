/* table.c - the node-id table in memory: entry slots (a free list
 * threads the empty ones), handle bytes in one arena, and two lookups
 * (hash.c): id -> entry, handle -> entry. No I/O; callers hold the
 * table's lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "nodes_i.h"

uint32_t tab_h32(const void *h, size_t hlen)
{
	return (uint32_t)XXH3_64bits(h, hlen);
}

const uint8_t *tab_handle(const struct nodes *t,
				 const struct tab_ent *e)
{
	return t->arena + e->hoff;
}

/* What a lookup compares an entry with: an id, or a handle. */
struct tab_key {
	const struct nodes *t;
	uint64_t id;
	const void *h;
	size_t hlen;
};

static bool id_eq(const void *ctx, uint32_t v1)
{
	const struct tab_key *k = ctx;

	return k->t->ents[v1 - 1].id == k->id;
}

static bool h_eq(const void *ctx, uint32_t v1)
{
	const struct tab_key *k = ctx;
	const struct tab_ent *e = &k->t->ents[v1 - 1];

	return e->hlen == k->hlen && !memcmp(tab_handle(k->t, e), k->h,
					     k->hlen);
}

static uint64_t id_slot(const struct nodes *t, uint64_t id)
{
	struct tab_key k = { .t = t, .id = id };

	return htab_find(&t->by_id, hash64(id), id_eq, &k);
}

static uint64_t h_slot(const struct nodes *t, const void *h, size_t hlen,
		       uint32_t h32)
{
	struct tab_key k = { .t = t, .h = h, .hlen = hlen };

	return htab_find(&t->by_h, h32, h_eq, &k);
}

/* Entry index of id, or UINT32_MAX. Lock held. */
uint32_t tab_id_lookup(const struct nodes *t, uint64_t id)
{
	NODES_ASSERT_HELD(t);
	uint64_t i = id_slot(t, id);

	return i == UINT64_MAX ? UINT32_MAX : t->by_id.s[i].v1 - 1;
}

/* Entry index of handle h (its tab_h32 is h32), or UINT32_MAX. Lock
 * held. */
uint32_t tab_h_lookup(const struct nodes *t, const void *h, size_t hlen,
		      uint32_t h32)
{
	NODES_ASSERT_HELD(t);
	uint64_t i = h_slot(t, h, hlen, h32);

	return i == UINT64_MAX ? UINT32_MAX : t->by_h.s[i].v1 - 1;
}

/* Make room for one more live entry in both lookups. */
static int tab_reserve(struct nodes *t)
{
	int ret = htab_reserve(&t->by_id, 1);

	return ret ? ret : htab_reserve(&t->by_h, 1);
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
	htab_insert(&t->by_id, hash64(id), idx + 1);
	htab_insert(&t->by_h, h32, idx + 1);
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

	htab_delete(&t->by_h, h_slot(t, h, e->hlen, h32));
	htab_delete(&t->by_id, id_slot(t, e->id));
	t->live--;
	t->live_hbytes -= e->hlen;
	t->arena_dead += e->hlen;
	e->id = 0;
	e->parent = t->free1;
	t->free1 = idx + 1;
}

/* Free the memory of the table (its lock and file are the caller's). */
void tab_free(struct nodes *t)
{
	free(t->ents);
	free(t->arena);
	htab_free(&t->by_id);
	htab_free(&t->by_h);
}
