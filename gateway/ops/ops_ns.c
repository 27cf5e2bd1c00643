/* ops_ns.c - FUSE operations that change the namespace or attributes:
 * mkdir, mknod, symlink, link, unlink, rmdir, rename, setattr, access.
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
#include "gw_i.h"
#include "takeover.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

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

	gw_inode_invalidate_attr(parent);
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
static struct gw_intent intent_of(fuse_req_t req, unsigned op, uint64_t dir,
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
	in = intent_of(req, GW_I_MKDIR, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, NULL);
	ret = nfsc_mkdir(gw->nfs, &cr, &p->fh, name, &sa, &c);
	if (!ret && c.has_fh)
		gw_intent_made(slot, &c.fh);
	if (ret == -EEXIST)
		ret = redo_created(gw, &in, NFSC_DIR, NULL, NULL, p, name,
				   &cr, &c);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		gw_reply_created(gw, req, p, name, &cr, &c, NULL, false);
	gw_intent_end(slot);
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
	in = intent_of(req, GW_I_MKNOD, p->nodeid, name, 0, NULL);
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
	if (!ret && c.has_fh)
		gw_intent_made(slot, &c.fh);
	if (ret == -EEXIST)
		ret = redo_created(gw, &in, type, NULL, NULL, p, name, &cr,
				   &c);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		gw_reply_created(gw, req, p, name, &cr, &c, NULL, false);
	gw_intent_end(slot);
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
	in = intent_of(req, GW_I_SYMLINK, p->nodeid, name, 0, target);
	slot = gw_intent_begin(&in, NULL);
	ret = nfsc_symlink(gw->nfs, &cr, &p->fh, name, target, &c);
	if (!ret && c.has_fh)
		gw_intent_made(slot, &c.fh);
	if (ret == -EEXIST)
		ret = redo_created(gw, &in, NFSC_LNK, NULL, target, p, name,
				   &cr, &c);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		gw_reply_created(gw, req, p, name, &cr, &c, NULL, false);
	gw_intent_end(slot);
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
	in = intent_of(req, GW_I_CREATE, p->nodeid, name, 0, NULL);
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
	if (ret)
		fuse_reply_err(req, -ret);
	else
		gw_reply_created(gw, req, p, name, &cr, &c, fi, existed);
	gw_intent_end(slot);
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
	in = intent_of(req, GW_I_LINK, p->nodeid, newname, ino->nodeid, NULL);
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
	if (ret)
		fuse_reply_err(req, -ret);
	else
		gw_reply_created(gw, req, p, newname, &cr, &c, NULL, false);
	gw_intent_end(slot);
}

/* rmdir: one origin call that removes a name. */
static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name,
			int (*rm)(struct nfsc *, const struct nfsc_cred *,
				  const struct nfsc_fh *, const char *))
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	struct gw_intent in;
	struct nfsc_cred cr;
	unsigned slot;
	int ret;

	gw_req_cred(req, &cr);
	in = intent_of(req, GW_I_RMDIR, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, NULL);
	ret = rm(gw->nfs, &cr, &p->fh, name);
	if (ret == -ENOENT && gw_intent_was_done(&in, NULL))
		ret = 0;
	if (!ret) {
		gw_inode_invalidate_attr(p);
		gw_md_unname(gw, p, name);
	}
	fuse_reply_err(req, -ret);
	gw_intent_end(slot);
}

/* The file dir/name (one about to lose that name to an unlink or a rename
 * over it, or one just renamed): its inode, if the gateway has one, with a
 * reference taken (victim_put drops it), and its attributes in *a. NULL if
 * the origin has no such name or the file is not in memory. */
static struct gw_inode *victim_get(struct gw *gw, const struct nfsc_cred *cr,
				   struct gw_inode *dir, const char *name,
				   struct nfsc_attr *a)
{
	struct nfsc_fh fh;
	bool has_attr = false;

	if (nfsc_lookup(gw->nfs, cr, &dir->fh, name, &fh, a, &has_attr))
		return NULL;
	if (!has_attr && nfsc_getattr(gw->nfs, cr, &fh, a))
		return NULL;
	return gw_inode_ref_fh(gw, &fh);
}

