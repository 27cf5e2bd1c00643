/* listing.c - directories: opendir, readdir(plus), releasedir, fsyncdir.
 *
 * A listing is a snapshot of the whole directory read at open (READDIRPLUS,
 * nfsclient's readdir_all), shared by the opens of the same directory
 * version with the same credentials; readdirplus hands the kernel every
 * entry's attributes and a lookup reference, and notes its name for the
 * next start (kept_md.c). A listing kept from before (a restart, or
 * offline) is shown only to whom the origin lets read the directory
 * (gw_access_kept_listing), with its attributes as old as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cred_i.h"
#include "gw_state.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"

/* ---- directories ----
 *
 * A listing is a snapshot of the whole directory, read at open: offsets are
 * indexes into it, so a reader that seeks back sees the same names in the
 * same order. Concurrent opens of the same directory version by the same
 * credentials share one snapshot (refcounted, gone with its last open):
 * memory is bounded by the distinct listings in use, each by
 * dir_max_entries, not by the number of opens. */

struct gw_dirsnap {
	struct gw_dirsnap *next;	/* snap_lock */
	uint64_t nodeid;
	struct nfsc_cred cr;		/* read with these credentials */
	struct nfsc_attr ver;		/* the directory's, before the read */
	unsigned refs;			/* snap_lock */
	bool loading;			/* snap_lock; waiters on snap_cond */
	int err;			/* of the load */
	struct nfsc_dirlist list;	/* read-only once loaded */
	bool kept;			/* from what a start before kept, not
					 * the origin (snap_kept) */
	struct timespec *kept_at;	/* kept: when each entry's attributes
					 * were fetched (CLOCK_MONOTONIC) */
	bool unnamed;			/* fleet=: the store could not name
					 * the new entries (soft, store away):
					 * they go out as plain entries */
};

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t snap_cond = PTHREAD_COND_INITIALIZER;
static struct gw_dirsnap *snaps;	/* snap_lock */

struct gw_dir {
	struct gw_handle h;		/* first: fi->fh's id names both */
	struct gw_dirsnap *snap;
};

static bool same_cred(const struct nfsc_cred *a, const struct nfsc_cred *b)
{
	return a->uid == b->uid && a->gid == b->gid &&
	       a->ngroups == b->ngroups &&
	       !memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0]));
}

/* Drop a reference, snap_lock held; true when it was the last (sn is off
 * the list then, for the caller to free). */
static bool snap_unref_locked(struct gw_dirsnap *sn)
{
	struct gw_dirsnap **pp;

	if (--sn->refs)
		return false;
	for (pp = &snaps; *pp; pp = &(*pp)->next)
		if (*pp == sn) {
			*pp = sn->next;
			break;
		}
	return true;
}

static void snap_free(struct gw_dirsnap *sn)
{
	nfsc_dirlist_free(&sn->list);
	free(sn->kept_at);
	free(sn);
}

static void snap_put(struct gw_dirsnap *sn)
{
	bool last;

	pthread_mutex_lock(&snap_lock);
	last = snap_unref_locked(sn);
	pthread_mutex_unlock(&snap_lock);
	if (last)
		snap_free(sn);
}

/* Did the origin give a name's handle and attributes (what a LOOKUP gives,
 * only to a caller who may search the directory)? */
bool ops_names_searched(const struct nfsc_dirlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->ents[i].name, ".") &&
		    strcmp(l->ents[i].name, "..") && l->ents[i].has_fh &&
		    l->ents[i].has_attr)
			return true;
	return false;
}

/* A snapshot of ino's directory as of ver, read with cr: a shared one if
 * there is one (or one being read, which is waited for), else a new one. */
static int snap_get(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, const struct nfsc_attr *ver,
		    struct gw_dirsnap **out)
{
	struct gw_dirsnap *sn;
	int ret;

