/* nodes.c - the persistent node-id table: an append-only log of small
 * checksummed records, replayed at open into two open-addressing hash
 * tables (by id, by handle).
 *
 * On disk (little-endian), "nodes.log":
 *   header, 64 bytes: "CGWNODES", u32 version, u32 generation,
 *     u64 reserved_id, 32 bytes zero, u64 XXH3-64 of bytes 0..55.
 *   records, 26 + hlen bytes each:
 *     u8 type, u8 hlen, u64 a, u64 b, hlen bytes handle,
 *     u64 XXH3-64 (seed = generation) of everything before it.
 *     ADD     a = id, b = parent, handle (1..64 bytes)
 *     PARENT  a = id, b = parent
 *     REMOVE  a = id
 *     RESERVE a = high-water mark: ids below it may have been handed out
 *
 * Why ids are never reused: every record is written with pwrite(2) before
 * the call returns (survives SIGKILL), and before the first id of a batch
 * is handed out a RESERVE record for the whole batch is written and
 * fdatasync'd (survives power loss). Open restarts the counter at the
 * largest of the header's reserved_id, every RESERVE and every ADD id + 1.
 * Seeding the checksum with the generation keeps records of another table
 * (or copied handle bytes) from passing as ours.
 *
 * Room: the file keeps NODES_ROOM_CHUNK bytes allocated beyond its end
 * (fallocate, KEEP_SIZE), topped up by cache_nodes_room() before a caller
 * makes something at the origin, so a full disk refuses the CREATE before
 * the origin makes the file, not after. Removals leave dead records: the
 * file is rewritten (compacted) when it is more than twice what its live
 * entries need, at open and at run time.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "cache.h"
#include "cache_i.h"

#define NODES_MAGIC "CGWNODES"
#define NODES_VERSION 1u
#define NODES_HDR_SIZE 64
#define NODES_TMP CACHE_NODES_FILE ".tmp"

#define REC_ADD 0xA1
#define REC_PARENT 0xA2
#define REC_REMOVE 0xA3
#define REC_RESERVE 0xA4
#define REC_FIXED 26			/* record bytes without the handle */
#define REC_MAX (REC_FIXED + CACHE_NODES_HANDLE_MAX)

#define NODES_FIRST_ID 2		/* 1 is the root */
#define NODES_ID_LIMIT (1ull << 62)	/* larger ids in a record: damage */
#define NODES_BATCH 65536		/* ids reserved per fdatasync */
#define NODES_LOAD_BUF (4u << 20)
#define NODES_COMPACT_SLACK (64u << 10)	/* bytes of waste never compacted */
#define NODES_ROOM_LOW (16u << 10)	/* room() tops up below this much */
#define NODES_ROOM_CHUNK (64u << 10)	/* bytes allocated ahead at a time */
#define NODES_ROOM_ENTRIES 1024		/* in-memory headroom room() wants */
#define NODES_ARENA_MAX UINT32_MAX	/* bytes of handles, all entries */
#define NODES_SLOTS_MAX (UINT32_MAX - 1)	/* entry slots */

struct node_ent {
	uint64_t id;			/* 0: free slot */
	uint64_t parent;		/* free slot: next free index + 1 */
	uint32_t hoff;			/* handle offset in arena */
	uint8_t hlen;
};

struct hslot {
	uint32_t ent1;			/* entry index + 1, 0: empty */
	uint32_t h32;			/* low 32 bits of XXH3 of the handle */
};

struct cache_nodes {
	bool readonly;			/* immutable */
	int dirfd;			/* immutable */
	uint32_t gen;			/* immutable: the table's generation */

	pthread_rwlock_t lock;		/* guards everything below */
	int fd;				/* nodes.log; writes under lock (wr) */
	uint64_t log_end;		/* bytes of valid log */
	uint64_t next_id;		/* next id to hand out */
	uint64_t hwm;			/* ids < hwm are durably reserved */
	bool broken;			/* the file cannot be trusted (a failed
					 * fdatasync, a torn record that could
					 * not be cut): rewrite it from memory
					 * before the next change */

	struct node_ent *ents;		/* entry slots */
	uint32_t nents, ents_cap;	/* slots used (live + free), capacity */
	uint32_t free1;			/* first free slot + 1, 0: none */
	uint64_t live;			/* live entries */
	uint64_t live_hbytes;		/* sum of live handle lengths */

	uint8_t *arena;			/* handle bytes */
	uint64_t arena_len, arena_cap, arena_dead; /* bytes */

	uint32_t *idtab;		/* by id: entry index + 1, 0 empty */
	struct hslot *htab;		/* by handle */
	uint64_t tab_cap;		/* slots of each table, power of 2 */
	unsigned tab_shift;		/* 32 - log2(tab_cap) */

