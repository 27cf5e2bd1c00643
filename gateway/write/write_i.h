/* write_i.h - the write path (gateway/write/): WRITEs and COMMITs to the
 * origin, and what is kept until they are done. One section per file;
 * the first ones are what the other rooms use, the rest the room's own.
 *
 *   write.c         a FUSE WRITE: the extents, the reply
 *   write_window.c  the write window: bytes of WRITE in flight
 *   write_send.c    WRITEs to the origin: pieces in parallel, pre-op
 *                   checks, whose credentials, write-back errors
 *   write_commit.c  COMMIT: rounds, resending what a restart lost, flush
 *   write_extents.c the bookkeeping of those, free of FUSE and the origin
 */
#ifndef CACHEGW_WRITE_I_H
#define CACHEGW_WRITE_I_H

#include "gw_i.h"

/* ---- write_window.c: bytes of WRITE in flight ---- */
/* Take n bytes of the window, waiting (never failing) until they fit;
 * a request bigger than the window runs alone. Counted in win_*. */
void gw_window_get(struct gw *gw, size_t n);
void gw_window_put(struct gw *gw, size_t n);

/* ---- write.c ---- */
/* buf: a gw_buf holding the size bytes, which gw_write takes over (it is
 * kept for resending until COMMIT, and the cache writes from it).
 * writepage: the kernel flushing its page cache (fi->writepage), not a
 * write(2) waiting for the answer. */
void gw_write(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	      struct gw_file *f, char *buf, size_t size, off_t off,
	      bool writepage);
/* The FUSE WRITE (the operations table's, as write_buf): the bytes into a
 * gw_buf, then gw_write. */
void gw_write_buf_op(fuse_req_t req, fuse_ino_t nodeid,
		     struct fuse_bufvec *bufv, off_t off,
		     struct fuse_file_info *fi);
/* COMMIT, then the write error f should see: for a writer, the last
 * write-back WRITE or COMMIT failure since it was last told at an fsync
 * (errseq, per open file as the kernel's f_wb_err); for a reader none;
 * with no f, this COMMIT's. fsync: f has been told. A close (FLUSH) tells
 * and keeps it, as the NFS client's close does: the FLUSH of a descriptor
 * that another process inherited and closed (a child's exit or exec)
 * comes through the same open file, and must not take the error from
 * the writer's own fsync and close. */
int gw_write_flush(struct gw *gw, struct gw_inode *ino, struct gw_file *f,
		   bool fsync);
void gw_write_forget(struct gw_inode *ino);
/* f was just published (gw_handle_publish): its record follows the
 * file's uncommitted data from now on. */
void gw_write_file_published(struct gw_inode *ino, struct gw_file *f);
/* A successor's (gw_state.h), under ino->lock: the writer f, adopted and
 * just listed in ino->wfiles, keeps its record up to date from now on; the
 * write error the record holds is f's alone to tell. */
void gw_write_adopt_locked(struct gw_inode *ino, struct gw_file *f);
/* After a crash: COMMIT what the dead process had written and not
 * committed (as its writers' records say), as cr. A verifier other than
 * the one it came under, or more than one, means the origin restarted
 * meanwhile and lost some of it: -EIO. An error is recorded for the
 * writers (errseq, and in their records). Nothing recorded: 0, with no
 * COMMIT. */
int gw_write_adopt_commit(struct gw *gw, struct gw_inode *ino,
			  const struct nfsc_cred *cr);
/* Those COMMITs, owed rather than made before serving (write_commit.c):
 * one per inode, made by a thread of their own, or by the file's next
 * flush, fsync, release or WRITE if it comes first (which then waits for
 * it: no writer is told its data is stable before it is, and the records
 * gw_write_adopt_commit reads are not rewritten by this process's own
 * writes before it has read them). */
struct gw_owed {
	struct gw_inode *ino;		/* gw->owed_lock; NULL once done */
	struct nfsc_cred cred;		/* one of its writers' */
};
/* Before serving: take v (n entries, malloc'd, each inode once) and start
 * the thread (gateway.h: gw_write_owed_stop). */
void gw_write_owed_start(struct gw *gw, struct gw_owed *v, size_t n);
/* Before this process's own WRITE to ino: the COMMIT it owes, if any. */
void gw_write_owed_first(struct gw *gw, struct gw_inode *ino);
/* The credentials of the files open for writing on ino other than cr,
 * each once, oldest open first, into out; at most GW_CRED_TRIES. */
#define GW_CRED_TRIES 8
size_t gw_write_other_creds(struct gw_inode *ino, const struct nfsc_cred *cr,
			    struct nfsc_cred *out);

/* ---- inside the write path ---- */
/* Uncommitted bytes of one file that trigger a COMMIT. A write that
 * crosses the mark while a COMMIT round of the file is running leaves it
 * to that round and the next write; only past GW_COMMIT_WAIT does it wait
 * for the round and COMMIT itself, which bounds what is kept for resending.
 * (Each write past the mark used to wait for the round in flight and then
 * run its own: in a 1 GiB dd through a write-back mount, the 16 FUSE
 * threads spent 92 of their 205 s in COMMITs, 20 s in WRITEs.) */
