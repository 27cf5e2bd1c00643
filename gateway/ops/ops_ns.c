/* ops_ns.c - FUSE operations that make a name: mkdir, mknod, symlink,
 * create, link (names taken away: ops_remove.c; attributes:
 * ops_setattr.c).
 *
 * Each is one origin call made with the caller's credentials, so the
 * origin's permissions, ownership and root squash apply; the origin's
 * errno is returned as it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cache.h"
#include "cred_i.h"
#include "gw_state.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"

/* Turn what a CREATE/MKDIR/... returned into a FUSE entry (LOOKUP or
 * GETATTR what the origin left out) and reply. existed: a CREATE found the
 * file there already (not O_EXCL): the open is checked as any open. */
void gw_reply_created(struct gw *gw, fuse_req_t req, struct gw_inode *parent,
		      const char *name, const struct nfsc_cred *cr,
		      struct nfsc_created *c, struct fuse_file_info *fi,
		      bool existed)
{
	struct fuse_entry_param e;
	struct gw_inode *ino;
	bool has_attr = c->has_attr;
	int ret = 0;

	/* The directory's attributes after the change, from the reply: the
	 * kernel drops its own after a create and asks for them at the next
	 * name it looks up there, and a GETATTR would cost a round trip per
	 * file made (an untar). As after any change, what md.log keeps of
	 * the directory is older. */
	if (c->dir.has_attr) {
		gw_dirknown_added(parent, name, &c->dir, cr);
		gw_md_note_changed(gw, parent);
	} else {
		gw_inode_invalidate_attr(gw, parent);
	}
	if (!c->has_fh)
		ret = nfsc_lookup(gw->nfs, cr, &parent->fh, name, &c->fh,
				  &c->attr, &has_attr);
	if (!ret && !has_attr)
		ret = nfsc_getattr(gw->nfs, cr, &c->fh, &c->attr);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ino = gw_inode_ref(gw, &c->fh, &c->attr, parent->nodeid);
	if (!ino) {
		fuse_reply_err(req, errno);
		return;
	}
	/* A directory this gateway just made, as the MKDIR's reply shows
	 * it: empty, every name in it known (dirknown.c). */
	if (c->attr.type == NFSC_DIR && c->has_attr && c->dir.has_attr)
		gw_dirknown_made(ino, &c->attr, cr);
	gw_inode_note_name(ino, parent->nodeid, name, &c->attr);
	gw_md_note_dent(gw, parent, name, ino->nodeid);
	gw_make_entry(gw, ino, &c->attr, &e);
	if (!fi) {
		if (fuse_reply_entry(req, &e) == -ENOENT)
			gw_inode_forget(gw, ino->nodeid, 1);
		return;
	}
	ret = gw_file_open(gw, req, ino, existed ? NULL : &c->attr, fi);
	if (ret) {
		gw_inode_forget(gw, ino->nodeid, 1);
		fuse_reply_err(req, -ret);
		return;
	}
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		gw_file_release(gw, ino, gw_file_of(fi));
		gw_inode_forget(gw, ino->nodeid, 1);
	}
}

static void mode_sattr(mode_t mode, struct nfsc_sattr *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->set_mode = true;
	sa->mode = mode & 07777;
}


/* Before making a file at the origin: room to record its node-id, or
 * ENOSPC with nothing made (not a file made that the kernel never hears
 * of). */
#define ROOM_OR_ENOSPC(gw, req)						\
	do {								\
		int room_ = gw_reclaim_room(gw);			\
		if (room_) {						\
			fuse_reply_err(req, -room_);			\
			return;						\
		}							\
	} while (0)

/* The change req asks for, as intent.c keys it. */
struct gw_intent ops_intent_of(fuse_req_t req, unsigned op, uint64_t dir,
			       const char *name, uint64_t obj,
			       const char *name2)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct gw_intent in = {
		.op = op, .dir = dir, .name = name, .obj = obj, .name2 = name2,
		.pid = (uint32_t)ctx->pid, .uid = (uint32_t)ctx->uid,
	};

	return in;
}

