/* ops_i.h - the operations room (gateway/ops/): the FUSE low-level
 * operations, each answered from the rooms below. One section per file.
 *
 * ops.c:     the operations table, INIT, GETATTR, READLINK, FORGET,
 *            STATFS, interruptible operations.
 * lookup.c:  LOOKUP: from the origin, from kept names, offline.
 * ops_ns.c:  operations that make a name: mkdir, mknod, symlink,
 *            create, link.
 * ops_remove.c: unlink, rmdir, rename.
 * ops_setattr.c: setattr, access, the truncate of an open(O_TRUNC).
 * listing.c: directories (snapshots, readdir(plus)).
 * walkahead.c: the next subdirectories of a walk, listed ahead
 *            (walk_ahead=).
 * open.c:    files: open, release, flush, fsync, fallocate.
 * Locks (getlk, setlk, flock) are lock/'s (lock_i.h), in the table here.
 */
#ifndef CACHEGW_OPS_I_H
#define CACHEGW_OPS_I_H

#include "gw_i.h"

struct gw_handle;

/* ---- ops.c: the operations table (gw_oper: gateway.h) ---- */

/* ---- lookup.c ---- */
void gw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);

/* ---- open.c: an open file ---- */
/* Set up fi for ino (access check, close-to-open, keep_cache, cache
 * object). created: attributes from a CREATE that just made the file (no
 * checks: its creator may write it whatever its mode). */
int gw_file_open(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		 const struct nfsc_attr *created, struct fuse_file_info *fi);
/* The last of f (fi->fh's, gw_file_of): unlisted and freed. */
void gw_file_release(struct gw *gw, struct gw_inode *ino, struct gw_file *f);
/* A file's release as a handle (gw_handle_add): what a RELEASE does, for
 * a file the kernel never released; it marks a handle as a file's. */
void gw_file_handle_release(struct gw *gw, struct gw_handle *h);
struct gw_hrec;
/* A directory the kernel had from an earlier process, under the same id
 * (listing.c). */
int gw_dir_adopt(struct gw *gw, const struct gw_hrec *r);

/* Fresh attributes: from the attribute cache unless force, else GETATTR.
 * 1 if the origin's answer shows the file's data changed (its cache
 * object was emptied), 0 if not, -errno on failure. (ops.c) */
int gw_get_attr(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		bool force, struct nfsc_attr *a);

/* ---- listing.c: directories ---- */
/* A listing of ino's directory for cr, of version ver (as its parent's
 * listing gave it), read ahead of a walk and left lingering for the
 * walk's open (which checks its version at its first read): 1 read, 0
 * one for cr is there already (being read or lingering), -ENOSPC the
 * listings read ahead and not taken yet hold budget entries or more,
 * -errno. */
int gw_listing_ahead(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, const struct nfsc_attr *ver,
		     size_t budget);
/* fn on the caller's youngest loaded listing of directory dir, under the
 * listings' lock (fn takes no other lock but walkahead.c's, held before
 * it); -ENOENT if there is none. */
int gw_listing_with(uint64_t dir, const struct nfsc_cred *cr,
		    void (*fn)(const struct nfsc_dirlist *l, void *arg),
		    void *arg);

/* ---- walkahead.c: the next subdirectories of a walk, listed ahead ---- */
/* The caller opens directory ino: a walk's next subdirectories go to the
 * walk threads (walk_ahead=N). */
void gw_walk_opened(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr);

void gw_opendir(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);
void gw_readdir(fuse_req_t req, fuse_ino_t nodeid, size_t size, off_t off,
		struct fuse_file_info *fi);
void gw_readdirplus(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		    off_t off, struct fuse_file_info *fi);
void gw_releasedir(fuse_req_t req, fuse_ino_t nodeid,
		   struct fuse_file_info *fi);
void gw_fsyncdir(fuse_req_t req, fuse_ino_t nodeid, int datasync,
		 struct fuse_file_info *fi);
/* Did a listing give a name's handle and attributes (what a LOOKUP
 * gives, only to a caller who may search the directory)? Then it counts
 * as the origin's leave to search it (gw_access_note_listed). */
bool ops_names_searched(const struct nfsc_dirlist *l);

/* ---- open.c: files ---- */
void gw_open(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);
void gw_flush(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);
void gw_fsync(fuse_req_t req, fuse_ino_t nodeid, int datasync,
	      struct fuse_file_info *fi);
void gw_fallocate(fuse_req_t req, fuse_ino_t nodeid, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi);
void gw_release(fuse_req_t req, fuse_ino_t nodeid, struct fuse_file_info *fi);

/* ---- ops_ns.c ---- */
void gw_reply_created(struct gw *gw, fuse_req_t req, struct gw_inode *parent,
		      const char *name, const struct nfsc_cred *cr,
		      struct nfsc_created *c, struct fuse_file_info *fi,
		      bool existed);
void gw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void gw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void gw_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		const char *name);
void gw_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);
void gw_link(fuse_req_t req, fuse_ino_t nodeid, fuse_ino_t newparent,
	     const char *newname);
/* The change req asks for, as intent.c keys it (ops_ns.c, ops_remove.c). */
struct gw_intent ops_intent_of(fuse_req_t req, unsigned op, uint64_t dir,
			       const char *name, uint64_t obj,
			       const char *name2);

/* ---- ops_remove.c ---- */
void gw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void gw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void gw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);

/* ---- ops_setattr.c ---- */
void gw_setattr(fuse_req_t req, fuse_ino_t nodeid, struct stat *st,
		int to_set, struct fuse_file_info *fi);
void gw_access(fuse_req_t req, fuse_ino_t nodeid, int mask);
/* The SETATTR a FUSE setattr asks for: st's fields that to_set
 * (FUSE_SET_ATTR_*) names; a time set to now is the origin's time. */
void ops_sattr_of(const struct stat *st, int to_set, struct nfsc_sattr *sa);
/* Is sa's mode change only the kernel clearing setuid/setgid before a
 * write or truncate by cr, who does not own ino? Then it is not sent
 * (the origin refuses a non-owner's chmod; its WRITE clears the bits). */
bool ops_kill_priv_only(struct gw_inode *ino, const struct nfsc_sattr *sa,
			const struct nfsc_cred *cr);
/* open(O_TRUNC) on a connection with FUSE_CAP_ATOMIC_O_TRUNC: the file
 * truncated at the origin as cr, as gw_setattr would (uncommitted writes
 * committed first; the inode and the cache follow). 0 or -errno. */
int gw_file_truncate(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr);


#endif