/* After the reply (the kernel holds the operation's locks until it has
 * it): the file's nlink or ctime changed, which all its names must show
 * at once. Our own copy was updated or invalidated before the reply. */
static void victim_put(struct gw *gw, struct gw_inode *v, bool changed)
{
	if (!v)
		return;
	if (changed)
		fuse_lowlevel_notify_inval_inode(gw->se, v->nodeid, -1, 0);
	gw_inode_forget(gw, v->nodeid, 1);
}

void gw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	struct gw_intent in;
	struct gw_inode *v;
	struct nfsc_attr a;
	struct nfsc_cred cr;
	unsigned slot;
	int ret;

	gw_req_cred(req, &cr);
	/* 1. Which file loses the name. 2. Open through the mount and this
	 *    its last name: a hidden name keeps it for the open descriptors
	 *    (the origin would destroy it); else REMOVE. */
	in = intent_of(req, GW_I_REMOVE, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, NULL);
	v = victim_get(gw, &cr, p, name, &a);
	if (v && gw_silly_is(v, p, name))
		ret = -EBUSY;
	else if (v && gw_silly_wanted(v, &a))
		ret = gw_silly_rename(gw, &cr, p, name, v, &a);
	else
		ret = nfsc_remove(gw->nfs, &cr, &p->fh, name);
	if (ret == -ENOENT && gw_intent_was_done(&in, NULL))
		ret = 0;
	if (!ret) {
		gw_inode_invalidate_attr(p);
		gw_md_unname(gw, p, name);
		if (v)
			gw_inode_invalidate_attr(v);
	}
	fuse_reply_err(req, -ret);
	gw_intent_end(slot);
	victim_put(gw, v, !ret);
}

void gw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, nfsc_rmdir);
}

void gw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct gw *gw = req_gw(req);
	GW_INODE_OR_ESTALE(gw, req, parent, p);
	GW_INODE_OR_ESTALE(gw, req, newparent, np);
	struct gw_inode *v = NULL, *moved = NULL;
	struct gw_intent in;
	struct nfsc_attr va, ma;
	struct nfsc_cred cr;
	bool silly = false;
	unsigned slot = 0;
	int ret;

	/* NFSv3 has no atomic exchange. */
	if (flags & ~RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	gw_req_cred(req, &cr);
	if (flags & RENAME_NOREPLACE) {
		struct nfsc_fh fh;
		struct nfsc_attr a;
		bool has_attr;

		/* Best effort: NFSv3 cannot make this atomic. */
		ret = nfsc_lookup(gw->nfs, &cr, &np->fh, newname, &fh, &a,
				  &has_attr);
		if (ret != -ENOENT) {
			fuse_reply_err(req, ret ? -ret : EEXIST);
			return;
		}
	} else {
		/* The file renamed over, as in gw_unlink: open through the
		 * mount, it moves to a hidden name first (not atomic: for a
		 * moment newname does not exist), and back if the RENAME
		 * fails. */
		v = victim_get(gw, &cr, np, newname, &va);
		if (v && gw_silly_is(v, np, newname)) {
			ret = -EBUSY;
			goto reply;
		}
		if (v && gw_silly_wanted(v, &va)) {
			ret = gw_silly_rename(gw, &cr, np, newname, v, &va);
			if (ret)
				goto reply;
			silly = true;
		}
	}
	in = intent_of(req, GW_I_RENAME, p->nodeid, name, np->nodeid, newname);
	slot = gw_intent_begin(&in, NULL);
	ret = nfsc_rename(gw->nfs, &cr, &p->fh, name, &np->fh, newname);
	if (ret == -ENOENT && gw_intent_was_done(&in, NULL))
		ret = 0;
	if (ret && silly)
		gw_silly_undo(gw, np, newname, v);
	if (!ret) {
		gw_inode_invalidate_attr(p);
		gw_inode_invalidate_attr(np);
		gw_md_unname(gw, p, name);
		gw_md_unname(gw, np, newname);
		if (v)
			gw_inode_invalidate_attr(v);
		/* A rename changes the moved file's ctime too. */
		moved = victim_get(gw, &cr, np, newname, &ma);
		if (moved) {
			gw_inode_set_attr_if_newer(moved, &ma);
			gw_inode_note_name(moved, np->nodeid, newname, &ma);
			gw_md_note_dent(gw, np, newname, moved->nodeid);
		}
	}
reply:
	fuse_reply_err(req, -ret);
	gw_intent_end(slot);
	victim_put(gw, v, !ret);
	victim_put(gw, moved, true);
}

