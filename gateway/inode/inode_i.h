/* inode_i.h - the inode room (gateway/inode/): which node-id is which
 * origin file, what is known of it and for how long. One section per file.
 *
 * inode.c:     the inode table: FUSE node-id <-> origin file handle,
 *              kernel references, node-ids brought back from the table.
 * inode_attr.c: what an inode knows of its file: attributes and their
 *              freshness, the name it was found by.
 * handlekey.c: unguessable re-export handles (the node-ids' generations).
 * reclaim.c:   node-ids of files gone at the origin given back: when
 *              passes run (the thread), counters.
 * reclaim_base.c: what reclaim stands on: its triggers, the stop and
 *              the clock, the GETATTR batches of a pass.
 * reclaim_pass.c: one pass: which entries are of files gone.
 * fleet_ids.c: node-ids from the fleet store (fleet=): names sent to it,
 *              node-ids another gateway minted brought in.
 * dirknown.c:  directories whose every name is known (lookupcache=all):
 *              names known absent answered without the origin.
 */
#ifndef CACHEGW_INODE_I_H
#define CACHEGW_INODE_I_H

#include "gw_i.h"

/* ---- inode.c ---- */

struct gw;
int gw_itable_init(struct gw_itable *t, const struct nfsc_fh *rootfh);
/* The inode for a node-id the kernel holds, or NULL. */
struct gw_inode *gw_inode_find(struct gw *gw, uint64_t nodeid);
/* For a node-id a request names: gw_inode_find, or in a successor
 * (gw->successor) a node-id the kernel was given by an earlier process,
 * made from the node-id table (adopted). */
struct gw_inode *gw_inode_get(struct gw *gw, uint64_t nodeid);
/* Any node-id ever handed out, brought back from the node-id table if it
 * is not in memory; takes one kernel reference (drop it with
 * gw_inode_forget(gw, nodeid, 1) unless it goes to the kernel). NULL if
 * unknown, or if its origin handle is in memory under another node-id
 * (both: gw_inode_get's too), errno ESTALE; or, errno EIO, ETIMEDOUT or
 * EINTR, if the fleet store that knows it could not be asked (away, soft;
 * the request was interrupted while it waited). */
struct gw_inode *gw_inode_resolve(struct gw *gw, uint64_t nodeid);
/* The inode of an origin handle, if it is in memory, with one kernel
 * reference taken (drop it with gw_inode_forget(gw, nodeid, 1)). */
struct gw_inode *gw_inode_ref_fh(struct gw *gw, const struct nfsc_fh *fh);
/* Node-id of the directory ino was found in (the root for the root). */
uint64_t gw_inode_parent(struct gw *gw, struct gw_inode *ino);
/* Find or create the inode for fh, take one kernel reference, and store
 * attr in it. NULL with errno set on failure: ENOMEM, or the node-id
 * table's error when it cannot record a new node-id (EIO, ENOSPC). */
struct gw_inode *gw_inode_ref(struct gw *gw, const struct nfsc_fh *fh,
			      const struct nfsc_attr *attr, uint64_t parent);
/* gw_inode_ref for attributes kept from an earlier fetch, got at at
 * (CLOCK_MONOTONIC): they age from then, and replace only attributes got
 * before them. */
struct gw_inode *gw_inode_ref_kept(struct gw *gw, const struct nfsc_fh *fh,
				   const struct nfsc_attr *attr,
				   uint64_t parent, const struct timespec *at);
void gw_inode_forget(struct gw *gw, uint64_t nodeid, uint64_t n);
/* In a FUSE operation: declare var, the inode of nodeid, or answer the
 * request ESTALE and return. */
#define GW_INODE_OR_ESTALE(gw, req, nodeid, var)			\
	struct gw_inode *var = gw_inode_get(gw, nodeid);		\
	if (!var) {							\
		fuse_reply_err(req, ESTALE);				\
		return;							\
	}

/* ---- inode_attr.c: what an inode knows of its file ---- */
void gw_inode_set_attr(struct gw_inode *ino, const struct nfsc_attr *attr);
/* Changed through the gateway: ask the origin next time (and mark what
 * is kept of its attributes older: gw_md_note_changed). */
void gw_inode_invalidate_attr(struct gw *gw, struct gw_inode *ino);
void gw_inode_set_attr_if_newer(struct gw_inode *ino,
				const struct nfsc_attr *attr);
