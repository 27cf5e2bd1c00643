/* nodes.h - the node-id table (nodes/): how the gateway names files to the
 * kernel and to re-export clients, kept across restarts. This header is
 * the module's whole interface.
 *
 * Maps node-ids (handed out by a persistent counter that never reuses a
 * value, not even after SIGKILL or power loss) to an opaque origin handle
 * (1..NODES_HANDLE_MAX bytes) and a parent node-id, and the handle
 * back to its node-id, so node-ids held by re-exporting NFS servers in
 * their clients' file handles still resolve after a restart. Node-id 1 is
 * the root and never stored; ids start at 2. Generation: one random
 * non-zero number per table, kept for its life, the same for every id; a
 * re-created table gets another, so old handles fail with ESTALE instead of
 * naming another file. Files: "nodes.log" (0600), "nodes.log.tmp" during
 * compaction. Thread-safe except nodes_close().
 */
#ifndef CACHEGW_NODES_H
#define CACHEGW_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NODES_HANDLE_MAX 64	/* bytes of an origin handle */
#define NODES_ROOT_ID 1		/* reserved, never stored */
#define NODES_FILE "nodes.log"

struct nodes;			/* one node-id table, opened */

struct nodes_stats {
	uint64_t entries;		/* live node-ids */
	uint64_t file_bytes;		/* size of nodes.log */
	uint64_t live_bytes;		/* bytes a compacted file would take */
	uint64_t next_id;		/* the id the next add would return */
	uint64_t reserved_id;		/* durable high-water mark: every id
					 * below it may have been handed out */
	uint64_t skipped_bytes;		/* damaged or torn bytes ignored at
					 * open (0 on a clean file) */
	uint32_t generation;		/* the table's generation */
	bool compacted;			/* open rewrote the file */
	uint64_t compactions;		/* rewrites since open (removals) */
};

/* One live entry, as nodes_list() copies it out. */
struct nodes_ent {
	uint64_t id;
	uint8_t hlen;
	uint8_t h[NODES_HANDLE_MAX];
};

/* Open the table in cache_dir; when !readonly create it if missing. When
 * !readonly the caller holds the cache's exclusive lock (the table also
 * takes its own flock on nodes.log: a second writer gets -EBUSY).
 * At open:
 *  - a torn or garbage tail (process or machine crash) is ignored and, when
 *    writable, cut off; damage in the middle is skipped record by record
 *    (never read as a mapping) and counted in skipped_bytes;
 *  - when writable and the file is much bigger than the live set (removals,
 *    parent changes) or damage was skipped, it is rewritten (compacted).
 * Errors: -ENOENT (readonly, no table), -EBADMSG (not a node table, or its
 * header is damaged), -EPROTO (another format version), -EBUSY, other -errno.
 * On failure a one-line reason is written to err (if errlen > 0). */
int nodes_open(const char *cache_dir, bool readonly,
		     struct nodes **out, char *err, size_t errlen);

/* Close the table (NULL is allowed). Every add/set_parent/remove already
 * survives process death; close also fdatasyncs, so that a clean shutdown
 * followed by a machine crash loses nothing. */
void nodes_close(struct nodes *t);

/* Make every change so far survive a machine crash (fdatasync). Without
 * it, a machine crash may lose the last changes (an added mapping, a parent
 * change, a removal) but never lets an id be handed out twice. 0, or -errno
 * (then every later change fails with -EIO: after a failed fsync nothing
 * written can be trusted). 0 at once when readonly. */
int nodes_sync(struct nodes *t);

/* Node-id of handle h. 0, -ENOENT, or -EINVAL (hlen 0 or too long).
 * gen may be NULL. */
int nodes_find(struct nodes *t, const void *h, size_t hlen,
		     uint64_t *nodeid, uint32_t *gen);

