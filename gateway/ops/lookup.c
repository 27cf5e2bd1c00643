/* lookup.c - LOOKUP: from the origin, from the names a start before kept
 * (kept_md.c: while younger than the directory's attribute timeout), or,
 * while the origin is lost, from whatever is held (offline.c), and "."
 * and ".." from the inode table.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cred_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"

/* A LOOKUP answered from kept names: 0 and *e (a new kernel reference),
 * -EACCES (the caller may not search dir), -ENOENT (not kept, too old,
 * or not usable: ask the origin). offline: the origin is lost; what was
 * kept at any age and in this run serves (offline.c; gw_md_listing too). */
static int lookup_kept(struct gw *gw, fuse_req_t req, struct gw_inode *dir,
		       const char *name, bool offline,
		       struct fuse_entry_param *e)
{
	struct gw_inode *ino;
	struct nfsc_cred cr;
	struct nfsc_attr a;
	uint64_t child;
	int ret;

	if (gw_md_kept_child(gw, dir, name, offline, &child))
		return -ENOENT;
	/* The search right below is asked of a directory only when the
	 * gateway knows it is one (access.c: LOOKUP, not EXECUTE): a
	 * successor's directory whose attributes were not kept (in use
	 * when its predecessor died) is asked at the origin. */
	pthread_mutex_lock(&dir->lock);
	ret = dir->attr_valid ? 0 : -ENOENT;
	pthread_mutex_unlock(&dir->lock);
	if (ret && !offline)
		return ret;
	/* The origin would refuse a LOOKUP in a directory the caller may
	 * not search: so does a kept name. */
	gw_req_cred(req, &cr);
	ret = gw_access_check(gw, dir, &cr, X_OK, NULL, NULL);
	if (ret)
		return ret == -EACCES || ret == -EHOSTDOWN ? ret : -ENOENT;
	/* Offline, a name kept is there even when the rest is not held:
	 * EHOSTDOWN, not ENOENT. */
	ino = gw_inode_resolve(gw, child);
	if (!ino)
		return offline ? -EHOSTDOWN : -ENOENT;	/* given back */
	if (offline ? gw_offline_attr(gw, ino, &a) :
		      gw_inode_cached_attr(gw, ino, &a)) {
		gw_inode_forget(gw, child, 1);
		return offline ? -EHOSTDOWN : -ENOENT;
	}
	/* An open that finds another version must tell the kernel (open.c):
	 * it has these attributes, not the origin's of now. */
	pthread_mutex_lock(&ino->lock);
	ino->entry_kept = true;
	ino->kept_attr = a;
	pthread_mutex_unlock(&ino->lock);
	gw_make_entry(gw, ino, &a, e);
	/* Trusted by the kernel for what is left of their timeout, as
	 * their age says (none, for attributes only md.log holds): once the
	 * origin is back, it asks as it would have. */
	e->attr_timeout = gw_inode_ttl_left(gw, ino);
	__atomic_add_fetch(offline ? &gw->offline_answers :
			   &gw->md_kept_lookups, 1, __ATOMIC_RELAXED);
	return 0;
}

/* LOOKUP from kept names while the origin is lost: 0 and *e, -ENOENT
 * (dir's kept listing has no such name), -EACCES, or -EHOSTDOWN (not
 * held). */
static int lookup_offline(struct gw *gw, fuse_req_t req,
			  struct gw_inode *dir, const char *name,
			  struct fuse_entry_param *e)
{
	int ret = lookup_kept(gw, req, dir, name, true, e);
	struct nfsc_cred cr;

	if (ret != -ENOENT)
		return ret;
	if (!gw_md_listed_whole(gw, dir))
		return -EHOSTDOWN;
	/* Not there: told only to whom the origin would tell it. */
	gw_req_cred(req, &cr);
	ret = gw_access_check(gw, dir, &cr, X_OK, NULL, NULL);
	if (ret)
		return ret == -EACCES ? ret : -EHOSTDOWN;
	gw_offline_count(gw);
	return -ENOENT;
}