	pthread_mutex_lock(&snap_lock);
again:
	for (sn = snaps; sn; sn = sn->next) {
		bool same;

		if (sn->nodeid != ino->nodeid || sn->err ||
		    !same_cred(&sn->cr, cr))
			continue;
		/* Another version of the directory, still held by the opens
		 * that share it: not ours (taking it and looking again would
		 * find it again, for ever: seen as a hung re-export create). */
		if (!sn->loading && !gw_attr_same_version(&sn->ver, ver))
			continue;
		sn->refs++;
		while (sn->loading)
			pthread_cond_wait(&snap_cond, &snap_lock);
		same = gw_attr_same_version(&sn->ver, ver);
		ret = sn->err;
		if (same && !ret) {
			pthread_mutex_unlock(&snap_lock);
			*out = sn;
			return 0;
		}
		if (snap_unref_locked(sn)) {
			pthread_mutex_unlock(&snap_lock);
			snap_free(sn);
			pthread_mutex_lock(&snap_lock);
		}
		/* The read we waited for failed: so does ours. */
		if (same) {
			pthread_mutex_unlock(&snap_lock);
			return ret;
		}
		goto again;
	}
	sn = calloc(1, sizeof(*sn));
	if (!sn) {
		pthread_mutex_unlock(&snap_lock);
		return -ENOMEM;
	}
	sn->nodeid = ino->nodeid;
	sn->cr = *cr;
	sn->ver = *ver;
	sn->refs = 1;
	sn->loading = true;
	sn->next = snaps;
	snaps = sn;
	pthread_mutex_unlock(&snap_lock);

	ret = nfsc_readdir_all(gw->nfs, cr, &ino->fh, &sn->list,
			       gw->o->dir_max_entries);
	if (ret == -EFBIG)
		gw_log("directory inode %llu has more than dir_max_entries=%u "
		       "entries: not listed (EFBIG)",
		       (unsigned long long)ino->nodeid, gw->o->dir_max_entries);
	if (sn->list.skipped)
		gw_log("directory inode %llu: skipped %zu entries from the "
		       "origin with names that are empty, hold '/', are a "
		       "second '.' or '..' or are longer than %d bytes "
		       "(first: '%s')", (unsigned long long)ino->nodeid,
		       sn->list.skipped, NFSC_NAME_MAX, sn->list.skipped_first);
	/* The origin's answer for cr, as an ACCESS one would be. */
	if (!ret || ret == -EACCES)
		gw_access_note_listed(gw, ino, cr, ver, !ret,
				      !ret && ops_names_searched(&sn->list));
	/* A fleet's node-ids for the whole listing in one round trip, before
	 * anything below names them one by one. A store away only costs the
	 * entries' attributes: readdirplus answers them as plain entries. */
	if (!ret && gw_fleet_name_list(gw, &sn->list, ino->nodeid) < 0)
		sn->unnamed = true;
	if (!ret)
		gw_reclaim_note_add(gw, gw_md_note_listing(gw, ino, ver,
							   &sn->list));
	pthread_mutex_lock(&snap_lock);
	sn->loading = false;
	sn->err = ret;
	pthread_cond_broadcast(&snap_cond);
	pthread_mutex_unlock(&snap_lock);
	if (ret) {
		snap_put(sn);
		return ret;
	}
	*out = sn;
	return 0;
}

/* A snapshot of ino's directory from what a start before kept
 * (kept_md.c), of version ver if given, or (offline: the origin is
 * lost) what is kept at all: a private one (not shared: it is not the
 * origin's answer of now), if cr may read it. 0; -ENOENT (none kept:
 * ask the origin); -EACCES (the origin refuses cr); offline, -EHOSTDOWN
 * (nothing known of cr). */
