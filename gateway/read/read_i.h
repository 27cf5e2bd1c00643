/* read_i.h - the read path (gateway/read/): a file's data, from the cache
 * or the origin. One section per file; the first ones are what the other
 * rooms use, the rest (fetches, fills, readahead) is the room's own. The
 * coherency rules they follow, and the counters they go by, are written
 * at the top of read_req.c.
 *
 * read_req.c:  the read request: cache hits, waiting for fetches, replies.
 * fetch.c:     fetches (origin READs of whole blocks) from start to free.
 * fill_thread.c: the fill thread (completed fetches into the cache).
 * readahead.c: how far ahead of a sequential reader to fetch.
 * readahead_window.c: a reader's readahead window (its policy, free of
 *              FUSE).
 * cobj.c:      an inode's cache object (key, coherency blob, own changes).
 */
#ifndef CACHEGW_READ_I_H
#define CACHEGW_READ_I_H

#include "gw_i.h"

/* ---- read_req.c: the read request (its helpers: read_i.h) ---- */
/* Read for a FUSE read request; replies itself. */
void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *f, size_t size, off_t off);
/* The FUSE READ (the operations table's). */
void gw_read_op(fuse_req_t req, fuse_ino_t nodeid, size_t size, off_t off,
		struct fuse_file_info *fi);

/* ---- fetch.c: fetch lifetime ---- */
/* Wait for the inode's fetches in flight and its queued fills, then drop
 * every fetch it lists (after a write, a truncate, the last release). */
void gw_inode_drop_fetch(struct gw_inode *ino);

/* ---- fill_thread.c: the fill thread (gateway.h: start, stop) ---- */

/* ---- cobj.c ---- */
/* ino->obj with a reference of the caller's own (cache_obj_put it after
 * use), or NULL: ino->obj's own may be dropped by the last release as soon
 * as ino->lock is let go. */
struct cache_obj *gw_inode_obj(struct gw_inode *ino);
/* Open (or check) the inode's cache object against the origin's current
 * attributes a. Returns 1 if cached data was dropped because the file
 * changed, 0 if not, -errno if the cache cannot hold it (reads then go
 * to the origin). */
int gw_cache_attach(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_attr *a);
/* A successor that cannot reach the origin, for a file it adopted open:
 * the object for the version the cache holds (the dead process kept it
 * current: opens, own writes), and its fileid. -ENOENT: none. */
int gw_cache_attach_stored(struct gw *gw, struct gw_inode *ino,
			   uint64_t *fileid);
/* gw_cache_attach for an inode that may not be open (GETATTR): checks the
 * object only if one is attached, never attaches one. An object is
 * attached only by an open (whose count is already up), so a closed file
 * never holds one: the last release drops it, and an attach racing that
 * release would keep its two fds until the inode is forgotten. */
int gw_cache_check(struct gw *gw, struct gw_inode *ino,
		   const struct nfsc_attr *a);
void gw_cache_drop(struct gw *gw, struct gw_inode *ino);
/* The gateway itself changed the file (setattr): a is the result. */
void gw_cache_own_change(struct gw *gw, struct gw_inode *ino,
			 const struct nfsc_attr *a, bool size_changed);
/* The gateway itself wrote buf (a gw_buf, the bytes from its start) at
 * off; a: the WRITE's post-op attrs. The cache writes whole blocks from
 * buf itself, taking a reference, and copies partial ones. */
void gw_cache_own_write(struct gw *gw, struct gw_inode *ino,
			const struct nfsc_attr *a, char *buf, size_t len,
			uint64_t off);

/* ---- inside the read path: fetch.c ---- */

/* One origin READ of a fetch (at most rsize bytes). */
struct gw_chunk {
	uint32_t want, got;
	bool eof;
	bool has_attr;
	struct nfsc_attr attr;
};

