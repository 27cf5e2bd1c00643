/* md_mem.c - what the gateway last knew of each node, in memory: live
 * records in one array (a free list threads the empty slots), found by
 * (node-id, kind, key) through one hash table; the records of a node-id
 * chained from its entry in another (its own records and its directory
 * entries apart, so that a new inode's records are found without walking
 * a large directory's names). At most NODES_MD_MAX records. No I/O
 * (md.c writes md.log); everything under m->lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nodes_i.h"

static uint32_t key_hash(uint64_t id, uint8_t kind, uint64_t key)
{
	return hash64(id ^ mix64(key + kind));
}

struct md_key {
	const struct md_mem *mm;
	uint64_t id, key;
	uint8_t kind;
};

static bool node_eq(const void *ctx, uint32_t v1)
{
	const struct md_key *k = ctx;

	return k->mm->nodev[v1 - 1].id == k->id;
}

static bool rec_eq(const void *ctx, uint32_t v1)
{
	const struct md_key *k = ctx;
	const struct md_rec *r = &k->mm->recs[v1 - 1];

	return r->id == k->id && r->kind == k->kind && r->key == k->key;
}

/* Slot of node id in by_node, or UINT64_MAX. */
static uint64_t node_slot(const struct md_mem *mm, uint64_t id)
{
	struct md_key k = { .mm = mm, .id = id };

	return htab_find(&mm->by_node, hash64(id), node_eq, &k);
}

/* Slot of the record (id, kind, key) in by_key, or UINT64_MAX. */
static uint64_t rec_slot(const struct md_mem *mm, uint64_t id, uint8_t kind,
			 uint64_t key)
{
	struct md_key k = { .mm = mm, .id = id, .kind = kind, .key = key };

	return htab_find(&mm->by_key, key_hash(id, kind, key), rec_eq, &k);
}

/* The record (id, kind, key), or NULL. Lock held. */
struct md_rec *md_mem_find(struct nodes_md *m, uint64_t id, uint8_t kind,
			   uint64_t key)
{
	struct md_mem *mm = &m->mem;
	uint64_t s = rec_slot(mm, id, kind, key);

	GW_ASSERT_HELD(&m->lock);
	return s == UINT64_MAX ? NULL : &mm->recs[mm->by_key.s[s].v1 - 1];
}

/* The node entry of id, or NULL. Lock held. */
struct md_node *md_mem_node(struct nodes_md *m, uint64_t id)
{
	struct md_mem *mm = &m->mem;
	uint64_t s = node_slot(mm, id);

	GW_ASSERT_HELD(&m->lock);
	return s == UINT64_MAX ? NULL : &mm->nodev[mm->by_node.s[s].v1 - 1];
}

/* v (an array of *cap elements of size bytes) doubled (1024 at first):
 * the new array, *cap updated; NULL if out of memory (v unchanged). */
static void *grow(void *v, uint32_t *cap, size_t size)
{
	uint32_t n = *cap ? *cap * 2 : 1024;
	void *p = realloc(v, (size_t)n * size);

	if (p)
		*cap = n;
	return p;
}

/* The node entry of id, made if missing (NULL: out of memory). */
static struct md_node *node_get(struct md_mem *mm, uint64_t id)
{
	uint64_t s = node_slot(mm, id);
	uint32_t idx;

	if (s != UINT64_MAX)
		return &mm->nodev[mm->by_node.s[s].v1 - 1];
	if (htab_reserve(&mm->by_node, 1))
		return NULL;
	if (mm->nfree1) {
		idx = mm->nfree1 - 1;
		mm->nfree1 = mm->nodev[idx].own1;
	} else {
		if (mm->nnodes == mm->nodes_cap) {
			struct md_node *n = grow(mm->nodev, &mm->nodes_cap,
						 sizeof(*n));

			if (!n)
				return NULL;
			mm->nodev = n;
		}
		idx = mm->nnodes++;
	}
	mm->nodev[idx] = (struct md_node){ .id = id };
	htab_insert(&mm->by_node, hash64(id), idx + 1);
	return &mm->nodev[idx];
}