static int snap_kept(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, const struct nfsc_attr *ver,
		     bool offline, struct gw_dirsnap **out)
{
	struct gw_dirsnap *sn = calloc(1, sizeof(*sn));
	int ret;

	if (!sn)
		return -ENOMEM;
	if (gw_md_listing(gw, ino, ver, offline, &sn->list, &sn->kept_at)) {
		free(sn);
		return -ENOENT;
	}
	if (ver)
		sn->ver = *ver;
	else
		gw_md_listing_version(gw, ino, &sn->ver);
	/* The names are the origin's to show: not to a caller it would
	 * refuse, nor (offline) to one it was never asked about. Online,
	 * anything else but a refusal: ask the origin for the listing. */
	ret = gw_access_kept_listing(gw, ino, cr, &sn->ver);
	if (ret) {
		snap_free(sn);
		return ret == -EACCES || offline ? ret : -ENOENT;
	}
	sn->nodeid = ino->nodeid;
	sn->cr = *cr;
	sn->refs = 1;
	sn->kept = true;
	__atomic_add_fetch(offline ? &gw->offline_answers :
			   &gw->md_kept_listings, 1, __ATOMIC_RELAXED);
	*out = sn;
	return 0;
}
static void dir_free(struct gw *gw, struct gw_handle *h)
{
	struct gw_dir *d = (struct gw_dir *)h;

	(void)gw;
	if (d->snap)	/* NULL: adopted and never read (gw_dir_adopt) */
		snap_put(d->snap);
	free(d);
}