/* Origin READs of a run of whole cache blocks, in flight or done. */
struct gw_fetch {
	struct gw_fetch *next;		/* ino->fetches, ino->lock */
	struct gw_fetch *fill_next;	/* gw->fill_head queue, fill_lock */
	struct gw *gw;
	struct gw_inode *ino;
	uint64_t off;			/* block-aligned */
	size_t len;			/* bytes asked of the origin */
	size_t got;			/* valid bytes from off, when done */
	bool done, eof;			/* ino->lock */
	bool filling;			/* queued for the fill thread; ino->lock */
	bool submitted;			/* the cache took its fill; ino->lock */
	int err;			/* -errno, when done */
	uint64_t attr_gen;		/* the inode's attr_gen at start */
	uint64_t wgen;			/* the inode's wgen at start */
	uint64_t sent_ns;		/* gw_now_ns() when its READs were
					 * sent (all at once); const */
	unsigned refs;			/* list + waiters + in flight; ino->lock */
	unsigned pending;		/* chunk READs outstanding; ino->lock */
	unsigned nchunks;
	struct gw_chunk *chunks;
	char *buf;
};

/* Drop a reference, ino->lock held; a fetch whose last reference goes is
 * put on *freeme, for gw_fetch_free_list once the lock is let go. */
void gw_fetch_unref_locked(struct gw_fetch *f, struct gw_fetch **freeme);
void gw_fetch_free_list(struct gw_fetch *f);
/* Take f off the inode's list (dropping the list's reference). */
void gw_fetch_unlist_locked(struct gw_inode *ino, struct gw_fetch *f,
			    struct gw_fetch **freeme);
/* Keep at most a few completed fetches on the inode's list. */
void gw_fetch_trim(struct gw_inode *ino);
/* Drop the caller's reference (takes ino->lock). */
void gw_fetch_put(struct gw_inode *ino, struct gw_fetch *f);
/* Fetched bytes waiting for the fill thread beyond which readahead pauses
 * (fill_behind=wait) or fetches are not cached (skip). */
#define GW_FILL_QUEUE_MAX (64u << 20)

/* With offline=: wait for f to complete, or for the origin to be lost
 * first: then -EHOSTDOWN (f goes on; the caller drops its reference). */
int gw_fetch_wait_done(struct gw *gw, struct gw_inode *ino,
		       struct gw_fetch *f);
/* Wait for f to complete. false (and f is taken off the list) if a write
 * through the gateway was answered since f started, unless accept_stale. */
bool gw_fetch_wait_fresh(struct gw_inode *ino, struct gw_fetch *f,
			 bool accept_stale);
/* The fetch that holds byte pos (or knows the file ends before it), with
 * a reference; NULL if none. */
struct gw_fetch *gw_fetch_at_locked(struct gw_inode *ino, uint64_t pos);
/* Start a fetch of [pos, end) rounded out to whole blocks, unless one
 * already holds pos (that one is returned). With a reference for the
 * caller; NULL on allocation failure or if end <= pos. */
struct gw_fetch *gw_fetch_gap(struct gw *gw, struct gw_inode *ino,
			      const struct nfsc_cred *cr, uint64_t pos,
			      uint64_t end, uint64_t bs);

/* ---- readahead.c ---- */

/* At start (before any request): the test-only hold (readahead.c). */
void gw_readahead_init(void);

/* The readahead window for a read of [off, off+size): grows with
 * sequential access, reset by a seek. */
size_t gw_readahead_for(struct gw *gw, struct gw_inode *ino,
			uint64_t off, size_t size, uint64_t bs);
/* Fetch ahead of a sequential reader, up to win bytes past reqend,
 * without waiting. obj: the inode's object with the caller's reference,
 * or NULL. */
void gw_readahead_push(struct gw *gw, struct gw_inode *ino,
		       const struct nfsc_cred *cr, struct cache_obj *obj,
		       uint64_t reqend, size_t win, uint64_t bs);


#endif
