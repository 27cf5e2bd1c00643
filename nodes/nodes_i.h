/* nodes_i.h - inside the node-id table: the record log both its files are
 * (nodes.log, md.log), the hash table all its lookups use, the table in
 * memory, what the gateway last knew of each node, and their locks.
 *
 *   rlog.c    a record log: header, checksummed records, append, replay
 *             at open (a torn or damaged tail), rewrite (compaction: a
 *             temporary file, fsync, rename, fsync the directory); knows
 *             nothing of what the records mean
 *   hash.c    one open-addressing hash table of entry indexes, used by
 *             every lookup of the module (by id, by handle, by record key)
 *   table.c   the node-id entries in memory: slots, handle arena, the two
 *             lookups (by id, by handle); no I/O
 *   log.c     nodes.log: its records, replayed into the table; ids
 *             reserved, compaction when due, room ahead on disk, recovery
 *             after a failed write; open, sync and close
 *   nodes.c   the node-id table's API: find, add, get, set_parent, remove,
 *             list, room, stats
 *   md_mem.c  what the gateway last knew of each node, in memory: records
 *             by (node-id, kind, key), chained per node; no I/O
 *   md.c      md.log: its records, the compaction thread, the API
 *
 * Locks: one rwlock per node-id table (t->lock); one mutex per md.log
 * (m->lock). Each is a leaf: nothing else is taken under it (the file's
 * syscalls run under it, the cache's and the gateway's locks are never
 * taken), and neither is taken under the other. Functions that say "Lock
 * held" need it (for the table, read or write: NODES_ASSERT_HELD; "(wr)"
 * for writing: NODES_ASSERT_WR; for md.log: GW_ASSERT_HELD); in sanitizer
 * builds they assert it (common/lockcheck.h). rlog.c has no lock: its
 * caller's serialises each log.
 */
#ifndef CACHEGW_NODES_I_H
#define CACHEGW_NODES_I_H

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <xxhash.h>

#include "config.h"
#include "lockcheck.h"
#include "nodes.h"

/* Little-endian fields of the files: put64/get64, put32/get32. */
#define NODES_LE_FIELD(bits)						\
static inline void put##bits(uint8_t *p, uint##bits##_t v)		\
{									\
	v = htole##bits(v);						\
	memcpy(p, &v, bits / 8);					\
}									\
static inline uint##bits##_t get##bits(const uint8_t *p)		\
{									\
	uint##bits##_t v;						\
									\
	memcpy(&v, p, bits / 8);					\
	return le##bits##toh(v);					\
}
NODES_LE_FIELD(64)
NODES_LE_FIELD(32)

/* A record's checksum: XXH3-64 of its first n bytes, seeded with the
 * generation, written after them; the record's length. */
static inline size_t nodes_seal(uint8_t *p, size_t n, uint32_t gen)
{
	put64(p + n, XXH3_64bits_withSeed(p, n, gen));
	return n + 8;
}

static inline bool nodes_sealed(const uint8_t *p, size_t n, uint32_t gen)
{
	return get64(p + n) == XXH3_64bits_withSeed(p, n, gen);
}

/* ---- rlog.c: a record log ---------------------------------------------
 *
 * On disk (little-endian):
 *   header, RLOG_HDR bytes: 8 bytes magic, u32 version, u32 generation,
 *     u64 "extra" (the file's own), 32 bytes zero, u64 XXH3-64 of bytes
 *     0..55;
 *   records, head + len + 8 bytes each: u8 type, u8 len, head - 2 bytes of
 *     the file's own fields, len bytes of payload, u64 XXH3-64 (seed =
 *     generation) of everything before it (nodes_seal).
 * The generation ties the records to their file: records of another
 * table (or copied bytes) never pass as ours.
 */

#define RLOG_HDR 64
#define RLOG_BUF (1u << 20)	/* bytes read (replay) or encoded (rewrite)
				 * at a time */

struct rlog_fmt {
	const char *file, *tmp;		/* names in the directory */
	const char *magic;		/* 8 bytes */
	uint32_t version;
	uint8_t head;			/* record bytes before the payload */
	uint8_t payload_max;
	bool resync;			/* replay goes on after damage, a byte
					 * at a time (else it stops there) */
	/* Type, len and the head's own fields make sense. */
	bool (*valid)(const uint8_t *p);
};

#define RLOG_REC_MAX(f) ((size_t)(f)->head + (f)->payload_max + 8)

/* One log. The caller's lock serialises everything but the fault
 * injection (atomic). */