void gw_opendir(fuse_req_t req, fuse_ino_t nodeid,
		       struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	struct nfsc_attr ver;
	struct nfsc_cred cr;
	struct gw_dir *d;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	gw_req_cred(req, &cr);
	/* After a restart, with nocto: the listing kept before it, while
	 * young enough (kept_md.c), without asking the origin for it (an
	 * ACCESS, if no answer for cr is held). */
	if (gw->o->nocto) {
		ret = snap_kept(gw, ino, &cr, NULL, false, &d->snap);
		if (ret != -ENOENT)
			goto opened;
	}
	/* The directory's version now: an open shares a snapshot of this
	 * version only, never an older one; one kept before a restart
	 * serves if it is of this version. */
	ret = gw_get_attr(gw, req, ino, true, &ver);
	if (ret >= 0) {
		ret = snap_kept(gw, ino, &cr, &ver, false, &d->snap);
		if (ret == -ENOENT)
			ret = snap_get(gw, ino, &cr, &ver, &d->snap);
	}
	/* The origin is lost: the listing as last kept (offline.c). */
	if (ret == -EHOSTDOWN) {
		int kept = snap_kept(gw, ino, &cr, NULL, true, &d->snap);

		if (kept != -ENOENT)
			ret = kept;
	}
opened:
	if (ret < 0) {
		free(d);
		fuse_reply_err(req, -ret);
		return;
	}
	if (gw_handle_add(&d->h, dir_free)) {
		snap_put(d->snap);
		free(d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = d->h.id;
	gw_handle_publish(&d->h, GW_HREC_DIR, nodeid, &cr, false);
	fi->cache_readdir = 0;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		gw_handle_del(&d->h);
		dir_free(gw, &d->h);
	}
}

static bool is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

static mode_t dirent_mode(const struct nfsc_dirent *de)
{
	struct stat st;

	if (!de->has_attr)
		return 0;
	gw_attr_to_stat(&de->attr, 0, &st);
	return st.st_mode;
}

static void do_readdir(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	struct gw *gw = req_gw(req);
	struct gw_dir *d = (struct gw_dir *)gw_handle_get(fi->fh);
	uint64_t *refs = NULL;	/* node-ids referenced for this reply */
	size_t left = size, i, nrefs = 0;
	char *buf, *p;

	if (!d) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (!d->snap) {
		/* Adopted from an earlier process (gw_dir_adopt): listed
		 * again, the offsets the kernel has index the new listing,
		 * the same one unless the directory changed meanwhile. */
		struct gw_inode *ino = gw_inode_get(gw, nodeid);
		struct nfsc_attr ver;
		struct nfsc_cred cr;
		int ret = -ESTALE;

		gw_req_cred(req, &cr);
		if (ino)
			ret = gw_get_attr(gw, req, ino, true, &ver);
		if (ret >= 0)
			ret = snap_get(gw, ino, &cr, &ver, &d->snap);
		if (ret < 0) {
			fuse_reply_err(req, -ret);
			return;
		}
	}
	buf = malloc(size);
	/* At most one reference per entry that fits (the shortest entry has
	 * a one-byte name). */
	if (buf && plus)
		refs = malloc(sizeof(*refs) *
			      (size / fuse_add_direntry_plus(req, NULL, 0, "x",
							     NULL, 0) + 1));
	if (!buf || (plus && !refs)) {
		free(buf);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	p = buf;
	for (i = (size_t)off; i < d->snap->list.n; i++) {
		const struct nfsc_dirent *de = &d->snap->list.ents[i];
		struct fuse_entry_param e;
		struct gw_inode *ino;
		size_t need;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = de->fileid;
		e.attr.st_mode = dirent_mode(de);
		if (!plus) {
			need = fuse_add_direntry(req, p, left, de->name,
						 &e.attr, (off_t)(i + 1));
			if (need > left)
				break;
			p += need;
			left -= need;
			continue;
		}
		/* Measure first: an entry that does not fit must not take a
		 * lookup reference the kernel will never forget. */
		need = fuse_add_direntry_plus(req, NULL, 0, de->name, NULL, 0);
		if (need > left)
			break;
		/* Unnamed by the store: naming each would wait for it again,
		 * entry by entry. */
		if (!is_dot(de->name) && de->has_fh && de->has_attr &&
		    (!d->snap->unnamed || gw_fleet_known(gw, &de->fh))) {
			ino = d->snap->kept ?
				gw_inode_ref_kept(gw, &de->fh, &de->attr,
						  nodeid,
						  &d->snap->kept_at[i]) :
				gw_inode_ref(gw, &de->fh, &de->attr, nodeid);
			if (ino && d->snap->kept) {
				/* The kernel gets kept attributes: an open
				 * that finds another version tells it. */
				pthread_mutex_lock(&ino->lock);
				ino->entry_kept = true;
				ino->kept_attr = de->attr;
				pthread_mutex_unlock(&ino->lock);
			}
			if (ino) {
				gw_inode_note_name(ino, nodeid, de->name,
						   &de->attr);

				gw_make_entry(gw, ino, &de->attr, &e);
				/* Kept attributes: trusted for what is left
				 * of their timeout, as old as they are. */
				if (d->snap->kept)
					e.attr_timeout = gw_attr_ttl_left(
						gw, &de->attr,
						&d->snap->kept_at[i]);
				refs[nrefs++] = ino->nodeid;
			}
		}
		/* Entries without handle or attributes get ino 0: the kernel
		 * will LOOKUP them when it needs them. */
		fuse_add_direntry_plus(req, p, left, de->name, &e,
				       (off_t)(i + 1));
		p += need;
		left -= need;
	}
	/* A reply the kernel did not take (the connection is gone, or the
	 * request was aborted) hands it none of the lookup references taken
	 * for its entries: drop them, as a failed LOOKUP reply does. */
	if (fuse_reply_buf(req, buf, size - left) != 0)
		for (i = 0; i < nrefs; i++)
			gw_inode_forget(gw, refs[i], 1);
	free(refs);
	free(buf);
}

void gw_readdir(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, nodeid, size, off, fi, false);
}

void gw_readdirplus(fuse_req_t req, fuse_ino_t nodeid, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, nodeid, size, off, fi, true);
}

void gw_releasedir(fuse_req_t req, fuse_ino_t nodeid,
			  struct fuse_file_info *fi)
{
	struct gw_dir *d = (struct gw_dir *)gw_handle_get(fi->fh);

	(void)nodeid;
	gw_handle_del(&d->h);
	dir_free(req_gw(req), &d->h);
	fuse_reply_err(req, 0);
}

/* Directory operations are synchronous at an NFSv3 origin. */
void gw_fsyncdir(fuse_req_t req, fuse_ino_t nodeid, int datasync,
			struct fuse_file_info *fi)
{
	(void)nodeid;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

int gw_dir_adopt(struct gw *gw, const struct gw_hrec *r)
{
	struct gw_dir *d = calloc(1, sizeof(*d));
	int ret;

	(void)gw;
	if (!d)
		return -ENOMEM;
	ret = gw_handle_adopt(&d->h, dir_free, r->id);
	if (ret)
		free(d);
	return ret;
}