/* What dir/name is now, into c (0 or -errno; a name gone is -EEXIST: the
 * change failed as a repeat, and nothing else is known). */
static int name_now(struct gw *gw, const struct nfsc_cred *cr,
		    struct gw_inode *dir, const char *name,
		    struct nfsc_created *c)
{
	bool has_attr = false;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = nfsc_lookup(gw->nfs, cr, &dir->fh, name, &c->fh, &c->attr,
			  &has_attr);
	if (!ret && !has_attr)
		ret = nfsc_getattr(gw->nfs, cr, &c->fh, &c->attr);
	c->has_fh = c->has_attr = !ret;
	return ret == -ENOENT ? -EEXIST : ret;
}

/* A MKDIR, MKNOD, SYMLINK or LINK failed with EEXIST: if a dead process
 * had sent this very change (intent.c, resent after a crash) and the file
 * the name has now is the one it made, that file, as made; else EEXIST.
 * The one it made: the handle the origin gave the dead process, when it
 * heard of it; else (the crash came first) an object of the type asked
 * for, for a LINK the source itself (src), for a SYMLINK one that points
 * at target. */
static int redo_created(struct gw *gw, const struct gw_intent *in,
			enum nfsc_type type, const struct nfsc_fh *src,
			const char *target, struct gw_inode *p,
			const char *name, const struct nfsc_cred *cr,
			struct nfsc_created *c)
{
	struct gw_intent_rec rec;
	char now[PATH_MAX];
	int ret;

	if (!gw_intent_was_done(in, &rec))
		return -EEXIST;
	ret = name_now(gw, cr, p, name, c);
	if (ret)
		return ret;
	if (rec.made)
		return rec.made == gw_intent_fh_hash(&c->fh) ? 0 : -EEXIST;
	if (src)
		return src->len == c->fh.len &&
		       !memcmp(src->data, c->fh.data, src->len) ? 0 : -EEXIST;
	if (c->attr.type != type)
		return -EEXIST;
	if (target && (nfsc_readlink(gw->nfs, cr, &c->fh, now,
				     sizeof(now)) || strcmp(now, target)))
		return -EEXIST;
	return 0;
}

/* Set what an EXCLUSIVE CREATE could not (the mode; the times, which hold
 * the verifier) on the file it made, c; c takes the attributes after. */
static int excl_settle(struct gw *gw, const struct nfsc_cred *cr,
		       struct gw_inode *p, const char *name,
		       const struct nfsc_sattr *sa, struct nfsc_created *c)
{
	struct nfsc_sattr set = *sa;
	struct nfsc_post post;
	int ret = 0;

	if (!c->has_fh)
		ret = name_now(gw, cr, p, name, c);
	if (ret)
		return ret == -EEXIST ? -ENOENT : ret;
	set.atime_how = set.mtime_how = NFSC_TIME_SERVER;
	ret = nfsc_setattr(gw->nfs, cr, &c->fh, &set, &post);
	if (ret)
		return ret;
	c->has_attr = post.has_attr;
	if (post.has_attr)
		c->attr = post.attr;
	return 0;
}

/* A change that makes a name (intent in slot) answered: the entry, or
 * the error; the intent ends. */
static void made_reply(struct gw *gw, fuse_req_t req, unsigned slot,
		       struct gw_inode *p, const char *name,
		       const struct nfsc_cred *cr, struct nfsc_created *c,
		       struct fuse_file_info *fi, bool existed, int ret)
{
	if (ret) {
		/* Refused (EEXIST: someone made the name): what the
		 * gateway knew of p's names may be wrong. */
		gw_dirknown_forget(p);
		fuse_reply_err(req, -ret);
	} else {
		gw_reply_created(gw, req, p, name, cr, c, fi, existed);
	}
	gw_intent_end(slot);
}

/* The end of a MKDIR, MKNOD or SYMLINK sent as intent in (slot): the
 * file made is noted for a successor; an EEXIST that a dead process's
 * same change explains is answered as done (redo_created); the reply. */
