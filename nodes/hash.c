/* hash.c - the one hash table of the node-id table and of md.log: open
 * addressing, linear probing, backward-shift deletion (no tombstones, so
 * a table whose entries come and go does not fill up). Each slot keeps
 * its entry's 32-bit hash, so growing and deleting never look at the
 * entries, and a probe compares hashes before it calls the caller's eq
 * (htab_find, nodes_i.h). The caller's lock guards it.
 */
#include <errno.h>
#include <stdlib.h>

#include "nodes_i.h"

/* Room for n more entries (load at most 70 %): 0, -ENOMEM, or -ENOSPC
 * (beyond 2^32 slots). The table is unchanged on failure. */
int htab_reserve(struct htab *t, uint64_t more)
{
	struct htab old = *t;
	uint64_t cap = t->cap ? t->cap : 1024;

	while ((t->n + more) * 10 > cap * 7)
		cap *= 2;
	if (cap == t->cap)
		return 0;
	if (cap > (1ull << 32))
		return -ENOSPC;
	t->s = calloc(cap, sizeof(*t->s));
	if (!t->s) {
		*t = old;
		return -ENOMEM;
	}
	t->cap = cap;
	t->n = 0;
	for (t->shift = 32; (1ull << (32 - t->shift)) < cap; t->shift--)
		;
	for (uint64_t i = 0; i < old.cap; i++)
		if (old.s[i].v1)
			htab_insert(t, old.s[i].h32, old.s[i].v1);
	free(old.s);
	return 0;
}

/* Insert v1 (hash h32); htab_reserve made room. */
void htab_insert(struct htab *t, uint32_t h32, uint32_t v1)
{
	uint64_t mask = t->cap - 1, i;

	for (i = htab_home(t, h32); t->s[i].v1; i = (i + 1) & mask)
		;
	t->s[i].v1 = v1;
	t->s[i].h32 = h32;
	t->n++;
}

/* True if home k lies cyclically outside (i, j]: the entry at j may move
 * to the hole at i. */
static bool may_shift(uint64_t i, uint64_t j, uint64_t k)
{
	return i <= j ? (k <= i || k > j) : (k <= i && k > j);
}

/* Empty slot i (from htab_find); later entries of its run move up. */
void htab_delete(struct htab *t, uint64_t i)
{
	uint64_t mask = t->cap - 1, j;

	for (j = (i + 1) & mask; t->s[j].v1; j = (j + 1) & mask) {
		if (may_shift(i, j, htab_home(t, t->s[j].h32))) {
			t->s[i] = t->s[j];
			i = j;
		}
	}
	t->s[i].v1 = 0;
	t->n--;
}

void htab_free(struct htab *t)
{
	free(t->s);
	*t = (struct htab){ 0 };
}