/* Node-id of handle h, adding it with parent if it is not in the table
 * (an existing entry keeps its parent: use set_parent). A new id was never
 * handed out before by this table; its record has been written to the file
 * before this returns, so it survives process death (SIGKILL). After a
 * machine crash a new mapping may be lost (the id then resolves to nothing,
 * -ENOENT), but its id is never handed out again. Returns 1 if added,
 * 0 if h was already present, or -errno: -EINVAL (hlen 0 or too long),
 * -EROFS (readonly), -EIO/-ENOSPC/... (the file could not be written:
 * nothing was added), -ENOSPC also when every id (2^62) has been handed
 * out, which only a damaged file makes happen. gen may be NULL. */
int nodes_add(struct nodes *t, const void *h, size_t hlen,
		    uint64_t parent, uint64_t *nodeid, uint32_t *gen);

/* Record h as nodeid, an id given from outside the table (a fleet's
 * store: fleet.h), durable against process death before it returns. The
 * table never hands out that id itself afterwards. 1 if added, 0 if h
 * already is nodeid, -EEXIST if h or nodeid is in the table with another,
 * -EINVAL (hlen, or an id out of range), -EROFS, -errno as nodes_add. */
int nodes_put(struct nodes *t, const void *h, size_t hlen, uint64_t parent,
	      uint64_t nodeid);

/* From now on every id comes from outside (nodes_put): nodes_add of a
 * handle not in the table answers -ENOENT instead of making one. */
void nodes_external_ids(struct nodes *t);

/* Handle, parent and generation of nodeid. *hlen is the size of h on entry
 * (NODES_HANDLE_MAX always suffices) and the handle's length on
 * return. parent and gen may be NULL. 0, -ENOENT (never handed out, removed,
 * or the root id), -ERANGE (h too small). */
int nodes_get(struct nodes *t, uint64_t nodeid, void *h,
		    size_t *hlen, uint64_t *parent, uint32_t *gen);

/* Record a new parent for nodeid (a rename across directories). Durable
 * against process death before it returns. 0 (also when unchanged),
 * -ENOENT, -EROFS, -errno (file not written: parent unchanged). */
int nodes_set_parent(struct nodes *t, uint64_t nodeid,
			   uint64_t parent);

/* Forget nodeid (its origin file is gone). The id is never handed out
 * again; a later add of the same handle gets a new id. Durable against
 * process death before it returns. 0, -ENOENT, -EROFS, -errno (file not
 * written: entry kept). */
int nodes_remove(struct nodes *t, uint64_t nodeid);

/* Make sure the next adds have room, before the caller makes something
 * at the origin whose node-id it must then record: in memory (entry
 * slots, handle bytes: see the limits in cachegw(8)) and on disk (bytes
 * allocated beyond the file's end, so that a full disk cannot fail the
 * record's write). 0, or -ENOSPC (no room: the caller should refuse what
 * it was about to do), -EROFS, -errno. On a file system without
 * fallocate(2) only the memory part is checked. */
int nodes_room(struct nodes *t);

/* Copy up to max live entries into out, starting at *cursor (0 for the
 * first call), and advance *cursor; 0 when there are no more. Entries
 * added or removed during a walk may or may not be seen; none is seen
 * twice (a removed entry's slot may be taken by a new one). */
size_t nodes_list(struct nodes *t, uint64_t *cursor,
			struct nodes_ent *out, size_t max);

/* Fill *st. Never fails. */
void nodes_stats(struct nodes *t, struct nodes_stats *st);

/* Fault injection in front of every write to the backing file (writes,
 * fsyncs, truncates, renames): the next count of them (count < 0: all;
 * 0: off) fail with -err. For tests. */
void nodes_inject_error(struct nodes *t, int err, int count);
/* The same for fdatasyncs only (writes reach the disk). The environment
 * variables CACHEGW_INJECT_NODES_ERROR and CACHEGW_INJECT_NODES_SYNC_ERROR
 * (=ERRNO[:COUNT], as for the cache) set these when a writable table is
 * opened, after it is loaded. */
void nodes_inject_sync_error(struct nodes *t, int err, int count);