struct rlog {
	const struct rlog_fmt *fmt;	/* immutable */
	int dirfd;			/* immutable, the caller's */
	uint32_t gen;			/* the records' seed */
	int fd;				/* the file; replaced by a rewrite */
	uint64_t end;			/* bytes of valid log */
	bool broken;			/* a failed write could not be cut
					 * off: the caller rewrites the file
					 * before it appends again */
	/* Tests: __atomic. The next count (<0: all) write-side calls
	 * (writes, fsyncs, truncates, renames) fail with inject_err; the
	 * fsyncs also with sync_err; kill_at: the process is killed
	 * (SIGKILL) at the kill_at-th step of a rewrite. */
	int inject_err, inject_count;
	int sync_err, sync_count;
	int kill_at;
};

/* What a replay found. */
struct rlog_replay {
	uint64_t good_end;		/* end of the last valid record */
	uint64_t skipped;		/* invalid bytes passed over */
	uint64_t bad_run;		/* invalid bytes since the last valid */
	bool mid_damage;		/* invalid bytes before a valid record */
};

/* A rewrite's new file, until it takes the log's place. */
struct rlog_tmp {
	int fd;
	uint64_t size;
};

/* Encode records into buf (cap bytes, at least RLOG_REC_MAX), as many as
 * fit; returns the bytes, *done once there are no more. */
typedef size_t (*rlog_emit_fn)(void *ctx, uint8_t *buf, size_t cap,
			       bool *done);

void rlog_init(struct rlog *l, const struct rlog_fmt *fmt, int dirfd);
int rlog_inject(struct rlog *l);
int rlog_fsync(struct rlog *l, int fd);
void rlog_hdr_encode(const struct rlog_fmt *f, uint8_t *p, uint32_t gen,
		     uint64_t extra);
size_t rlog_rec_check(const struct rlog_fmt *f, const uint8_t *p,
		      size_t avail, uint32_t gen);
int rlog_open(struct rlog *l, const char *dir, bool readonly,
	      uint64_t *size, char *err, size_t errlen);
int rlog_hdr_read(struct rlog *l, uint32_t *version, uint64_t *extra);
int rlog_replay(struct rlog *l,
		int (*apply)(void *ctx, const uint8_t *rec, size_t len),
		void *ctx, struct rlog_replay *rp);
int rlog_cut(struct rlog *l);
int rlog_append(struct rlog *l, const uint8_t *rec, size_t len);
int rlog_write_tmp(struct rlog *l, uint64_t extra, rlog_emit_fn emit,
		   void *ctx, pthread_mutex_t *lock, struct rlog_tmp *w);
int rlog_tmp_copy(struct rlog *l, struct rlog_tmp *w, int from_fd,
		  uint64_t from, uint64_t to);
void rlog_tmp_drop(struct rlog *l, struct rlog_tmp *w);
int rlog_install(struct rlog *l, struct rlog_tmp *w, pthread_mutex_t *lock);
int rlog_rewrite(struct rlog *l, uint64_t extra, rlog_emit_fn emit,
		 void *ctx);
void rlog_close(struct rlog *l);

/* ---- hash.c: one hash table -------------------------------------------
 *
 * Open addressing, linear probing, backward-shift deletion. A slot holds
 * an index of the caller's (+ 1; 0: empty) and its 32-bit hash, so that
 * growing and deleting need nothing of the caller's and a probe compares
 * hashes before it looks at the entry. At most 2^32 slots, loaded at most
 * 70 %. The caller's lock guards it.
 */

struct hslot {
	uint32_t v1;			/* the caller's index + 1, 0: empty */
	uint32_t h32;			/* its hash */
};

struct htab {
	struct hslot *s;
	uint64_t cap, n;		/* slots (a power of 2, or 0), used */
	unsigned shift;			/* 32 - log2(cap) */
};

#define HTAB_MAX_ENTRIES ((1ull << 32) / 10 * 7)

int htab_reserve(struct htab *t, uint64_t more);
void htab_insert(struct htab *t, uint32_t h32, uint32_t v1);
void htab_delete(struct htab *t, uint64_t i);
void htab_free(struct htab *t);

static inline uint64_t htab_home(const struct htab *t, uint32_t h32)
{
	return (uint32_t)(h32 * 0x9E3779B1u) >> t->shift;
}

