/* nodes_i.h - inside the node-id table: the table in memory, what its
 * three files share, and its lock.
 *
 *   table.c  the entries and the two hash tables (by id, by handle), in
 *            memory; no I/O
 *   log.c    the file: record format, append, replay at open, compaction,
 *            room ahead on disk, recovery after a failed write; open, sync
 *            and close
 *   nodes.c  the API: find, add, get, set_parent, remove, list, room,
 *            stats
 *   md.c     what the gateway last knew of each node (md.log), with its
 *            own lock; it shares only the encoding helpers below
 *
 * Lock: one rwlock per table (t->lock). Functions that say "Lock held"
 * need it read or write (NODES_ASSERT_HELD), "Lock held (wr)" for writing
 * (NODES_ASSERT_WR); in sanitizer builds they assert it (common/
 * lockcheck.h). Nothing else is locked under it: the file's syscalls run
 * under it, the cache's and the gateway's locks are never taken.
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

#define NODES_MAGIC "CGWNODES"
#define NODES_VERSION 1u
#define NODES_HDR_SIZE 64
#define NODES_TMP NODES_FILE ".tmp"

#define REC_ADD 0xA1
#define REC_PARENT 0xA2
#define REC_REMOVE 0xA3
#define REC_RESERVE 0xA4
#define REC_FIXED 26			/* record bytes without the handle */
#define REC_MAX (REC_FIXED + NODES_HANDLE_MAX)

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

struct tab_ent {
	uint64_t id;			/* 0: free slot */
	uint64_t parent;		/* free slot: next free index + 1 */
	uint32_t hoff;			/* handle offset in arena */
	uint8_t hlen;
};

struct hslot {
	uint32_t ent1;			/* entry index + 1, 0: empty */
	uint32_t h32;			/* low 32 bits of XXH3 of the handle */
};

struct nodes {
	bool readonly;			/* immutable */
	bool external_ids;		/* ids come from outside (the fleet
					 * store): nodes_add makes none */
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

	struct tab_ent *ents;		/* entry slots */
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

/* Little-endian fields of the files (log.c, md.c): put64/get64,
 * put32/get32. */
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
 * table's generation, written after them; the record's length. */
static inline size_t nodes_seal(uint8_t *p, size_t n, uint32_t gen)
{
	put64(p + n, XXH3_64bits_withSeed(p, n, gen));
	return n + 8;
}

static inline bool nodes_sealed(const uint8_t *p, size_t n, uint32_t gen)
{
	return get64(p + n) == XXH3_64bits_withSeed(p, n, gen);
}

#define NODES_ASSERT_HELD(t) \
	GW_ASSERT_RW_HELD((pthread_rwlock_t *)&(t)->lock)
#define NODES_ASSERT_WR(t) \
	GW_ASSERT_WR_HELD((pthread_rwlock_t *)&(t)->lock)

/* log.c */
void nodes_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int nlog_inject(struct nodes *t);
int nlog_fsync(struct nodes *t, int fd);
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
uint64_t tab_h_slot(const struct nodes *t, const void *h, size_t hlen,
		    uint32_t h32);
int tab_add(struct nodes *t, uint64_t id, uint64_t parent, const void *h,
	    size_t hlen, uint32_t h32);
void tab_remove(struct nodes *t, uint32_t idx);

#endif
