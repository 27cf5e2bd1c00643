/* cred_i.h - the credentials room (gateway/cred/): who the caller is and
 * what the origin lets them do. One section per file.
 *
 * caller.c: a FUSE request's caller's credentials.
 * access.c: ACCESS checks and their cache.
 * groups.c: a caller's supplementary groups (/proc or the user database;
 *           groups.h: libc only, for its unit test).
 */
#ifndef CACHEGW_CRED_I_H
#define CACHEGW_CRED_I_H

#include "gw_i.h"

#include "groups.h"

/* ---- caller.c ---- */
/* The caller of req, as the origin is sent it. */
void gw_req_cred(fuse_req_t req, struct nfsc_cred *cr);

/* ---- access.c ---- */
/* 0 if the origin lets cr do mask (R_OK|W_OK|X_OK) to ino, else -EACCES
 * (or the origin's error). When it had to ask the origin, *fresh receives
 * the attributes that came with the answer (*has_fresh; both may be
 * NULL). */
int gw_access_check(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, int mask,
		    struct nfsc_attr *fresh, bool *has_fresh);
/* The kernel's GETATTR of ino for cr, where an open follows as a rule
 * (the kernel's permission check on the way to it): a regular file for
 * which cr holds no answer is asked as an ACCESS of every bit, whose
 * reply carries the attributes (*a) and whose answer is kept, so that
 * the open finds both (one call, not a GETATTR and an ACCESS). 0; the
 * origin's -errno; -ENODATA: not a file, an answer is held, or the reply
 * had no attributes (send a GETATTR). */
int gw_access_getattr(struct gw *gw, struct gw_inode *ino,
		      const struct nfsc_cred *cr, struct nfsc_attr *a);
/* A LOOKUP in dir as cr was answered by the origin: keep that cr may
 * search dir, as an ACCESS answer (for lookups from kept names, also after
 * a restart), so that no ACCESS is asked for what the origin just showed. */
void gw_access_note_search(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_cred *cr);
/* A READDIRPLUS of dir (version ver) as cr was answered (granted) or
 * refused with EACCES: kept as an ACCESS answer of READ (and LOOKUP, when
 * the answer held names' handles and attributes: searched), and a
 * granted one as the reader of that version (gw_md_note_reader). */
void gw_access_note_listed(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_cred *cr,
			    const struct nfsc_attr *ver, bool granted,
			    bool searched);
/* May cr be shown dir's listing kept at version listed (a start before,
 * or offline)? 0; -EACCES (the origin refuses cr); -EHOSTDOWN (offline,
 * and no answer for cr is held); another -errno of the origin's. */
int gw_access_kept_listing(struct gw *gw, struct gw_inode *dir,
			   const struct nfsc_cred *cr,
			   const struct nfsc_attr *listed);
/* Under ino->lock: an own WRITE took the file from before to after (same
 * mode and owners): the answers stamped with before hold for after. */
void gw_access_restamp(struct gw_inode *ino, const struct nfsc_attr *before,
		       const struct nfsc_attr *after);


#endif
