/* ops_remove.c - FUSE operations that take a name away: unlink, rmdir,
 * rename (a file still open keeps a hidden name: silly.c).
 *
 * Each is one origin call made with the caller's credentials, so the
 * origin's permissions, ownership and root squash apply; the origin's
 * errno is returned as it is. A change a dead process sent and that
 * now fails as a repeat would is answered as done (intent.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cred_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

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
	in = ops_intent_of(req, GW_I_RMDIR, p->nodeid, name, 0, NULL);
	slot = gw_intent_begin(&in, NULL);
	ret = rm(gw->nfs, &cr, &p->fh, name);
	if (ret == -ENOENT && gw_intent_was_done(&in, NULL))
		ret = 0;
	if (!ret) {
		gw_inode_invalidate_attr(gw, p);
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
	in = ops_intent_of(req, GW_I_REMOVE, p->nodeid, name, 0, NULL);
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
		gw_inode_invalidate_attr(gw, p);
		gw_md_unname(gw, p, name);
		if (v)
			gw_inode_invalidate_attr(gw, v);
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
	in = ops_intent_of(req, GW_I_RENAME, p->nodeid, name, np->nodeid, newname);
	slot = gw_intent_begin(&in, NULL);
	ret = nfsc_rename(gw->nfs, &cr, &p->fh, name, &np->fh, newname);
	if (ret == -ENOENT && gw_intent_was_done(&in, NULL))
		ret = 0;
	if (ret && silly)
		gw_silly_undo(gw, np, newname, v);
	if (ret) {
		/* It may have been done all the same (a call sent again
		 * after a reconnect answers ENOENT, a timeout says
		 * nothing): neither directory's names are known whole. */
		gw_dirknown_forget(p);
		gw_dirknown_forget(np);
	} else {
		gw_inode_invalidate_attr(gw, p);
		gw_inode_invalidate_attr(gw, np);
		gw_md_unname(gw, p, name);
		gw_md_unname(gw, np, newname);
		if (v)
			gw_inode_invalidate_attr(gw, v);
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