/* The slot whose hash is h32 and whose index eq accepts, or UINT64_MAX. */
static inline uint64_t htab_find(const struct htab *t, uint32_t h32,
				 bool (*eq)(const void *ctx, uint32_t v1),
				 const void *ctx)
{
	uint64_t mask = t->cap - 1, i;

	if (!t->cap)
		return UINT64_MAX;
	for (i = htab_home(t, h32); t->s[i].v1; i = (i + 1) & mask)
		if (t->s[i].h32 == h32 && eq(ctx, t->s[i].v1))
			return i;
	return UINT64_MAX;
}

/* A 64-bit number's bits mixed (murmur3's finaliser); hash64: 32 of
 * them, the hash of an id or key. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static inline uint32_t hash64(uint64_t x)
{
	return (uint32_t)mix64(x);
}

/* ---- the node-id table: table.c, log.c, nodes.c ----------------------- */

#define NODES_MAGIC "CGWNODES"
#define NODES_VERSION 1u
#define NODES_HDR_SIZE RLOG_HDR
#define NODES_TMP NODES_FILE ".tmp"

/* nodes.log's records: u8 type, u8 hlen, u64 a, u64 b, handle, seal.
 *   ADD     a = id, b = parent, handle (1..64 bytes)
 *   PARENT  a = id, b = parent
 *   REMOVE  a = id
 *   RESERVE a = high-water mark: ids below it may have been handed out
 * The header's extra: reserved_id (the same, at the last rewrite). */
#define REC_ADD 0xA1
#define REC_PARENT 0xA2
#define REC_REMOVE 0xA3
#define REC_RESERVE 0xA4
#define REC_HEAD 18			/* record bytes before the handle */
#define REC_FIXED (REC_HEAD + 8)	/* record bytes without the handle */
#define REC_MAX (REC_FIXED + NODES_HANDLE_MAX)

#define NODES_FIRST_ID 2		/* 1 is the root */
#define NODES_ID_LIMIT (1ull << 62)	/* larger ids in a record: damage */
#define NODES_BATCH 65536		/* ids reserved per fdatasync */
#define NODES_COMPACT_SLACK (64u << 10)	/* bytes of waste never compacted */
#define NODES_ROOM_LOW (16u << 10)	/* room() tops up below this much */
#define NODES_ROOM_CHUNK (64u << 10)	/* bytes allocated ahead at a time */
#define NODES_ROOM_ENTRIES 1024		/* in-memory headroom room() wants */
#define NODES_ARENA_MAX UINT32_MAX	/* bytes of handles, all entries */
#define NODES_SLOTS_MAX (UINT32_MAX - 1)	/* entry slots */

struct tab_ent {
	uint64_t id;			/* 0: free slot */
	uint64_t parent;		/* free slot: next free index + 1 */
	uint32_t hoff;			/* handle offset in arena */
	uint8_t hlen;
};

struct nodes {
	bool readonly;			/* immutable */
	bool external_ids;		/* ids come from outside (the fleet
					 * store): nodes_add makes none */

	pthread_rwlock_t lock;		/* guards everything below */
	struct rlog log;		/* nodes.log; appends under lock (wr);
					 * log.gen: the table's generation */
	uint64_t next_id;		/* next id to hand out */
	uint64_t hwm;			/* ids < hwm are durably reserved */

	struct tab_ent *ents;		/* entry slots */
	uint32_t nents, ents_cap;	/* slots used (live + free), capacity */
	uint32_t free1;			/* first free slot + 1, 0: none */
	uint64_t live;			/* live entries */
	uint64_t live_hbytes;		/* sum of live handle lengths */

	uint8_t *arena;			/* handle bytes */
	uint64_t arena_len, arena_cap, arena_dead; /* bytes */

	struct htab by_id;		/* id -> entry index + 1 */
	struct htab by_h;		/* handle -> entry index + 1 */

	uint64_t room_end;		/* file bytes allocated (fallocate) */
	bool room_unsupported;		/* fallocate: EOPNOTSUPP */
	uint64_t compact_retry;		/* a failed run-time compaction:
					 * not again before log.end > this */
	uint64_t compactions;		/* run-time compactions done */

	uint64_t skipped_bytes;		/* set at open */
	bool compacted;			/* set at open */
};

#define NODES_ASSERT_HELD(t) \
	GW_ASSERT_RW_HELD((pthread_rwlock_t *)&(t)->lock)
#define NODES_ASSERT_WR(t) \
	GW_ASSERT_WR_HELD((pthread_rwlock_t *)&(t)->lock)

/* log.c */
void nodes_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
size_t nlog_rec_encode(uint8_t *p, uint32_t gen, uint8_t type, uint64_t a,
		       uint64_t b, const void *h, size_t hlen);