/* ---- what the gateway last knew of a node (md.c) ----
 *
 * Small records per node-id, opaque here (the gateway's attributes and
 * access answers), each with the wall-clock time it was fetched from the
 * origin, kept in "md.log" (0600) across restarts. A record replaces the
 * earlier one of the same (node-id, kind, key). The file belongs to one
 * node-id table (its generation): a file of another is started afresh.
 * Never fsync'd but at compaction and close: a crash may lose the last
 * records, damage loses the records after it (stats say whether the file
 * was closed cleanly, for the caller to decide what to trust). The file
 * is compacted (rewritten with the live records only) on a thread of its
 * own: no put, get or drop waits for a rewrite (nodes_md_open,
 * nodes_md_retain and nodes_md_close may). Thread-safe except
 * nodes_md_close(). */

#define NODES_MD_BLOB_MAX 96		/* bytes of one record */
#define NODES_MD_DENT 127		/* the kind of directory entries:
					 * kept apart from the node's own */
#define NODES_MD_MAX (1u << 19)		/* records kept, at most */

struct nodes_md;

struct nodes_md_rec {
	uint8_t kind;			/* 1..127, the caller's */
	uint8_t len;
	uint64_t key;			/* the caller's */
	uint64_t fetched_ns;		/* CLOCK_REALTIME */
	uint8_t blob[NODES_MD_BLOB_MAX];
};

struct nodes_md_stats {
	uint64_t records, nodes;	/* live */
	uint64_t file_bytes;
	uint64_t puts;			/* records written since open */
	uint64_t full;			/* puts refused: NODES_MD_MAX */
	uint64_t write_errors;
	uint64_t rewrites;		/* compactions since open */
	bool rewriting;			/* a compaction asked for or under
					 * way (nodes_md_settle waits) */
	bool held;			/* one waits: nodes_md_hold_rewrites */
	uint64_t dropped_bytes;		/* at open: a torn tail, damage, or
					 * a file of another table */
	bool started_afresh;		/* at open: header not ours */
	bool clean;			/* at open: the file ended with a clean
					 * close's mark (else its last records
					 * may be missing) */
};

/* Open (or make) dir/md.log for the node-id table of generation gen. The
 * caller holds the cache's exclusive lock. 0, or -errno with a one-line
 * reason in err. */
int nodes_md_open(const char *dir, uint32_t gen, struct nodes_md **out,
		  char *err, size_t errlen);
void nodes_md_close(struct nodes_md *m);
/* Keep (replacing) the record (nodeid, kind, key). 0, -EINVAL, -ENOSPC
 * (NODES_MD_MAX records: not kept), -errno (kept in memory, not on
 * disk). */
int nodes_md_put(struct nodes_md *m, uint64_t nodeid, uint8_t kind,
		 uint64_t key, uint64_t fetched_ns, const void *blob,
		 size_t len);
/* Copy up to max of nodeid's own records (not NODES_MD_DENT ones) into
 * out; returns how many. */
size_t nodes_md_get(struct nodes_md *m, uint64_t nodeid,
		    struct nodes_md_rec *out, size_t max);
/* Copy nodeid's NODES_MD_DENT records into out (max at most); returns
 * how many, or max + 1 if it has more. */
size_t nodes_md_get_dents(struct nodes_md *m, uint64_t nodeid,
			  struct nodes_md_rec *out, size_t max);
/* The record (nodeid, kind, key) into *out: 0 or -ENOENT. */
int nodes_md_get_one(struct nodes_md *m, uint64_t nodeid, uint8_t kind,
		     uint64_t key, struct nodes_md_rec *out);
/* Forget every record of nodeid (its file is gone). 0 or -errno. */
int nodes_md_drop(struct nodes_md *m, uint64_t nodeid);
/* Keep only the records of one kind (e.g. after an unclean stop, those
 * that stay right however old); the file is rewritten. 0 or -errno. */
int nodes_md_retain(struct nodes_md *m, uint8_t kind);
void nodes_md_stats(struct nodes_md *m, struct nodes_md_stats *st);
/* Wait until no compaction is asked for or under way (tests, tools). */
void nodes_md_settle(struct nodes_md *m);
/* For tests: while hold, a compaction that has written and fsync'd its
 * new file waits (stats: held) before putting it in md.log's place, with
 * the lock free: puts, gets and drops go on. Closing lets it go. */
void nodes_md_hold_rewrites(struct nodes_md *m, bool hold);

#endif
