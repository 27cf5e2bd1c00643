/* read_i.h - private to the read path of gateway/, one section per file:
 * fetch.c (fetch lifetime), fill.c (the fill thread), readahead.c
 * (readahead policy), read.c (the read request). The rest of the gateway
 * sees gw_i.h's gw_read, gw_inode_drop_fetch and gw_fill_start/stop only.
 * The coherency rules they follow, and the counters they go by, are
 * written at the top of read.c.
 */
#ifndef CACHEGW_READ_I_H
#define CACHEGW_READ_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_i.h"

/* ---- fetch.c ---- */

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
 * caller; NULL on allocation failure. */
struct gw_fetch *gw_fetch_gap(struct gw *gw, struct gw_inode *ino,
			      const struct nfsc_cred *cr, uint64_t pos,
			      uint64_t end, uint64_t bs);

/* ---- fill.c ---- */

/* Queue a completed fetch for the cache, with the reference of its READs
 * and a count in ino->fills_queued taken by the caller. */
void gw_fill_queue(struct gw *gw, struct gw_fetch *f);

/* ---- readahead.c ---- */

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