/* LOOKUP name in parent; on success ino holds a new kernel reference. */
static int do_lookup(struct gw *gw, fuse_req_t req, struct gw_inode *parent,
		     const char *name, struct fuse_entry_param *e)
{
	struct nfsc_cred cr;
	struct nfsc_fh fh;
	struct nfsc_attr a;
	struct gw_inode *ino;
	bool has_attr = false;
	int ret;

	ret = lookup_kept(gw, req, parent, name, false, e);
	if (ret != -ENOENT)
		return ret;
	gw_req_cred(req, &cr);
	/* A directory whose every name the gateway knows (dirknown.c: it
	 * made it and every change since came through it): a name not
	 * among them is not there, for what is left of the directory's
	 * attribute lifetime. The kernel's LOOKUP before each create. */
	if (!gw->o->lookupcache && gw_dirknown_absent(gw, parent, name, &cr)) {
		__atomic_add_fetch(&gw->known_absent, 1, __ATOMIC_RELAXED);
		return -ENOENT;
	}
	ret = nfsc_lookup(gw->nfs, &cr, &parent->fh, name, &fh, &a, &has_attr);
	if (ret == -EHOSTDOWN)
		return lookup_offline(gw, req, parent, name, e);
	/* Found or not, the origin let cr search parent. */
	if (!ret || ret == -ENOENT)
		gw_access_note_search(gw, parent, &cr);
	if (ret)
		return ret;
	if (!has_attr) {
		ret = nfsc_getattr(gw->nfs, &cr, &fh, &a);
		if (ret == -EHOSTDOWN)
			return lookup_offline(gw, req, parent, name, e);
		if (ret)
			return ret;
	}
	ino = gw_inode_ref(gw, &fh, &a, parent->nodeid);
	if (!ino)
		return -errno;
	/* The origin's attributes of now, for this thread: an OPEN that
	 * follows takes them for its close-to-open check. */
	gw_inode_note_fresh(ino, fuse_req_ctx(req)->pid);
	gw_inode_note_name(ino, parent->nodeid, name, &a);
	gw_md_note_dent(gw, parent, name, ino->nodeid);
	gw_make_entry(gw, ino, &a, e);
	return 0;
}

/* "." and ".." of any node-id ever handed out: how the kernel turns a
 * re-exporter's file handle back into an inode, even one it forgot and one
 * from an earlier run of the gateway. */
static int lookup_dot(struct gw *gw, fuse_req_t req, fuse_ino_t nodeid,
		      bool dotdot, struct fuse_entry_param *e)
{
	struct gw_inode *ino = gw_inode_resolve(gw, nodeid);
	int err = ino ? 0 : errno;
	struct nfsc_attr a;
	int ret;

	/* Each gw_inode_resolve() holds a reference, so a concurrent FORGET
	 * of the same node-id cannot free the inode under us; the reference
	 * of the inode answered is the one the reply hands to the kernel. */
	if (ino && dotdot) {
		struct gw_inode *child = ino;

		ino = gw_inode_resolve(gw, gw_inode_parent(gw, child));
		err = ino ? 0 : errno;
		gw_inode_forget(gw, child->nodeid, 1);
	}
	/* The store not asked is not a stale handle: knfsd passes ETIMEDOUT
	 * on as "try again" (and makes ESTALE of the others). */
	if (!ino)
		return err == EIO || err == ETIMEDOUT || err == EINTR ?
		       -err : -ESTALE;
	ret = gw_get_attr(gw, req, ino, true, &a);
	if (ret < 0) {
		gw_inode_forget(gw, ino->nodeid, 1);
		return ret;
	}
	gw_make_entry(gw, ino, &a, e);
	if (gw_offline(gw))	/* as last known: no fresher for the kernel */
		e->attr_timeout = gw_inode_ttl_left(gw, ino);
	return 0;
}

void gw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gw *gw = req_gw(req);
	struct fuse_entry_param e;
	struct gw_inode *p;
	int ret;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		ret = lookup_dot(gw, req, parent, name[1] == '.', &e);
		goto reply;
	}
	p = gw_inode_get(gw, parent);
	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	ret = do_lookup(gw, req, p, name, &e);
reply:
	if (ret)
		fuse_reply_err(req, -ret);
	else if (fuse_reply_entry(req, &e) == -ENOENT)
		gw_inode_forget(gw, e.ino, 1);
}