/* Attributes from a reply to a call sent when the inode's attr_gen was
 * gen: kept only if nothing updated the attributes since (an origin call
 * can be answered after a WRITE that it preceded at the origin). */
uint64_t gw_inode_attr_gen(struct gw_inode *ino);
bool gw_inode_set_attr_since(struct gw_inode *ino,
			     const struct nfsc_attr *attr, uint64_t gen);
bool gw_inode_set_attr_since_locked(struct gw_inode *ino,
				    const struct nfsc_attr *attr, uint64_t gen);
/* The kernel's GETATTR or LOOKUP for thread tid was just answered with
 * the origin's attributes of ino (those held now): noted for
 * gw_inode_take_fresh. */
void gw_inode_note_fresh(struct gw_inode *ino, pid_t tid);
/* Did the kernel, for thread tid's open of ino, just have the origin's
 * attributes (gw_inode_note_fresh: at most GW_CTO_JOIN_SEC ago, nothing
 * newer since)? Then *a receives them and the note is used up (true):
 * the open's close-to-open check needs no call of its own. */
#define GW_CTO_JOIN_SEC 0.1
bool gw_inode_take_fresh(struct gw_inode *ino, pid_t tid,
			 struct nfsc_attr *a);
/* Copy the cached attributes if still fresh; 0 or -ESTALE/-ENODATA. */
int gw_inode_cached_attr(struct gw *gw, struct gw_inode *ino,
			 struct nfsc_attr *out);
/* What is left of gw_attr_ttl for ino's attributes (0 when it holds
 * none): an answer from what is held tells the kernel no more. */
double gw_inode_ttl_left(struct gw *gw, struct gw_inode *ino);

/* ---- dirknown.c: directories whose every name is known ---- */
/* dir was just made by cr through the gateway (MKDIR), with attributes a
 * from the reply: it is empty, every name in it known. */
void gw_dirknown_made(struct gw_inode *dir, const struct nfsc_attr *a,
		      const struct nfsc_cred *cr);
/* cr made name in dir; wcc: the directory's, from the reply (has_attr:
 * they become dir's attributes, as gw_inode_set_attr_if_newer). Kept
 * known if its pre-op attributes are the last change's post-op ones. */
void gw_dirknown_added(struct gw_inode *dir, const char *name,
		       const struct nfsc_post *wcc, const struct nfsc_cred *cr);
void gw_dirknown_forget(struct gw_inode *dir);
/* Is name known not to be in dir now, for cr (an ENOENT without the
 * origin)? */
bool gw_dirknown_absent(struct gw *gw, struct gw_inode *dir,
			const char *name, const struct nfsc_cred *cr);
void gw_dirknown_free(struct gw_dirknown *k);

/* Fill a fuse_entry_param for ino with attributes a: its node-id and
 * generation (handlekey.c), the attributes and their timeouts. */
void gw_make_entry(struct gw *gw, struct gw_inode *ino,
		   const struct nfsc_attr *a, struct fuse_entry_param *e);

/* A regular file ino was found as dir/name (lookup, readdirplus, create,
 * rename): remembered for gw_inode_refused_name. Other types: nothing. */
void gw_inode_note_name(struct gw_inode *ino, uint64_t dir, const char *name,
			const struct nfsc_attr *a);
/* The last close of a file whose write-back WRITEs the origin refused:
 * the name it was found by (malloc'd; *dir its directory), once, for the
 * caller to invalidate in the kernel after replying. The kernel keeps its
 * own size of a file in write-back mode and zero-fills short reads as
 * holes: its inode would go on showing the refused bytes' size (zeros) on
 * this mount. Dropping the entry evicts the inode; the next lookup brings
 * the origin's size. NULL when there is nothing to drop. */
char *gw_inode_refused_name(struct gw_inode *ino, uint64_t *dir);

/* ---- handlekey.c: unguessable handles ---- */
/* The generation of nodeid under key: the low 32 bits of SipHash-2-4 of
 * the node-id (8 bytes, little-endian), never 0. A function of the two
 * alone: every gateway holding key gives nodeid the same. */
uint32_t gw_handle_gen(const uint8_t key[GW_HANDLE_KEY_LEN], uint64_t nodeid);
/* The FUSE generation of nodeid, by gw->hkey's rules: gw_handle_gen from
 * the cutover on, older rules below it (handles already given out stay
 * valid). */
uint32_t gw_node_generation(const struct gw *gw, uint64_t nodeid);

/* reclaim.c: node-ids of files gone at the origin. */
struct gw_reclaim;
/* n entries were added to the table: may start a pass (reclaim_base.c,
 * as gw_reclaim_room). */