/* Is the mode in sa only the kernel clearing setuid/setgid before a write
 * or truncate by cr, who does not own the file? The origin refuses a
 * non-owner's chmod (EPERM), where a local fs lets the write through.
 * FUSE_CAP_HANDLE_KILLPRIV would stop the kernel from sending it, but
 * libfuse 3.14 does not pass that flag on in its INIT reply (checked:
 * wanted and capable, absent from the flags sent), and libfuse 3.14 has
 * no HANDLE_KILLPRIV_V2. So, as the NFS client does (nfs_setattr drops
 * ATTR_MODE with ATTR_KILL_SUID/SGID), the mode change is dropped and the
 * origin clears the bits itself on WRITE (ganesha does; it keeps them on
 * SETATTR(size)). A non-owner's own chmod never gets here: with
 * default_permissions the kernel refuses it (EPERM) before asking us. */
static bool kill_priv_only(struct gw_inode *ino, const struct nfsc_sattr *sa,
			   const struct nfsc_cred *cr)
{
	uint32_t mode, uid;
	bool valid;

	if (!sa->set_mode || sa->set_uid || sa->set_gid ||
	    sa->atime_how != NFSC_TIME_KEEP || sa->mtime_how != NFSC_TIME_KEEP)
		return false;
	pthread_mutex_lock(&ino->lock);
	valid = ino->attr_valid;
	mode = ino->attr.mode;
	uid = ino->attr.uid;
	pthread_mutex_unlock(&ino->lock);
	return valid && cr->uid != 0 && cr->uid != uid &&
	       (mode & (S_ISUID | S_ISGID)) &&
	       (sa->mode | S_ISUID | S_ISGID) == (mode | S_ISUID | S_ISGID) &&
	       sa->mode != mode;
}

