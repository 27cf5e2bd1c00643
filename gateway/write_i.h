/* write_i.h - inside the write path (write.c, write_send.c,
 * write_commit.c): what the three share.
 *
 *   write.c         a FUSE WRITE: the extents, the reply (the window:
 *                   write_window.c)
 *   write_send.c    WRITEs to the origin: pieces in parallel, pre-op
 *                   checks, whose credentials, write-back errors
 *   write_commit.c  COMMIT: rounds, resending what a restart lost, flush
 */
#ifndef CACHEGW_WRITE_I_H
#define CACHEGW_WRITE_I_H

#include "gw_i.h"

/* Uncommitted bytes of one file that trigger a COMMIT. A write that
 * crosses the mark while a COMMIT round of the file is running leaves it
 * to that round and the next write; only past GW_COMMIT_WAIT does it wait
 * for the round and COMMIT itself, which bounds what is kept for resending.
 * (Each write past the mark used to wait for the round in flight and then
 * run its own: in a 1 GiB dd through a write-back mount, the 16 FUSE
 * threads spent 92 of their 205 s in COMMITs, 20 s in WRITEs.) */
#define GW_COMMIT_AFTER (32u << 20)
#define GW_COMMIT_WAIT (4 * GW_COMMIT_AFTER)

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

/* write_send.c */
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
int wr_commit_inode(struct gw *gw, struct gw_inode *ino);

#endif