static void created_reply(struct gw *gw, fuse_req_t req, unsigned slot,
			  const struct gw_intent *in, enum nfsc_type type,
			  const char *target, struct gw_inode *p,
			  const char *name, const struct nfsc_cred *cr,
			  struct nfsc_created *c, int ret)
{
	if (!ret && c->has_fh)
		gw_intent_made(slot, &c->fh);
	if (ret == -EEXIST)
		ret = redo_created(gw, in, type, NULL, target, p, name, cr, c);
	made_reply(gw, req, slot, p, name, cr, c, NULL, false, ret);
}

/* An O_EXCL CREATE failed with EEXIST: if a dead process had sent this very
 * create (intent.c) and the file the name has now is provably the one it
 * made (the handle the origin gave it, or, when it heard nothing, the
 * origin answering an EXCLUSIVE CREATE with its verifier as done), that
 * file, its attributes set as that process would have; else EEXIST. The
 * caller opens it as any open (access checked). */
static int redo_create(struct gw *gw, const struct gw_intent *in,
		       struct gw_inode *p, const char *name,
		       const struct nfsc_cred *cr, const struct nfsc_sattr *sa,
		       struct nfsc_created *c)
{
	static const uint8_t none[8];
	struct gw_intent_rec rec;
	int ret;

	if (!gw_intent_was_done(in, &rec))
		return -EEXIST;
	if (rec.made) {
		ret = name_now(gw, cr, p, name, c);
		if (!ret && rec.made != gw_intent_fh_hash(&c->fh))
			ret = -EEXIST;
	} else if (memcmp(rec.verf, none, sizeof(none))) {
		ret = nfsc_create_verf(gw->nfs, cr, &p->fh, name, rec.verf,
				       true, c);
	} else {
		ret = -EEXIST;
	}
	return ret ? ret : excl_settle(gw, cr, p, name, sa, c);
}

void gw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	struct gw_intent in;
	struct nfsc_created c;
	struct nfsc_sattr sa;
	struct nfsc_cred cr;
	unsigned slot;
	int ret;

	ROOM_OR_ENOSPC(gw, req);
	gw_req_cred(req, &cr);
	mode_sattr(mode, &sa);
	in = ops_intent_of(req, GW_I_MKDIR, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, NULL);
	ret = nfsc_mkdir(gw->nfs, &cr, &p->fh, name, &sa, &c);
	created_reply(gw, req, slot, &in, NFSC_DIR, NULL, p, name, &cr, &c,
		      ret);
}

void gw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	struct gw_intent in;
	struct nfsc_created c;
	struct nfsc_sattr sa;
	struct nfsc_cred cr;
	enum nfsc_type type = NFSC_REG;
	unsigned slot = 0;
	int ret;

	ROOM_OR_ENOSPC(gw, req);
	gw_req_cred(req, &cr);
	mode_sattr(mode, &sa);
	in = ops_intent_of(req, GW_I_MKNOD, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, NULL);
	switch (mode & S_IFMT) {
	case S_IFREG:
		ret = nfsc_create(gw->nfs, &cr, &p->fh, name, &sa, true, &c);
		goto done;
	case S_IFIFO: type = NFSC_FIFO; break;
	case S_IFSOCK: type = NFSC_SOCK; break;
	case S_IFCHR: type = NFSC_CHR; break;
	case S_IFBLK: type = NFSC_BLK; break;
	default:
		fuse_reply_err(req, EINVAL);
		gw_intent_end(slot);
		return;
	}
	ret = nfsc_mknod(gw->nfs, &cr, &p->fh, name, type, &sa, major(rdev),
			 minor(rdev), &c);
done:
	created_reply(gw, req, slot, &in, type, NULL, p, name, &cr, &c, ret);
}

void gw_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	struct gw_intent in;
	struct nfsc_created c;
	struct nfsc_cred cr;
	unsigned slot;
	int ret;

	ROOM_OR_ENOSPC(gw, req);
	gw_req_cred(req, &cr);
	in = ops_intent_of(req, GW_I_SYMLINK, p->nodeid, name, 0, target);
	slot = gw_intent_begin(&in, NULL);
	ret = nfsc_symlink(gw->nfs, &cr, &p->fh, name, target, &c);
	created_reply(gw, req, slot, &in, NFSC_LNK, target, p, name, &cr, &c,
		      ret);
}