void gw_setattr(fuse_req_t req, fuse_ino_t nodeid, struct stat *st,
		       int to_set, struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	struct nfsc_sattr sa;
	struct nfsc_post post;
	struct nfsc_cred cr;
	struct stat out;
	bool killpriv, kernel_times;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.set_mode = to_set & FUSE_SET_ATTR_MODE;
	sa.mode = st->st_mode & 07777;
	sa.set_uid = to_set & FUSE_SET_ATTR_UID;
	sa.uid = st->st_uid;
	sa.set_gid = to_set & FUSE_SET_ATTR_GID;
	sa.gid = st->st_gid;
	sa.set_size = to_set & FUSE_SET_ATTR_SIZE;
	sa.size = (uint64_t)st->st_size;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		sa.atime_how = NFSC_TIME_SERVER;
	else if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.atime_how = NFSC_TIME_CLIENT;
		sa.atime = st->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		sa.mtime_how = NFSC_TIME_SERVER;
	else if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.mtime_how = NFSC_TIME_CLIENT;
		sa.mtime = st->st_mtim;
	}
	gw_req_cred(req, &cr);
	/* writeback: the kernel keeps the mtime of a file it writes in its
	 * page cache and sends it (MTIME|CTIME, with SIZE for a truncate) at
	 * close, fsync and from its flusher - as whoever closes, or as root
	 * with no pid. A writer that is not the owner may not set an explicit
	 * mtime at the origin (EPERM), where its write on a local fs sets it:
	 * such a SETATTR goes with the opener's credentials, and with the
	 * origin's own time if the origin refuses the kernel's, which is what
	 * the WRITEs set there anyway. (An explicit time of the user's own
	 * from a non-owner never gets here: the kernel refuses it first,
	 * default_permissions.) */
	kernel_times = gw->o->writeback && (to_set & FUSE_SET_ATTR_CTIME) &&
		       (to_set & FUSE_SET_ATTR_MTIME);
	if (kernel_times) {
		pthread_mutex_lock(&ino->lock);
		kernel_times = ino->attr.type == NFSC_REG;
		pthread_mutex_unlock(&ino->lock);
	}
	if (kernel_times && fi && gw_file_of(fi))
		cr = gw_file_of(fi)->cred;
	if (kernel_times) {
		/* The kernel's mtime, not the caller's: judged without it. */
		struct nfsc_sattr k = sa;

		k.mtime_how = NFSC_TIME_KEEP;
		killpriv = kill_priv_only(ino, &k, &cr);
	} else {
		killpriv = kill_priv_only(ino, &sa, &cr);
	}
	if (killpriv)
		sa.set_mode = false;
	/* Uncommitted writes are committed before a truncate: kept for a
	 * resend after it, they could bring cut data back. */
	if (sa.set_size) {
		ret = gw_write_flush(gw, ino, NULL, false);
		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
	}
	if (killpriv && !sa.set_size) {
		/* Nothing left to change: the kernel gets attributes it must
		 * not keep (timeout 0), since the WRITE that follows clears
		 * the bits at the origin. */
		ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, &post.attr);
		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
		gw_inode_invalidate_attr(ino);
		gw_attr_to_stat(&post.attr, nodeid, &out);
		fuse_reply_attr(req, &out, 0);
		return;
	}
	ret = nfsc_setattr(gw->nfs, &cr, &ino->fh, &sa, &post);
	if (kernel_times && (ret == -EPERM || ret == -EACCES) &&
	    sa.mtime_how == NFSC_TIME_CLIENT) {
		sa.mtime_how = NFSC_TIME_SERVER;
		ret = nfsc_setattr(gw->nfs, &cr, &ino->fh, &sa, &post);
	}
	/* The kernel's times alone, refused to the file it came through (a
	 * writer who lost write access at the origin): as each other writer,
	 * as write-back WRITEs go (write.c, "whose credentials"). Refused to
	 * all, the origin keeps the time its WRITEs set, and the request
	 * gets its attributes: a refused WRITE's error reaches the writers
	 * by itself (gw_write_flush), and a close or fsync must not fail
	 * again, for ever, for a time the kernel keeps. */
	if (kernel_times && (ret == -EPERM || ret == -EACCES) &&
	    !sa.set_size && !sa.set_mode && !sa.set_uid && !sa.set_gid) {
		struct nfsc_cred alt[GW_CRED_TRIES];
		size_t n = gw_write_other_creds(ino, &cr, alt), i;

		for (i = 0; i < n && (ret == -EPERM || ret == -EACCES); i++)
			ret = nfsc_setattr(gw->nfs, &alt[i], &ino->fh, &sa,
					   &post);
		if (ret == -EPERM || ret == -EACCES) {
			ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, &post.attr);
			post.has_attr = !ret;
		}
	}
	if (!ret && !post.has_attr)
		ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, &post.attr);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	gw_inode_set_attr(ino, &post.attr);
	if (sa.set_size) {
		pthread_mutex_lock(&ino->lock);
		ino->wgen++;	/* fetches from before are stale */
		pthread_mutex_unlock(&ino->lock);
		gw_inode_drop_fetch(ino);
	}
	/* Our own change: the cache follows it instead of being dropped. */
	gw_cache_own_change(gw, ino, &post.attr, sa.set_size);
	gw_attr_to_stat(&post.attr, nodeid, &out);
	if (gw_silly_has(ino) && out.st_nlink > 0)
		out.st_nlink--;	/* its hidden name is not one of its names */
	fuse_reply_attr(req, &out, killpriv ? 0 : gw_attr_ttl(gw, &post.attr));
}

void gw_access(fuse_req_t req, fuse_ino_t nodeid, int mask)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	struct nfsc_cred cr;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	gw_req_cred(req, &cr);
	ret = gw_access_check(gw, ino, &cr, mask, NULL, NULL);
	if (ret != -EHOSTDOWN && gw_offline(gw))
		gw_offline_count(gw);
	fuse_reply_err(req, -ret);
}