uint64_t nlog_live_bytes(const struct nodes *t);
int nlog_append(struct nodes *t, const uint8_t *rec, size_t len);
int nlog_reserve_ids(struct nodes *t);
void nlog_set_broken(struct nodes *t, const char *what, int err);
void nlog_maybe_compact(struct nodes *t);
int nlog_room(struct nodes *t);

/* table.c */
uint32_t tab_h32(const void *h, size_t hlen);
const uint8_t *tab_handle(const struct nodes *t, const struct tab_ent *e);
uint32_t tab_id_lookup(const struct nodes *t, uint64_t id);
uint32_t tab_h_lookup(const struct nodes *t, const void *h, size_t hlen,
		      uint32_t h32);
int tab_add(struct nodes *t, uint64_t id, uint64_t parent, const void *h,
	    size_t hlen, uint32_t h32);
void tab_remove(struct nodes *t, uint32_t idx);
void tab_free(struct nodes *t);

/* ---- what the gateway last knew: md_mem.c, md.c ----------------------- */

/* md.log's records: u8 kind, u8 len, 6 bytes zero, u64 node-id, u64 key,
 * u64 fetched (CLOCK_REALTIME ns), len bytes, seal.
 *   kind 1..127: a record, replacing the earlier one of the same
 *   (node-id, kind, key); MD_DROP: forget every record of the node-id;
 *   MD_CLEAN: written (and fdatasync'd) by a clean close. */
#define MD_FILE "md.log"
#define MD_TMP "md.log.tmp"
#define MD_MAGIC "CGWMDLOG"
#define MD_VERSION 1u
#define MD_HEAD 32
#define MD_REC_FIXED (MD_HEAD + 8)
#define MD_REC_MAX (MD_REC_FIXED + NODES_MD_BLOB_MAX)
#define MD_DROP 0xDD
#define MD_CLEAN 0xCC
#define MD_SLACK (1u << 20)		/* waste never worth a rewrite */

struct md_rec {
	uint64_t id;			/* 0: free slot */
	uint64_t key;
	uint64_t fetched;
	uint32_t next1;			/* next in its node's chain (or the
					 * free list) + 1 */
	uint8_t kind, len;
	uint8_t blob[NODES_MD_BLOB_MAX];
};

/* A node-id with records: two chains, its own records (attributes,
 * access answers) and its directory entries (NODES_MD_DENT), so that the
 * first are found without walking a large directory's names. */
struct md_node {
	uint64_t id;			/* 0: free slot */
	uint32_t own1, dent1;		/* chain heads + 1; own1: free list */
};

/* The records in memory (md_mem.c): everything under the md lock. */
struct md_mem {
	struct md_rec *recs;
	uint32_t nrecs, cap, free1;	/* slots used, allocated, free list */
	struct md_node *nodev;
	uint32_t nnodes, nodes_cap, nfree1;
	struct htab by_node;		/* id -> nodev index + 1 */
	struct htab by_key;		/* (id, kind, key) -> recs index + 1 */
	uint64_t live, live_bytes;	/* records, their bytes on disk */
};

struct nodes_md {
	pthread_t worker;		/* rewrites md.log (compact()) */
	pthread_mutex_t lock;		/* guards everything below */
	pthread_cond_t cond;		/* wakes the worker; and who waits for
					 * it (retain, settle, close, tests) */
	bool want, compacting, stop;	/* the worker: a rewrite asked for,
					 * one under way, stop */
	uint64_t retry_end;		/* a failed rewrite: not asked for
					 * again before log.end passes this */
	bool hold, held;		/* tests: a rewrite waits before its
					 * new file takes md.log's place (and
					 * is waiting there) */
	struct rlog log;		/* md.log; log.gen: the node-id
					 * table's generation */
	uint64_t lost;			/* records kept in memory that could
					 * not be appended (bumped by each) */
	struct md_mem mem;
	struct nodes_md_stats st;
};

/* md_mem.c; Lock held (m->lock) for all but md_mem_free. */
struct md_rec *md_mem_find(struct nodes_md *m, uint64_t id, uint8_t kind,
			   uint64_t key);
struct md_node *md_mem_node(struct nodes_md *m, uint64_t id);
int md_mem_put(struct nodes_md *m, uint64_t id, uint8_t kind, uint64_t key,
	       uint64_t fetched, const void *blob, uint8_t len);
bool md_mem_drop(struct nodes_md *m, uint64_t id);
int md_mem_retain(struct nodes_md *m, uint8_t kind);
void md_mem_free(struct md_mem *mm);

#endif
