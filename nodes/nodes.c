/* nodes.c - the node-id table's API (nodes.h): find, add, get,
 * set_parent, remove, list, room, stats; each takes the table's lock and
 * writes its record (log.c) before it changes the tables (table.c).
 */
#include <errno.h>
#include <string.h>

#include "nodes_i.h"

static bool bad_handle(const void *h, size_t hlen)
{
	return !h || hlen < 1 || hlen > NODES_HANDLE_MAX;
}

int nodes_find(struct nodes *t, const void *h, size_t hlen,
		     uint64_t *nodeid, uint32_t *gen)
{
	uint32_t h32, idx;
	int ret = -ENOENT;

	if (bad_handle(h, hlen))
		return -EINVAL;
	h32 = tab_h32(h, hlen);
	pthread_rwlock_rdlock(&t->lock);
	idx = tab_h_lookup(t, h, hlen, h32);
	if (idx != UINT32_MAX) {
		*nodeid = t->ents[idx].id;
		if (gen)
			*gen = t->log.gen;
		ret = 0;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* The record of a new entry on disk, then the entry in memory (undone on
 * disk if memory fails). Lock held (wr). 0 or -errno. */
static int add_locked(struct nodes *t, uint64_t id, uint64_t parent,
		      const void *h, size_t hlen, uint32_t h32)
{
	uint8_t rec[REC_MAX];
	size_t len;
	int ret;

	NODES_ASSERT_WR(t);
	len = nlog_rec_encode(rec, t->log.gen, REC_ADD, id, parent, h, hlen);
	ret = nlog_append(t, rec, len);
	if (ret)
		return ret;
	ret = tab_add(t, id, parent, h, hlen, h32);
	if (ret) {
		/* On disk but not in memory: undo on disk too. */
		len = nlog_rec_encode(rec, t->log.gen, REC_REMOVE, id, 0, NULL,
				      0);
		if (nlog_append(t, rec, len))
			nlog_set_broken(t, "undo of an add", -EIO);
	}
	return ret;
}

int nodes_add(struct nodes *t, const void *h, size_t hlen,
		    uint64_t parent, uint64_t *nodeid, uint32_t *gen)
{
	uint32_t h32, idx;
	uint64_t id;
	int ret;

	/* 1. Present already: the common case, under the read lock. */
	ret = nodes_find(t, h, hlen, nodeid, gen);
	if (ret != -ENOENT)
		return ret;
	if (t->readonly)
		return -EROFS;
	if (__atomic_load_n(&t->external_ids, __ATOMIC_RELAXED))
		return -ENOENT;
	h32 = tab_h32(h, hlen);
	pthread_rwlock_wrlock(&t->lock);
	/* 2. Someone may have added it between the locks. */
	idx = tab_h_lookup(t, h, hlen, h32);
	if (idx != UINT32_MAX) {
		*nodeid = t->ents[idx].id;
		ret = 0;
		goto out_gen;
	}
	/* 3. An id covered by a durable reservation; the record on disk
	 * before the mapping exists in memory. A failed write burns the id
	 * (it may be on disk), which costs nothing. Past the last id there
	 * is none (2^62 of them: only a damaged file gets there). */
	if (t->next_id >= NODES_ID_LIMIT) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	ret = nlog_reserve_ids(t);
	if (ret)
		goto out_unlock;
	id = t->next_id++;
	ret = add_locked(t, id, parent, h, hlen, h32);
	if (ret)
		goto out_unlock;
	*nodeid = id;
	ret = 1;
out_gen:
	if (gen)
		*gen = t->log.gen;
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int nodes_put(struct nodes *t, const void *h, size_t hlen, uint64_t parent,
	      uint64_t nodeid)
{
	uint32_t h32, idx;
	int ret;

	if (bad_handle(h, hlen) || nodeid < NODES_FIRST_ID ||
	    nodeid >= NODES_ID_LIMIT)
		return -EINVAL;
	if (t->readonly)
		return -EROFS;
	h32 = tab_h32(h, hlen);
	pthread_rwlock_wrlock(&t->lock);
	idx = tab_h_lookup(t, h, hlen, h32);
	if (idx != UINT32_MAX) {
		ret = t->ents[idx].id == nodeid ? 0 : -EEXIST;
		goto out_unlock;
	}
	if (tab_id_lookup(t, nodeid) != UINT32_MAX) {
		ret = -EEXIST;
		goto out_unlock;
	}
	ret = add_locked(t, nodeid, parent, h, hlen, h32);
	if (ret)
		goto out_unlock;
	/* As replay does: an id seen is never handed out again. */
	if (nodeid >= t->next_id)
		t->next_id = nodeid + 1;
	ret = 1;
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

void nodes_external_ids(struct nodes *t)
{
	__atomic_store_n(&t->external_ids, true, __ATOMIC_RELAXED);
}

int nodes_get(struct nodes *t, uint64_t nodeid, void *h,
		    size_t *hlen, uint64_t *parent, uint32_t *gen)
{
	const struct tab_ent *e;
	uint32_t idx;
	int ret = 0;

	pthread_rwlock_rdlock(&t->lock);
	idx = tab_id_lookup(t, nodeid);
	if (idx == UINT32_MAX) {
		ret = -ENOENT;
		goto out_unlock;
	}
	e = &t->ents[idx];
	if (*hlen < e->hlen) {
		*hlen = e->hlen;
		ret = -ERANGE;
		goto out_unlock;
	}
	memcpy(h, tab_handle(t, e), e->hlen);
	*hlen = e->hlen;
	if (parent)
		*parent = e->parent;
	if (gen)
		*gen = t->log.gen;
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* A change of nodeid's entry: its index, with the table write-locked
 * (0), or -EROFS / -ENOENT (not locked). */
static int change_begin(struct nodes *t, uint64_t nodeid, uint32_t *idx)
{
	if (t->readonly)
		return -EROFS;
	pthread_rwlock_wrlock(&t->lock);
	*idx = tab_id_lookup(t, nodeid);
	if (*idx != UINT32_MAX)
		return 0;
	pthread_rwlock_unlock(&t->lock);
	return -ENOENT;
}

/* Log a record without a handle (REC_PARENT, REC_REMOVE). Lock held. */
static int append_plain(struct nodes *t, uint8_t type, uint64_t a, uint64_t b)
{
	uint8_t rec[REC_MAX];

	return nlog_append(t, rec, nlog_rec_encode(rec, t->log.gen, type, a, b,
						   NULL, 0));
}

int nodes_set_parent(struct nodes *t, uint64_t nodeid,
			   uint64_t parent)
{
	uint32_t idx;
	int ret = change_begin(t, nodeid, &idx);

	if (ret)
		return ret;
	if (t->ents[idx].parent != parent) {
		ret = append_plain(t, REC_PARENT, nodeid, parent);
		if (!ret)
			t->ents[idx].parent = parent;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int nodes_remove(struct nodes *t, uint64_t nodeid)
{
	uint32_t idx;
	int ret = change_begin(t, nodeid, &idx);

	if (ret)
		return ret;
	ret = append_plain(t, REC_REMOVE, nodeid, 0);
	if (!ret) {
		tab_remove(t, idx);
		nlog_maybe_compact(t);
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

void nodes_stats(struct nodes *t, struct nodes_stats *st)
{
	pthread_rwlock_rdlock(&t->lock);
	st->entries = t->live;
	st->file_bytes = t->log.end;
	st->live_bytes = nlog_live_bytes(t);
	st->compactions = t->compactions;
	st->next_id = t->next_id;
	st->reserved_id = t->hwm;
	st->skipped_bytes = t->skipped_bytes;
	st->generation = t->log.gen;
	st->compacted = t->compacted;
	pthread_rwlock_unlock(&t->lock);
}

int nodes_room(struct nodes *t)
{
	int ret = 0;

	if (t->readonly)
		return -EROFS;
	pthread_rwlock_wrlock(&t->lock);
	/* Ids, and in memory: entry slots and arena room for a few adds. */
	if (t->next_id > NODES_ID_LIMIT - NODES_ROOM_ENTRIES ||
	    (t->free1 == 0 && t->nents + (uint64_t)NODES_ROOM_ENTRIES >
	     NODES_SLOTS_MAX) ||
	    t->arena_len - t->arena_dead + (uint64_t)NODES_ROOM_ENTRIES *
	    NODES_HANDLE_MAX > NODES_ARENA_MAX ||
	    (t->live + NODES_ROOM_ENTRIES) * 10 > (1ull << 32) * 7)
		ret = -ENOSPC;
	else
		ret = nlog_room(t);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

size_t nodes_list(struct nodes *t, uint64_t *cursor,
			struct nodes_ent *out, size_t max)
{
	size_t n = 0;
	uint64_t i;

	pthread_rwlock_rdlock(&t->lock);
	for (i = *cursor; i < t->nents && n < max; i++) {
		const struct tab_ent *e = &t->ents[i];

		if (!e->id)
			continue;
		out[n].id = e->id;
		out[n].hlen = e->hlen;
		memcpy(out[n].h, tab_handle(t, e), e->hlen);
		n++;
	}
	pthread_rwlock_unlock(&t->lock);
	*cursor = i;
	return n;
}