void gw_reclaim_note_add(struct gw *gw, uint64_t n);
/* Before a CREATE, MKDIR, MKNOD or SYMLINK at the origin: 0, or -ENOSPC
 * when the node-id table could not record what it makes (counted). */
int gw_reclaim_room(struct gw *gw);


/* ---- inside the inode room: reclaim's parts (reclaim_base.c) ---- */
#include <time.h>

#define GW_RECLAIM_INFLIGHT 32		/* GETATTRs in flight */
#define GW_RECLAIM_PERSIST_S 3600	/* an origin that has looked like it
					 * lost a file system this long is
					 * believed */

struct gw_reclaim {
	pthread_mutex_t lock;		/* guards stop, kick, retry_at */
	pthread_cond_t cond;		/* with lock: stop or kick */
	bool stop, kick;
	time_t retry_at;		/* lock: CLOCK_MONOTONIC s of a pass
					 * after an aborted one; 0: none */
	pthread_t tid;
	pthread_mutex_t run_lock;	/* one pass at a time; before lock */
	/* run_lock: */
	bool root_known;		/* the root's identity, from the first
					 * pass that reached it */
	uint64_t root_fsid, root_fileid;
	time_t trouble_since;		/* CLOCK_MONOTONIC s: the first of the
					 * aborted passes in a row; 0: the
					 * last pass completed */
	unsigned persist_s;		/* GW_RECLAIM_PERSIST_S, or a test's */
	uint64_t adds;			/* entries added since the last pass
					 * (atomic) */
	uint64_t next_at;		/* adds that start a pass (atomic) */
	bool pending;			/* a pass is asked for (atomic) */
	/* Counters, atomic. */
	uint64_t runs, checked, held, reclaimed, errors, refusals, aborted;
};

/* One GETATTR of a pass. */
struct reclaim_probe {
	struct reclaim_batch *b;
	struct nfsc_fh fh;
	struct nfsc_attr attr;
	uint64_t id;
	int status;
};

/* The GETATTRs of a pass in flight. Heap-allocated and counted: a pass
 * told to stop returns without waiting for an origin that does not answer
 * (a hard mount's calls wait for ever), and the last callback (at the
 * latest when the connections are closed: RPC_STATUS_CANCEL) frees it. */
struct reclaim_batch {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* with lock: outstanding went to 0 */
	unsigned outstanding;		/* lock */
	unsigned refs;			/* lock: outstanding + the pass */
	struct reclaim_probe p[GW_RECLAIM_INFLIGHT];
};


/* Is the reclaim thread told to stop? (Takes r->lock.) */
bool gw_reclaim_stopping(struct gw_reclaim *r);
time_t gw_reclaim_now_s(void);		/* CLOCK_MONOTONIC seconds */
/* A batch with the pass's reference. NULL: no memory. */
struct reclaim_batch *reclaim_batch_new(void);
/* Drop a reference; b->lock held, released here. */
void reclaim_batch_put_locked(struct reclaim_batch *b);
/* GETATTR the first n probes of b (as root) and wait for all. false: told
 * to stop while waiting (the batch is left to its callbacks; do not touch
 * it again). */
bool reclaim_probe_all(struct gw *gw, struct reclaim_batch *b, unsigned n);

/* ---- fleet_ids.c ---- */

/* Without fleet= these do nothing (0; gw_fleet_bring: -ENOENT). */
/* The node-id of fh (or of every entry of l) written to the node-id table
 * from the store, for those the table does not have: one round trip for
 * all. 0, or -EIO (the store away: soft, after the timeout), -ENOMEM;
 * a listing's does not wait for a store that is away (-EAGAIN). */
int gw_fleet_name(struct gw *gw, const struct nfsc_fh *fh, uint64_t parent);
int gw_fleet_name_list(struct gw *gw, const struct nfsc_dirlist *l,
		       uint64_t parent);
/* nodeid, minted by another gateway, written to the node-id table from
 * the store. 0, -ENOENT (not the export's), -EIO. */
int gw_fleet_bring(struct gw *gw, uint64_t nodeid);
/* fh has a node-id in the node-id table (with or without a fleet). */
bool gw_fleet_known(struct gw *gw, const struct nfsc_fh *fh);
/* A directory moved: tell the store (0 without a fleet). */
int gw_fleet_set_parent(struct gw *gw, uint64_t nodeid, uint64_t parent);

#endif