	uint64_t room_end;		/* file bytes allocated (fallocate) */
	bool room_unsupported;		/* fallocate: EOPNOTSUPP */
	uint64_t compact_retry;		/* a failed run-time compaction:
					 * not again before log_end > this */
	uint64_t compactions;		/* run-time compactions done */

	uint64_t skipped_bytes;		/* set at open */
	bool compacted;			/* set at open */

	/* Fault injection: __atomic. */
	int inject_err;			/* positive errno */
	int inject_count;		/* <0 forever, 0 off */
	int sync_err;			/* the same, fdatasyncs only */
	int sync_count;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- fault injection and syscalls -------------------------------------- */

void cache_nodes_inject_error(struct cache_nodes *t, int err, int count)
{
	__atomic_store_n(&t->inject_err, err < 0 ? -err : err,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&t->inject_count, count, __ATOMIC_RELEASE);
}

void cache_nodes_inject_sync_error(struct cache_nodes *t, int err, int count)
{
	__atomic_store_n(&t->sync_err, err < 0 ? -err : err, __ATOMIC_RELAXED);
	__atomic_store_n(&t->sync_count, count, __ATOMIC_RELEASE);
}

static int nodes_inject(struct cache_nodes *t)
{
	return cache_inject_take(&t->inject_count, &t->inject_err);
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Bytes read (short only at end of file) or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int fsync_hooked(struct cache_nodes *t, int fd)
{
	int ret = cache_inject_take(&t->sync_count, &t->sync_err);

	if (!ret)
		ret = nodes_inject(t);

	if (ret)
		return ret;
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* ---- encoding ----------------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static void hdr_encode(uint8_t *p, uint32_t gen, uint64_t reserved)
{
	memset(p, 0, NODES_HDR_SIZE);
	memcpy(p, NODES_MAGIC, 8);
	put32(p + 8, NODES_VERSION);
	put32(p + 12, gen);
	put64(p + 16, reserved);
	put64(p + 56, XXH3_64bits(p, 56));
}

/* Encode a record into p (REC_MAX bytes); returns its length. */
static size_t rec_encode(uint8_t *p, uint32_t gen, uint8_t type, uint64_t a,
			 uint64_t b, const void *h, size_t hlen)
{
	p[0] = type;
	p[1] = (uint8_t)hlen;
	put64(p + 2, a);
	put64(p + 10, b);
	if (hlen)
		memcpy(p + 18, h, hlen);
	put64(p + 18 + hlen, XXH3_64bits_withSeed(p, 18 + hlen, gen));
	return REC_FIXED + hlen;
}

/* Length of the valid record at p (avail bytes), or 0 if there is none. */
static size_t rec_check(const uint8_t *p, size_t avail, uint32_t gen)
{
	size_t hlen;

	if (avail < REC_FIXED)
		return 0;
	hlen = p[1];
	switch (p[0]) {
	case REC_ADD:
		if (hlen < 1 || hlen > CACHE_NODES_HANDLE_MAX)
			return 0;
		break;
	case REC_PARENT:
	case REC_REMOVE:
	case REC_RESERVE:
		if (hlen)
			return 0;
		break;
	default:
		return 0;
	}
	if (avail < REC_FIXED + hlen)
		return 0;
	if (get64(p + 18 + hlen) != XXH3_64bits_withSeed(p, 18 + hlen, gen))
		return 0;
	return REC_FIXED + hlen;
}

/* ---- hash tables (linear probing, backward-shift deletion) -------------- */

static uint64_t id_home(const struct cache_nodes *t, uint64_t id)
{
	return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) >> t->tab_shift;
}

static uint64_t h_home(const struct cache_nodes *t, uint32_t h32)
{
	return (uint32_t)(h32 * 0x9E3779B1u) >> t->tab_shift;
}

static uint32_t handle_h32(const void *h, size_t hlen)
{
	return (uint32_t)XXH3_64bits(h, hlen);
}

static const uint8_t *ent_handle(const struct cache_nodes *t,
				 const struct node_ent *e)
{
	return t->arena + e->hoff;
}

/* Entry index of id, or UINT32_MAX. Lock held. */
static uint32_t id_lookup(const struct cache_nodes *t, uint64_t id)
{
	uint64_t mask = t->tab_cap - 1, i;

	if (!t->tab_cap)
		return UINT32_MAX;
	for (i = id_home(t, id); t->idtab[i]; i = (i + 1) & mask)
		if (t->ents[t->idtab[i] - 1].id == id)
			return t->idtab[i] - 1;
	return UINT32_MAX;
}

/* Slot of handle h in htab, or UINT64_MAX. Lock held. */
static uint64_t h_slot(const struct cache_nodes *t, const void *h, size_t hlen,
		       uint32_t h32)
{
	uint64_t mask = t->tab_cap - 1, i;

	if (!t->tab_cap)
		return UINT64_MAX;
	for (i = h_home(t, h32); t->htab[i].ent1; i = (i + 1) & mask) {
		const struct node_ent *e = &t->ents[t->htab[i].ent1 - 1];

		if (t->htab[i].h32 == h32 && e->hlen == hlen &&
		    !memcmp(ent_handle(t, e), h, hlen))
			return i;
	}
	return UINT64_MAX;
}

static void id_insert(struct cache_nodes *t, uint32_t idx)
{
	uint64_t mask = t->tab_cap - 1, i;

	for (i = id_home(t, t->ents[idx].id); t->idtab[i]; i = (i + 1) & mask)
		;
	t->idtab[i] = idx + 1;
}

static void h_insert(struct cache_nodes *t, uint32_t idx, uint32_t h32)
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

static void id_delete(struct cache_nodes *t, uint64_t id)
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

static void h_delete(struct cache_nodes *t, uint64_t i)
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
static int tab_reserve(struct cache_nodes *t)
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
static int arena_compact(struct cache_nodes *t)
{
	uint64_t cap = t->live_hbytes + t->live_hbytes / 2 + 4096, len = 0;
	uint8_t *a = malloc(cap);

	if (!a)
		return -ENOMEM;
	for (uint32_t idx = 0; idx < t->nents; idx++) {
		struct node_ent *e = &t->ents[idx];

		if (!e->id)
			continue;
		memcpy(a + len, ent_handle(t, e), e->hlen);
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
static int ent_add(struct cache_nodes *t, uint64_t id, uint64_t parent,
		   const void *h, size_t hlen, uint32_t h32)
{
	struct node_ent *e;
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
			struct node_ent *n;

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
static void ent_remove(struct cache_nodes *t, uint32_t idx)
{
	struct node_ent *e = &t->ents[idx];
	const uint8_t *h = ent_handle(t, e);
	uint32_t h32 = handle_h32(h, e->hlen);

	h_delete(t, h_slot(t, h, e->hlen, h32));
	id_delete(t, e->id);
	t->live--;
	t->live_hbytes -= e->hlen;
	t->arena_dead += e->hlen;
	e->id = 0;
	e->parent = t->free1;
	t->free1 = idx + 1;
}

/* ---- the log ------------------------------------------------------------ */

/* Bytes a compacted file of the live entries takes. Lock held. */
static uint64_t live_file_bytes(const struct cache_nodes *t)
{
	return NODES_HDR_SIZE + t->live * REC_FIXED + t->live_hbytes;
}


static int recover(struct cache_nodes *t);
static int room_on_disk(struct cache_nodes *t);
static void set_broken(struct cache_nodes *t, const char *what, int err);

/* Append one record. On failure the log is cut back to where it was; if
 * even that fails the table is marked broken (the next change rewrites
 * it), since a torn record must not sit in front of later ones. Lock held
 * (wr). */
static int log_append(struct cache_nodes *t, const uint8_t *rec, size_t len)
{
	int ret = recover(t);

	if (ret)
		return ret;
	ret = nodes_inject(t);
	if (!ret)
		ret = pwrite_full(t->fd, rec, len, t->log_end);
	if (ret) {
		cache_log("node-id table: write failed (%s)", strerror(-ret));
		if (ftruncate(t->fd, (off_t)t->log_end) < 0)
			set_broken(t, "truncate after a failed write", -errno);
		return ret;
	}
	t->log_end += len;
	return 0;
}

/* Make sure next_id < hwm: reserve a batch durably. Lock held (wr). */
static int reserve_ids(struct cache_nodes *t)
{
	uint8_t rec[REC_MAX];
	uint64_t hwm = t->next_id + NODES_BATCH;
	size_t len;
	int ret;

	if (t->next_id < t->hwm)
		return 0;
	len = rec_encode(rec, t->gen, REC_RESERVE, hwm, 0, NULL, 0);
	ret = log_append(t, rec, len);
	if (ret)
		return ret;
	ret = fsync_hooked(t, t->fd);
	if (ret) {
		set_broken(t, "fdatasync", ret);
		return ret;
	}
	t->hwm = hwm;
	return 0;
}

/* ---- open: replay ------------------------------------------------------- */

struct replay {
	uint64_t max_id;		/* largest ADD id seen */
	uint64_t reserved;		/* largest RESERVE seen */
	uint64_t good_end;		/* end of the last valid record */
	uint64_t bad_run;		/* invalid bytes since the last valid one */
	bool mid_damage;		/* invalid bytes before a valid record */
};

/* Apply one valid record. -errno only for out-of-memory. */
static int replay_rec(struct cache_nodes *t, struct replay *rp,
		      const uint8_t *p, size_t len)
{
	uint64_t a = get64(p + 2), b = get64(p + 10);
	size_t hlen = p[1];
	const uint8_t *h = p + 18;
	uint32_t idx, h32;
	uint64_t slot;

	if (p[0] == REC_RESERVE) {
		if (a < NODES_ID_LIMIT && a > rp->reserved)
			rp->reserved = a;
		return 0;
	}
	if (a < NODES_FIRST_ID || a >= NODES_ID_LIMIT) {
		/* Checksummed but impossible: count as damage, use nothing. */
		t->skipped_bytes += len;
		rp->mid_damage = true;
		return 0;
	}
	idx = id_lookup(t, a);
	switch (p[0]) {
	case REC_PARENT:
		if (idx != UINT32_MAX)
			t->ents[idx].parent = b;
		return 0;
	case REC_REMOVE:
		if (idx != UINT32_MAX)
			ent_remove(t, idx);
		return 0;
	}
	/* REC_ADD */
	if (a > rp->max_id)
		rp->max_id = a;
	h32 = handle_h32(h, hlen);
	if (idx != UINT32_MAX) {
		/* The same id added twice cannot happen; if the handles differ
		 * we cannot tell which is right, so trust neither. */
		const struct node_ent *e = &t->ents[idx];

		if (e->hlen != hlen || memcmp(ent_handle(t, e), h, hlen)) {
			ent_remove(t, idx);
			t->skipped_bytes += len;
			rp->mid_damage = true;
		}
		return 0;
	}
	/* add() only adds absent handles: an older id of this handle was
	 * removed, even if its REMOVE record was lost. */
	slot = h_slot(t, h, hlen, h32);
	if (slot != UINT64_MAX)
		ent_remove(t, t->htab[slot].ent1 - 1);
	return ent_add(t, a, b, h, hlen, h32);
}

/* Replay every record after the header. An invalid byte is skipped and the
 * scan resumes at the next byte, so damage in the middle loses only the
 * records it hit. */
static int replay_log(struct cache_nodes *t, struct replay *rp)
{
	uint8_t *buf = malloc(NODES_LOAD_BUF);
	uint64_t boff = NODES_HDR_SIZE;	/* file offset of buf[0] */
	size_t blen = 0, pos = 0;
	bool eof = false;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	rp->good_end = NODES_HDR_SIZE;
	for (;;) {
		size_t len;

		if (blen - pos < REC_MAX && !eof) {
			ssize_t n;

			memmove(buf, buf + pos, blen - pos);
			boff += pos;
			blen -= pos;
			pos = 0;
			n = pread_full(t->fd, buf + blen, NODES_LOAD_BUF - blen,
				       boff + blen);
			if (n < 0) {
				ret = (int)n;
				goto out;
			}
			eof = (size_t)n < NODES_LOAD_BUF - blen;
			blen += (size_t)n;
		}
		if (pos >= blen)
			break;
		len = rec_check(buf + pos, blen - pos, t->gen);
		if (!len) {
			pos++;
			rp->bad_run++;
			t->skipped_bytes++;
			continue;
		}
		ret = replay_rec(t, rp, buf + pos, len);
		if (ret)
			goto out;
		if (rp->bad_run)
			rp->mid_damage = true;
		rp->bad_run = 0;
		pos += len;
		rp->good_end = boff + pos;
	}
out:
	free(buf);
	return ret;
}

/* ---- open: files -------------------------------------------------------- */

/* Write a complete table file to NODES_TMP: header plus an ADD record per
 * live entry; fsync it. Returns the fd (flocked when writable) or -errno. */
static int write_tmp(struct cache_nodes *t, uint64_t reserved,
		     uint64_t *size)
{
	size_t cap = 1u << 20, used = NODES_HDR_SIZE;
	uint8_t *buf = malloc(cap);
	uint64_t off = 0;
	int fd, ret;

	if (!buf)
		return -ENOMEM;
	fd = openat(t->dirfd, NODES_TMP,
		    O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		goto out_free;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -errno;
		goto out_close;
	}
	hdr_encode(buf, t->gen, reserved);
	for (uint32_t idx = 0; ; idx++) {
		const struct node_ent *e;

		if (used + REC_MAX > cap || idx == t->nents) {
			ret = nodes_inject(t);
			if (!ret)
				ret = pwrite_full(fd, buf, used, off);
			if (ret)
				goto out_unlink;
			off += used;
			used = 0;
		}
		if (idx == t->nents)
			break;
		e = &t->ents[idx];
		if (e->id)
			used += rec_encode(buf + used, t->gen, REC_ADD, e->id,
					   e->parent, ent_handle(t, e),
					   e->hlen);
	}
	ret = fsync_hooked(t, fd);
	if (ret)
		goto out_unlink;
	free(buf);
	*size = off;
	return fd;

out_unlink:
	unlinkat(t->dirfd, NODES_TMP, 0);
out_close:
	close(fd);
out_free:
	free(buf);
	return ret;
}

/* Replace nodes.log with a file of the live entries only: write a new
 * file, fsync, rename, fsync the directory. Lock held or not yet shared. */
static int compact(struct cache_nodes *t)
{
	uint64_t size = 0;
	int fd, ret;

	fd = write_tmp(t, t->next_id, &size);
	if (fd < 0)
		return fd;
	ret = nodes_inject(t);
	if (!ret && renameat(t->dirfd, NODES_TMP, t->dirfd,
			     CACHE_NODES_FILE) < 0)
		ret = -errno;
	if (ret)
		goto out_unlink;
	/* If this fails the rename may not be durable yet; both files are
	 * complete tables with the same ids, so either is right. */
	(void)fsync_hooked(t, t->dirfd);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = fd;
	t->log_end = size;
	t->room_end = size;	/* a new file: nothing allocated ahead */
	t->hwm = t->next_id;
	t->compacted = true;
	return 0;

out_unlink:
	unlinkat(t->dirfd, NODES_TMP, 0);
	close(fd);
	return ret;
}

/* A write to the log failed in a way that leaves the file untrustworthy.
 * After a failed fsync the kernel may have dropped the dirty pages:
 * nothing written since the last good one can be trusted to be there.
 * The table in memory is still right, so the next change rewrites the
 * file from it (recover) instead of appending to this one. */
static void set_broken(struct cache_nodes *t, const char *what, int err)
{
	if (!t->broken)
		cache_log("node-id table: %s failed (%s); the table will be rewritten",
			  what, strerror(-err));
	t->broken = true;
}

/* A broken table: write a new file of the live entries (compact: new
 * file, fsync, rename), which needs nothing of the old one. 0 if the table
 * is whole again; else -errno of the rewrite, and the next change tries
 * again. Lock held (wr). */
static int recover(struct cache_nodes *t)
{
	bool compacted = t->compacted;	/* "open rewrote the file" */
	int ret;

	if (!t->broken)
		return 0;
	ret = compact(t);
	if (ret) {
		cache_log("node-id table: rewrite failed (%s)", strerror(-ret));
		return ret;
	}
	t->broken = false;
	t->compacted = compacted;
	cache_log("node-id table: rewritten, writable again");
	return 0;
}

static int new_generation(uint32_t *gen)
{
	do {
		if (getrandom(gen, sizeof(*gen), 0) != sizeof(*gen))
			return errno ? -errno : -EIO;
	} while (!*gen);
	return 0;
}

/* Read and check the header. */
static int read_header(struct cache_nodes *t, char *err, size_t errlen)
{
	uint8_t hdr[NODES_HDR_SIZE];
	ssize_t n = pread_full(t->fd, hdr, sizeof(hdr), 0);
	uint32_t version;

	if (n < 0) {
		seterr(err, errlen, "%s: read: %s", CACHE_NODES_FILE,
		       strerror((int)-n));
		return (int)n;
	}
	if (n < NODES_HDR_SIZE || memcmp(hdr, NODES_MAGIC, 8) ||
	    get64(hdr + 56) != XXH3_64bits(hdr, 56)) {
		seterr(err, errlen, "%s: not a node-id table or header damaged",
		       CACHE_NODES_FILE);
		return -EBADMSG;
	}
	version = get32(hdr + 8);
	if (version != NODES_VERSION) {
		seterr(err, errlen, "%s: format version %u, expected %u",
		       CACHE_NODES_FILE, version, NODES_VERSION);
		return -EPROTO;
	}
	t->gen = get32(hdr + 12);
	t->next_id = get64(hdr + 16);
	if (!t->gen || t->next_id >= NODES_ID_LIMIT) {
		seterr(err, errlen, "%s: header damaged", CACHE_NODES_FILE);
		return -EBADMSG;
	}
	return 0;
}

/* Open nodes.log, creating an empty table when writable and missing. */
static int open_file(struct cache_nodes *t, const char *dir, char *err,
		     size_t errlen)
{
	int ret;

	/* No link inside the cache directory is followed. */
	t->fd = openat(t->dirfd, CACHE_NODES_FILE,
		       (t->readonly ? O_RDONLY : O_RDWR) | O_NOFOLLOW |
		       O_CLOEXEC);
	if (t->fd >= 0 || errno != ENOENT || t->readonly) {
		if (t->fd < 0 && errno == ELOOP) {
			seterr(err, errlen, "cache_dir %s: %s is a symbolic "
			       "link; cachegw follows no links inside its "
			       "cache_dir: remove it", dir, CACHE_NODES_FILE);
			return -ELOOP;
		}
		if (t->fd < 0) {
			ret = -errno;
			seterr(err, errlen, "%s: open: %s", CACHE_NODES_FILE,
			       strerror(errno));
			return ret;
		}
		if (!t->readonly && flock(t->fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			seterr(err, errlen, "%s: held by another writer",
			       CACHE_NODES_FILE);
			return ret;
		}
		return 0;
	}
	/* New table: complete file under the temporary name, then rename,
	 * so nodes.log always has a whole header. */
	ret = new_generation(&t->gen);
	if (ret)
		goto out_err;
	t->next_id = NODES_FIRST_ID;
	ret = compact(t);
	if (ret)
		goto out_err;
	t->compacted = false;
	return 0;

out_err:
	seterr(err, errlen, "%s: create: %s", CACHE_NODES_FILE,
	       strerror(-ret));
	return ret;
}

int cache_nodes_open(const char *cache_dir, bool readonly,
		     struct cache_nodes **out, char *err, size_t errlen)
{
	struct cache_nodes *t;
	struct replay rp = { 0 };
	pthread_rwlockattr_t attr;
	uint64_t live_bytes;
	int ret;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->readonly = readonly;
	t->fd = -1;
	/* 1. The lock: writers first, so lookups cannot starve adds. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	ret = -pthread_rwlock_init(&t->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (ret) {
		seterr(err, errlen, "rwlock: %s", strerror(-ret));
		goto out_free;
	}
	/* 2. The directory; a leftover temporary file is an interrupted
	 * compaction: nodes.log is still the whole table. */
	t->dirfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0) {
		ret = -errno;
		seterr(err, errlen, "%s: %s", cache_dir, strerror(errno));
		goto out_lock;
	}
	if (!readonly)
		unlinkat(t->dirfd, NODES_TMP, 0);
	/* 3. The file and its header. */
	ret = open_file(t, cache_dir, err, errlen);
	if (ret)
		goto out_close;
	ret = read_header(t, err, errlen);
	if (ret)
		goto out_close;
	/* 4. Replay; the counter restarts beyond everything reserved. */
	ret = replay_log(t, &rp);
	if (ret) {
		seterr(err, errlen, "%s: load: %s", CACHE_NODES_FILE,
		       strerror(-ret));
		goto out_close;
	}
	if (rp.reserved > t->next_id)
		t->next_id = rp.reserved;
	if (rp.max_id >= t->next_id)
		t->next_id = rp.max_id + 1;
	if (t->next_id < NODES_FIRST_ID)
		t->next_id = NODES_FIRST_ID;
	t->hwm = t->next_id;
	t->log_end = rp.good_end;
	/* 5. Writable: cut a torn tail; compact when damaged or mostly
	 * garbage. */
	live_bytes = live_file_bytes(t);
	if (!readonly && (rp.mid_damage || (rp.good_end > 2 * live_bytes &&
			  rp.good_end - live_bytes > NODES_COMPACT_SLACK))) {
		ret = compact(t);
		if (ret) {
			seterr(err, errlen, "%s: compact: %s",
			       CACHE_NODES_FILE, strerror(-ret));
			goto out_close;
		}
	} else if (!readonly && rp.bad_run) {
		ret = nodes_inject(t);
		if (!ret && ftruncate(t->fd, (off_t)rp.good_end) < 0)
			ret = -errno;
		if (ret) {
			seterr(err, errlen, "%s: truncate torn tail: %s",
			       CACHE_NODES_FILE, strerror(-ret));
			goto out_close;
		}
	}
	if (!readonly) {
		int e, n;

		/* Room for the first records (best effort: a full disk
		 * refuses creates later, at cache_nodes_room). */
		(void)room_on_disk(t);

		if (cache_inject_getenv("CACHEGW_INJECT_NODES_ERROR", &e, &n))
			cache_nodes_inject_error(t, e, n);
		if (cache_inject_getenv("CACHEGW_INJECT_NODES_SYNC_ERROR", &e, &n))
			cache_nodes_inject_sync_error(t, e, n);
	}
	*out = t;
	return 0;

out_close:
	if (t->fd >= 0)
		close(t->fd);
	close(t->dirfd);
out_lock:
	pthread_rwlock_destroy(&t->lock);
out_free:
	free(t->ents);
	free(t->arena);
	free(t->idtab);
	free(t->htab);
	free(t);
	return ret;
}

int cache_nodes_sync(struct cache_nodes *t)
{
	int ret;

	if (t->readonly)
		return 0;
	pthread_rwlock_wrlock(&t->lock);
	if (t->broken) {
		ret = recover(t);	/* a rewrite is fsync'd */
	} else {
		ret = fsync_hooked(t, t->fd);
		if (ret)
			set_broken(t, "fdatasync", ret);
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

void cache_nodes_close(struct cache_nodes *t)
{
	if (!t)
		return;
	/* A clean shutdown loses nothing; a broken table gets one last
	 * chance to be rewritten. */
	if (!t->readonly && t->broken)
		(void)recover(t);
	else if (!t->readonly)
		(void)fdatasync(t->fd);
	close(t->fd);		/* releases the flock */
	close(t->dirfd);
	pthread_rwlock_destroy(&t->lock);
	free(t->ents);
	free(t->arena);
	free(t->idtab);
	free(t->htab);
	free(t);
}

/* ---- the API ------------------------------------------------------------ */

static bool bad_handle(const void *h, size_t hlen)
{
	return !h || hlen < 1 || hlen > CACHE_NODES_HANDLE_MAX;
}

int cache_nodes_find(struct cache_nodes *t, const void *h, size_t hlen,
		     uint64_t *nodeid, uint32_t *gen)
{
	uint32_t h32;
	uint64_t slot;
	int ret = -ENOENT;

	if (bad_handle(h, hlen))
		return -EINVAL;
	h32 = handle_h32(h, hlen);
	pthread_rwlock_rdlock(&t->lock);
	slot = h_slot(t, h, hlen, h32);
	if (slot != UINT64_MAX) {
		*nodeid = t->ents[t->htab[slot].ent1 - 1].id;
		if (gen)
			*gen = t->gen;
		ret = 0;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int cache_nodes_add(struct cache_nodes *t, const void *h, size_t hlen,
		    uint64_t parent, uint64_t *nodeid, uint32_t *gen)
{
	uint8_t rec[REC_MAX];
	uint32_t h32;
	uint64_t slot, id;
	size_t len;
	int ret;

	/* 1. Present already: the common case, under the read lock. */
	ret = cache_nodes_find(t, h, hlen, nodeid, gen);
	if (ret != -ENOENT)
		return ret;
	if (t->readonly)
		return -EROFS;
	h32 = handle_h32(h, hlen);
	pthread_rwlock_wrlock(&t->lock);
	/* 2. Someone may have added it between the locks. */
	slot = h_slot(t, h, hlen, h32);
	if (slot != UINT64_MAX) {
		*nodeid = t->ents[t->htab[slot].ent1 - 1].id;
		ret = 0;
		goto out_gen;
	}
	/* 3. An id covered by a durable reservation; the record on disk
	 * before the mapping exists in memory. A failed write burns the id
	 * (it may be on disk), which costs nothing. */
	ret = reserve_ids(t);
	if (ret)
		goto out_unlock;
	id = t->next_id++;
	len = rec_encode(rec, t->gen, REC_ADD, id, parent, h, hlen);
	ret = log_append(t, rec, len);
	if (ret)
		goto out_unlock;
	ret = ent_add(t, id, parent, h, hlen, h32);
	if (ret) {
		/* On disk but not in memory: undo on disk too. */
		len = rec_encode(rec, t->gen, REC_REMOVE, id, 0, NULL, 0);
		if (log_append(t, rec, len))
			set_broken(t, "undo of an add", -EIO);
		goto out_unlock;
	}
	*nodeid = id;
	ret = 1;
out_gen:
	if (gen)
		*gen = t->gen;
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int cache_nodes_get(struct cache_nodes *t, uint64_t nodeid, void *h,
		    size_t *hlen, uint64_t *parent, uint32_t *gen)
{
	const struct node_ent *e;
	uint32_t idx;
	int ret = 0;

	pthread_rwlock_rdlock(&t->lock);
	idx = id_lookup(t, nodeid);
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
	memcpy(h, ent_handle(t, e), e->hlen);
	*hlen = e->hlen;
	if (parent)
		*parent = e->parent;
	if (gen)
		*gen = t->gen;
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int cache_nodes_set_parent(struct cache_nodes *t, uint64_t nodeid,
			   uint64_t parent)
{
	uint8_t rec[REC_MAX];
	uint32_t idx;
	size_t len;
	int ret = 0;

	if (t->readonly)
		return -EROFS;
	pthread_rwlock_wrlock(&t->lock);
	idx = id_lookup(t, nodeid);
	if (idx == UINT32_MAX) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (t->ents[idx].parent == parent)
		goto out_unlock;
	len = rec_encode(rec, t->gen, REC_PARENT, nodeid, parent, NULL, 0);
	ret = log_append(t, rec, len);
	if (!ret)
		t->ents[idx].parent = parent;
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* Removals leave dead records behind: rewrite the file when it is more
 * than twice what the live entries need (and the waste is worth a
 * rewrite), so that a table whose files come and go does not grow for
 * ever. A rewrite that fails (a full disk) is not tried again before the
 * file has grown by half the live size more: the appends go on meanwhile.
 * Lock held (wr). */
static void maybe_compact(struct cache_nodes *t)
{
	uint64_t live = live_file_bytes(t);
	int ret;

	if (t->log_end <= 2 * live ||
	    t->log_end - live <= NODES_COMPACT_SLACK ||
	    t->log_end <= t->compact_retry)
		return;
	ret = compact(t);
	if (ret) {
		t->compact_retry = t->log_end + live / 2 + NODES_COMPACT_SLACK;
		cache_log("node-id table: compaction failed (%s); the log "
			  "keeps growing until it can be rewritten",
			  strerror(-ret));
		return;
	}
	t->compactions++;
	t->compact_retry = 0;
}

int cache_nodes_remove(struct cache_nodes *t, uint64_t nodeid)
{
	uint8_t rec[REC_MAX];
	uint32_t idx;
	size_t len;
	int ret;

	if (t->readonly)
		return -EROFS;
	pthread_rwlock_wrlock(&t->lock);
	idx = id_lookup(t, nodeid);
	if (idx == UINT32_MAX) {
		ret = -ENOENT;
		goto out_unlock;
	}
	len = rec_encode(rec, t->gen, REC_REMOVE, nodeid, 0, NULL, 0);
	ret = log_append(t, rec, len);
	if (!ret) {
		ent_remove(t, idx);
		maybe_compact(t);
	}
out_unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

void cache_nodes_stats(struct cache_nodes *t, struct cache_nodes_stats *st)
{
	pthread_rwlock_rdlock(&t->lock);
	st->entries = t->live;
	st->file_bytes = t->log_end;
	st->live_bytes = live_file_bytes(t);
	st->compactions = t->compactions;
	st->next_id = t->next_id;
	st->reserved_id = t->hwm;
	st->skipped_bytes = t->skipped_bytes;
	st->generation = t->gen;
	st->compacted = t->compacted;
	pthread_rwlock_unlock(&t->lock);
}

/* Top up the bytes allocated beyond the file's end. 0, -ENOSPC, -errno.
 * Lock held (wr) or not yet shared. */
static int room_on_disk(struct cache_nodes *t)
{
	uint64_t want = NODES_ROOM_CHUNK;
	int ret;

	if (t->room_unsupported || t->room_end >= t->log_end + NODES_ROOM_LOW)
		return 0;
	for (;;) {
		ret = nodes_inject(t);
		if (!ret && fallocate(t->fd, FALLOC_FL_KEEP_SIZE,
				      (off_t)t->log_end, (off_t)want) < 0)
			ret = -errno;
		if (!ret) {
			t->room_end = t->log_end + want;
			return 0;
		}
		if (ret == -EOPNOTSUPP) {
			/* A file system without it: appends may then fail
			 * with ENOSPC after the origin acted (cachegw(8)). */
			t->room_unsupported = true;
			return 0;
		}
		if (ret != -ENOSPC || want == NODES_ROOM_LOW)
			return ret;
		want = NODES_ROOM_LOW;	/* what is left may still do */
	}
}

int cache_nodes_room(struct cache_nodes *t)
{
	int ret = 0;

	if (t->readonly)
		return -EROFS;
	pthread_rwlock_wrlock(&t->lock);
	/* In memory: entry slots and arena room for a few adds. */
	if ((t->free1 == 0 && t->nents + (uint64_t)NODES_ROOM_ENTRIES >
	     NODES_SLOTS_MAX) ||
	    t->arena_len - t->arena_dead + (uint64_t)NODES_ROOM_ENTRIES *
	    CACHE_NODES_HANDLE_MAX > NODES_ARENA_MAX ||
	    (t->live + NODES_ROOM_ENTRIES) * 10 > (1ull << 32) * 7)
		ret = -ENOSPC;
	else
		ret = room_on_disk(t);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

size_t cache_nodes_list(struct cache_nodes *t, uint64_t *cursor,
			struct cache_nodes_ent *out, size_t max)
{
	size_t n = 0;
	uint64_t i;

	pthread_rwlock_rdlock(&t->lock);
	for (i = *cursor; i < t->nents && n < max; i++) {
		const struct node_ent *e = &t->ents[i];

		if (!e->id)
			continue;
		out[n].id = e->id;
		out[n].hlen = e->hlen;
		memcpy(out[n].h, ent_handle(t, e), e->hlen);
		n++;
	}
	pthread_rwlock_unlock(&t->lock);
	*cursor = i;
	return n;
}