void gw_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	bool excl = fi->flags & O_EXCL, verf = excl && gw->o->supervise;
	struct gw_intent in;
	struct nfsc_created c;
	struct nfsc_sattr sa;
	struct nfsc_cred cr;
	bool existed = false;
	uint8_t v[8];
	unsigned slot;
	int ret;

	ROOM_OR_ENOSPC(gw, req);
	gw_req_cred(req, &cr);
	mode_sattr(mode, &sa);
	in = ops_intent_of(req, GW_I_CREATE, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, verf ? v : NULL);
	/* UNCHECKED would reset an existing file's attributes: GUARDED.
	 * Without O_EXCL an existing file is opened as is, truncated only
	 * for O_TRUNC. With O_EXCL on a supervised mount, EXCLUSIVE with a
	 * verifier of our own, then SETATTR (one call more, as the kernel's
	 * NFS client does): a successor that repeats the create after a
	 * crash can then tell the file made from one made by anyone else
	 * since (redo_create). */
	if (verf) {
		ret = nfsc_create_verf(gw->nfs, &cr, &p->fh, name, v, false,
				       &c);
		if (!ret && c.has_fh)
			gw_intent_made(slot, &c.fh);
		if (!ret)
			ret = excl_settle(gw, &cr, p, name, &sa, &c);
	} else {
		ret = nfsc_create(gw->nfs, &cr, &p->fh, name, &sa, true, &c);
		if (!ret && c.has_fh)
			gw_intent_made(slot, &c.fh);
	}
	if (ret == -EEXIST && excl) {
		ret = redo_create(gw, &in, p, name, &cr, &sa, &c);
		existed = true;		/* opened as any open */
	} else if (ret == -EEXIST) {
		bool has_attr = false;

		/* Someone else's file, made since the kernel's LOOKUP: it is
		 * opened as an open(2) of it would be, access checked. */
		existed = true;
		memset(&c, 0, sizeof(c));
		ret = nfsc_lookup(gw->nfs, &cr, &p->fh, name, &c.fh, &c.attr,
				  &has_attr);
		c.has_fh = !ret;
		c.has_attr = has_attr;
		if (!ret && (fi->flags & O_TRUNC)) {
			struct nfsc_sattr tr = { .set_size = true, .size = 0 };
			struct nfsc_post post;

			ret = nfsc_setattr(gw->nfs, &cr, &c.fh, &tr, &post);
			c.has_attr = post.has_attr;
			c.attr = post.attr;
		}
	}
	made_reply(gw, req, slot, p, name, &cr, &c, fi, existed, ret);
}

void gw_link(fuse_req_t req, fuse_ino_t nodeid, fuse_ino_t newparent,
		    const char *newname)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, newparent, p);
	GW_INODE_OR_ESTALE(gw, req, nodeid, ino);
	struct gw_intent in;
	struct nfsc_created c;
	struct nfsc_post post;
	struct nfsc_cred cr;
	unsigned slot;
	int ret;

	gw_req_cred(req, &cr);
	in = ops_intent_of(req, GW_I_LINK, p->nodeid, newname, ino->nodeid, NULL);
	slot = gw_intent_begin(&in, NULL);
	gw_intent_made(slot, &ino->fh);		/* the file is known */
	ret = nfsc_link(gw->nfs, &cr, &ino->fh, &p->fh, newname, &post);
	if (ret == -EEXIST) {
		ret = redo_created(gw, &in, 0, &ino->fh, NULL, p, newname,
				   &cr, &c);
	} else if (!ret) {
		memset(&c, 0, sizeof(c));
		c.fh = ino->fh;
		c.has_fh = true;
		c.attr = post.attr;
		c.has_attr = post.has_attr;
	}
	made_reply(gw, req, slot, p, newname, &cr, &c, NULL, false, ret);
}