#define GW_COMMIT_AFTER (32u << 20)
#define GW_COMMIT_WAIT (4 * GW_COMMIT_AFTER)

/* With writeback the kernel flushes a small file as one WRITE from
 * offset 0: up to this size, with nothing else of the file uncommitted or
 * in flight, it goes FILE_SYNC, is stable when answered, and the close
 * makes no COMMIT (one round trip a file less when a tree is written).
 * Not for write(2)s written through: a file written in several pieces
 * would pay the origin's sync on each. */
#define GW_SYNC_SMALL (64u << 10)

struct gw_extent {
	struct gw_extent *next;
	uint64_t off;
	size_t len;
	uint8_t verf[8];		/* verifier of the WRITEs that sent it */
	bool mixed;			/* they gave different ones: the origin
					 * restarted in between, resend */
	struct nfsc_cred cred;
	char *data;			/* a gw_buf: recycled, not malloc'd (see
					 * wr_extent_new) */
};

struct wchunk {
	uint32_t written;
	uint8_t verf[8];
	struct nfsc_post post;
};

/* What the WRITEs of one range said: the newest post-op attributes, and
 * the verifier - every piece's, which may differ if the origin restarted
 * between them. */
struct wresult {
	struct nfsc_post post;
	uint8_t verf[8];
	bool have_verf;
	bool mixed;			/* pieces gave different verifiers */
	bool foreign;			/* wr_wcc_foreign */
};

/* write_extents.c: no locks of its own; the caller holds ino->lock for
 * the inode's list. */
/* Did the COMMIT that answered verf lose e (or could it have: e's WRITEs
 * gave different verifiers)? */
bool wr_extent_lost(const struct gw_extent *e, const uint8_t verf[8]);
/* Unlist first and everything older from *list (newest first), taking
 * their lengths off *bytes. */
void wr_extents_cut(struct gw_extent **list, size_t *bytes,
		    struct gw_extent *first);
/* v: the n extents listed, newest first. The index of the oldest one a
 * COMMIT of first and what is older lost (verf); every one from there to
 * v[0] is written again, oldest first, so that the newest bytes land
 * last. SIZE_MAX if none of first and older was lost (a newer one is not
 * this COMMIT's to judge). */
size_t wr_extents_resend_from(struct gw_extent *const *v, size_t n,
			      const struct gw_extent *first,
			      const uint8_t verf[8]);
/* What a writer's record says of the uncommitted data (fl: GW_UNSTABLE,
 * GW_UNSTABLE_MIXED; verf: a verifier it came under; gw_state.h), with
 * what another says (fl2, verf2) or with one more extent e folded in: data
 * under two verifiers is MIXED. */
void wr_unstable_add(uint32_t *fl, uint64_t *verf, uint32_t fl2,
		     uint64_t verf2);
void wr_unstable_add_extent(uint32_t *fl, uint64_t *verf,
			    const struct gw_extent *e);
/* Did a COMMIT that answered commit lose some of that data? */
bool wr_unstable_lost(uint32_t fl, uint64_t verf, const uint8_t commit[8]);
/* Fold one WRITE reply of a range into r: the newest post-op attributes,
 * the verifier (mixed if pieces differ; a piece that took nothing vouches
 * for nothing). */
void wr_result_add(struct wresult *r, const struct wchunk *ch);
/* Is w (pre-op attributes) the version a? */
bool wr_wcc_is(const struct nfsc_wcc *w, const struct nfsc_attr *a);
bool wr_wcc_foreign(const struct nfsc_attr *known, const struct wchunk *ch,
		    size_t n, size_t i);
int wr_send_range(struct gw *gw, const struct nfsc_cred *cr,
		  const struct nfsc_fh *fh, const char *buf, size_t len,
		  uint64_t off, bool stable, const struct nfsc_attr *known,
		  struct wresult *res);
bool wr_refused(int ret);
void wr_werr_record_locked(struct gw_inode *ino, int err);
bool wr_werr_pending_locked(struct gw_inode *ino);
int wr_send_range_as(struct gw *gw, struct gw_inode *ino,
		     struct nfsc_cred *cr, const char *buf, size_t len,
		     uint64_t off, bool stable, const struct nfsc_attr *known,
		     struct wresult *res);
int wr_commit_as(struct gw *gw, struct gw_inode *ino,
		 const struct nfsc_cred *cr, uint8_t verf[8],
		 struct nfsc_post *post);

/* write_commit.c */
struct gw_extent *wr_extent_new(char *data);
void wr_free_extents(struct gw_extent *e);
/* List e (answered UNSTABLE) in ino's uncommitted list, and what it
 * holds in the writers' records; under ino->lock. */
void wr_list_locked(struct gw_inode *ino, struct gw_extent *e);
int wr_commit_inode(struct gw *gw, struct gw_inode *ino);


#endif