/* Set (id, kind, key). 0, -ENOSPC (NODES_MD_MAX), -ENOMEM. Lock held. */
int md_mem_put(struct nodes_md *m, uint64_t id, uint8_t kind, uint64_t key,
	       uint64_t fetched, const void *blob, uint8_t len)
{
	struct md_mem *mm = &m->mem;
	struct md_rec *r = md_mem_find(m, id, kind, key);
	struct md_node *nd;
	uint32_t idx, *head;

	if (r) {
		mm->live_bytes -= MD_REC_FIXED + r->len;
		goto set;
	}
	if (mm->live >= NODES_MD_MAX)
		return -ENOSPC;
	if (htab_reserve(&mm->by_key, 1))
		return -ENOMEM;
	nd = node_get(mm, id);
	if (!nd)
		return -ENOMEM;
	if (mm->free1) {
		idx = mm->free1 - 1;
		mm->free1 = mm->recs[idx].next1;
	} else {
		if (mm->nrecs == mm->cap) {
			struct md_rec *n = grow(mm->recs, &mm->cap, sizeof(*n));

			if (!n)
				return -ENOMEM;
			mm->recs = n;
		}
		idx = mm->nrecs++;
	}
	r = &mm->recs[idx];
	r->id = id;
	r->kind = kind;
	r->key = key;
	htab_insert(&mm->by_key, key_hash(id, kind, key), idx + 1);
	head = kind == NODES_MD_DENT ? &nd->dent1 : &nd->own1;
	r->next1 = *head;
	*head = idx + 1;
	mm->live++;
set:
	r->fetched = fetched;
	r->len = len;
	if (len)
		memcpy(r->blob, blob, len);
	mm->live_bytes += MD_REC_FIXED + len;
	return 0;
}

/* Free a chain of records. */
static void chain_free(struct md_mem *mm, uint32_t r1)
{
	while (r1) {
		struct md_rec *r = &mm->recs[r1 - 1];
		uint32_t next = r->next1;

		htab_delete(&mm->by_key, rec_slot(mm, r->id, r->kind, r->key));
		mm->live--;
		mm->live_bytes -= MD_REC_FIXED + r->len;
		r->id = 0;
		r->next1 = mm->free1;
		mm->free1 = r1;
		r1 = next;
	}
}

/* Forget every record of id; false if it had none. Lock held. */
bool md_mem_drop(struct nodes_md *m, uint64_t id)
{
	struct md_mem *mm = &m->mem;
	uint64_t s = node_slot(mm, id);
	uint32_t idx;

	GW_ASSERT_HELD(&m->lock);
	if (s == UINT64_MAX)
		return false;
	idx = mm->by_node.s[s].v1 - 1;
	htab_delete(&mm->by_node, s);
	chain_free(mm, mm->nodev[idx].own1);
	chain_free(mm, mm->nodev[idx].dent1);
	mm->nodev[idx].id = 0;
	mm->nodev[idx].own1 = mm->nfree1;
	mm->nfree1 = idx + 1;
	return true;
}

/* Keep only the records of one kind. 0 or -ENOMEM (then some of them
 * are lost). Lock held. */
int md_mem_retain(struct nodes_md *m, uint8_t kind)
{
	struct md_mem old = m->mem;
	int ret = 0;

	GW_ASSERT_HELD(&m->lock);
	memset(&m->mem, 0, sizeof(m->mem));
	for (uint32_t i = 0; i < old.nrecs && !ret; i++)
		if (old.recs[i].id && old.recs[i].kind == kind)
			ret = md_mem_put(m, old.recs[i].id, kind,
					 old.recs[i].key, old.recs[i].fetched,
					 old.recs[i].blob, old.recs[i].len);
	md_mem_free(&old);
	return ret;
}

void md_mem_free(struct md_mem *mm)
{
	free(mm->recs);
	free(mm->nodev);
	htab_free(&mm->by_node);
	htab_free(&mm->by_key);
	memset(mm, 0, sizeof(*mm));
}
