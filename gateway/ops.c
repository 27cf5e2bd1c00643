/* ops.c - FUSE low-level operations.
 *
 * Every operation turns the origin's -errno into fuse_reply_err() here and
 * nowhere else. Calls carry the FUSE caller's credentials.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cache.h"
#include "groups.h"
#include "gw_i.h"

static struct gw *req_gw(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

void gw_req_cred(fuse_req_t req, struct nfsc_cred *cr)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	static bool told;
	enum gw_groups_src src;
	int n;

	memset(cr, 0, sizeof(*cr));
	cr->uid = ctx->uid;
	cr->gid = ctx->gid;
	/* The caller's own groups from /proc/PID/status (not
	 * fuse_req_getgroups(): libfuse 3.14's strstr()s a buffer it never
	 * NUL-terminates); for a caller whose groups the kernel does not
	 * show (an nfsd thread serving a re-export, pid 0) the user
	 * database's for the uid (groups.c). AUTH_SYS carries 16; the rest
	 * are dropped, as by the Linux NFS client. */
	n = gw_groups_get(ctx->pid, ctx->uid, ctx->gid, cr->groups,
			  NFSC_NGROUPS_MAX, &src);
	cr->ngroups = (uint32_t)n;
	if (src != GW_GROUPS_PROC &&
	    !__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
		gw_log("credentials: a caller whose groups the kernel does not "
		       "show (pid %d, uid %u: a kernel thread such as nfsd, or "
		       "outside the gateway's pid namespace): its groups are the "
		       "user database's for its uid, kept %d s (said once)",
		       (int)ctx->pid, (unsigned)ctx->uid, GW_GROUPS_TTL);
}

/* Not under ThreadSanitizer: it sees the order the kernel gives one
 * request's reply and the next request (a file handle made by OPEN, used
 * by WRITE on another thread) through read() and write() of /dev/fuse, not
 * through splice(), and reports every such handle as a race. */
#if defined(__SANITIZE_THREAD__)
#define GW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GW_TSAN 1
#endif
#endif
#ifndef GW_TSAN
#define GW_TSAN 0
#endif

/* libfuse splices a request only into a pipe that holds a whole one
 * (max_write and a header page), and quietly copies when it cannot make
 * one: past fs.pipe-max-size (1 MiB by default) that takes
 * CAP_SYS_RESOURCE, which a root daemon has (not a user mount, not every
 * container). Say so once, with the fix. */
static void splice_probe(unsigned max_write)
{
	size_t need = (size_t)max_write + 4096, max = 0;
	int p[2];
	FILE *f;

	if (pipe(p))
		return;
	if (fcntl(p[0], F_SETPIPE_SZ, (int)need) < 0) {
		f = fopen("/proc/sys/fs/pipe-max-size", "r");
		if (f) {
			if (fscanf(f, "%zu", &max) != 1)
				max = 0;
			fclose(f);
		}
		gw_log("writes: each is copied twice, not once: a pipe of "
		       "%zu bytes for splice needs CAP_SYS_RESOURCE or "
		       "fs.pipe-max-size >= %zu (it is %zu); e.g. sysctl "
		       "fs.pipe-max-size=%zu", need, need, max,
		       (size_t)2 << 20 > need ? (size_t)2 << 20 : need);
	}
	close(p[0]);
	close(p[1]);
}

static void gw_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gw *gw = userdata;

	/* 1 MiB requests: fewer round trips through the kernel. */
	conn->max_readahead = 1u << 20;
	conn->max_write = 1u << 20;
	conn->max_read = 1u << 20;
	/* More requests in flight: readahead of 1 MiB requests is served by
	 * several threads at once (the default of 12 throttles it). */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* WRITE data through a pipe: the kernel hands its pages over by
	 * reference and gw_write_buf_op copies them once, into the buffer
	 * kept until COMMIT (without: the kernel copies them into libfuse's
	 * buffer and we copy again). */
	if ((conn->capable & FUSE_CAP_SPLICE_READ) && !GW_TSAN) {
		conn->want |= FUSE_CAP_SPLICE_READ;
		splice_probe(conn->max_write);
	} else	/* libfuse wants it by default once write_buf is there */
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* libfuse turns atomic O_TRUNC on by default: the kernel then
	 * passes O_TRUNC to open() and does not truncate itself. gw_open
	 * does not truncate, so let the kernel send SETATTR(size=0), which
	 * gw_setattr handles (flushing pending writes first). */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* Readdir does not pre-populate only the names we return. */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* writeback: the kernel keeps written pages dirty in its page cache
	 * and sends them as large WRITEs from its flusher (write.c). */
	if (gw->o->writeback) {
		if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
			conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		else {
			/* Before any request: the option is read only by
			 * them. */
			gw->o->writeback = false;
			gw_log("writeback: the kernel offers no write-back "
			       "cache; writing through");
		}
	}
}

/* Fill a fuse_entry_param for ino with attributes a. */
void gw_make_entry(struct gw *gw, struct gw_inode *ino,
		       const struct nfsc_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino->nodeid;
	e->generation = gw_node_generation(gw, ino->nodeid);
	gw_attr_to_stat(a, ino->nodeid, &e->attr);
	e->attr_timeout = gw_attr_ttl(gw, a);
	e->entry_timeout = gw->o->acdirmin;
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

	ret = gw_md_lookup(gw, req, parent, name, e);
	if (ret != -ENOENT)
		return ret;
	gw_req_cred(req, &cr);
	ret = nfsc_lookup(gw->nfs, &cr, &parent->fh, name, &fh, &a, &has_attr);
	if (ret)
		return ret;
	if (!has_attr) {
		ret = nfsc_getattr(gw->nfs, &cr, &fh, &a);
		if (ret)
			return ret;
	}
	ino = gw_inode_ref(gw, &fh, &a, parent->nodeid);
	if (!ino)
		return -errno;
	gw_inode_note_name(ino, parent->nodeid, name, &a);
	gw_md_note_dent(gw, parent, name, ino->nodeid);
	gw_make_entry(gw, ino, &a, e);
	return 0;
}

/* Fresh attributes: from the attribute cache unless force, else GETATTR.
 * Returns 1 if the origin's answer shows the file's data changed (its
 * cache object was emptied), 0 if not, -errno on failure. */
static int get_attr(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		    bool force, struct nfsc_attr *a)
{
	struct nfsc_cred cr;
	uint64_t gen;
	int ret;

	if (!force && gw_inode_cached_attr(gw, ino, a) == 0)
		return 0;
	gw_req_cred(req, &cr);
	gen = gw_inode_attr_gen(ino);
	ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, a);
	if (ret == -ESTALE)
		gw_inode_gone(gw, ino);	/* deleted at the origin */
	if (ret)
		return ret;
	/* A WRITE answered while the GETATTR was out is newer than it. */
	if (!gw_inode_set_attr_since(ino, a, gen)) {
		pthread_mutex_lock(&ino->lock);
		*a = ino->attr;
		pthread_mutex_unlock(&ino->lock);
	}
	return gw_cache_check(gw, ino, a) > 0;
}

/* "." and ".." of any node-id ever handed out: how the kernel turns a
 * re-exporter's file handle back into an inode, even one it forgot and one
 * from an earlier run of the gateway. */
static int lookup_dot(struct gw *gw, fuse_req_t req, fuse_ino_t nodeid,
		      bool dotdot, struct fuse_entry_param *e)
{
	struct gw_inode *ino = gw_inode_resolve(gw, nodeid);
	struct nfsc_attr a;
	int ret;

	/* Each gw_inode_resolve() holds a reference, so a concurrent FORGET
	 * of the same node-id cannot free the inode under us; the reference
	 * of the inode answered is the one the reply hands to the kernel. */
	if (ino && dotdot) {
		struct gw_inode *child = ino;

		ino = gw_inode_resolve(gw, gw_inode_parent(gw, child));
		gw_inode_forget(gw, child->nodeid, 1);
	}
	if (!ino)
		return -ESTALE;
	ret = get_attr(gw, req, ino, true, &a);
	if (ret < 0) {
		gw_inode_forget(gw, ino->nodeid, 1);
		return ret;
	}
	gw_make_entry(gw, ino, &a, e);
	return 0;
}

static void gw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gw *gw = req_gw(req);
	struct fuse_entry_param e;
	struct gw_inode *p;
	int ret;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		ret = lookup_dot(gw, req, parent, name[1] == '.', &e);
		goto reply;
	}
	p = gw_inode_find(gw, parent);
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

static void gw_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	gw_inode_forget(req_gw(req), ino, nlookup);
	fuse_reply_none(req);
}

static void gw_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct gw *gw = req_gw(req);
	size_t i;

	for (i = 0; i < count; i++)
		gw_inode_forget(gw, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void gw_getattr(fuse_req_t req, fuse_ino_t nodeid,
		       struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_find(gw, nodeid);
	struct nfsc_attr a;
	struct stat st;
	int ret;

	(void)fi;
	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	ret = get_attr(gw, req, ino, false, &a);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	gw_attr_to_stat(&a, nodeid, &st);
	if (gw_silly_has(ino) && st.st_nlink > 0)
		st.st_nlink--;	/* its hidden name is not one of its names */
	fuse_reply_attr(req, &st, gw_attr_ttl(gw, &a));
	/* Changed at the origin: the kernel's pages are stale too. After the
	 * reply, so the kernel is not waiting on us for this inode. */
	if (ret > 0) {
		__atomic_fetch_add(&gw->kernel_cache_drops, 1,
				   __ATOMIC_RELAXED);
		fuse_lowlevel_notify_inval_inode(gw->se, nodeid, 0, 0);
	}
}

static void gw_readlink(fuse_req_t req, fuse_ino_t nodeid)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_find(gw, nodeid);
	char target[4096];	/* PATH_MAX: a longer target is ENAMETOOLONG */
	struct nfsc_cred cr;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	gw_req_cred(req, &cr);
	ret = nfsc_readlink(gw->nfs, &cr, &ino->fh, target, sizeof(target));
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, target);
}

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
};

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t snap_cond = PTHREAD_COND_INITIALIZER;
static struct gw_dirsnap *snaps;	/* snap_lock */

struct gw_dir {
	struct gw_handle h;		/* first: fi->fh points at both */
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
/* A file the kernel never released (handles.c): as gw_release. */
static void file_release(struct gw *gw, struct gw_handle *h)
{
	struct gw_file *f = (struct gw_file *)h;
	struct fuse_file_info fi = { .fh = (uintptr_t)f };
	struct gw_inode *ino = gw_inode_find(gw, f->nodeid);

	if (!ino) {
		free(f);
		return;
	}
	if (gw_write_flush(gw, ino, f, true)) {
		gw_log("commit at exit of inode %llu failed",
		       (unsigned long long)f->nodeid);
		__atomic_add_fetch(&gw->exit_commit_errors, 1,
				   __ATOMIC_RELAXED);
	}
	gw_file_release(gw, ino, &fi);
}

static void dir_free(struct gw *gw, struct gw_handle *h)
{
	struct gw_dir *d = (struct gw_dir *)h;

	(void)gw;
	snap_put(d->snap);
	free(d);
}

static void gw_opendir(fuse_req_t req, fuse_ino_t nodeid,
		       struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_find(gw, nodeid);
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
	/* The directory's version now: an open shares a snapshot of this
	 * version only, never an older one. */
	ret = get_attr(gw, req, ino, true, &ver);
	if (ret >= 0) {
		gw_req_cred(req, &cr);
		ret = snap_get(gw, ino, &cr, &ver, &d->snap);
	}
	if (ret < 0) {
		free(d);
		fuse_reply_err(req, -ret);
		return;
	}
	gw_handle_add(&d->h, dir_free);
	fi->fh = (uintptr_t)d;
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
	struct gw_dir *d = (struct gw_dir *)(uintptr_t)fi->fh;
	struct gw_inode *dir = plus ? gw_inode_find(gw, nodeid) : NULL;
	uint64_t *refs = NULL;	/* node-ids referenced for this reply */
	size_t left = size, i, nrefs = 0;
	char *buf, *p;

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
		if (!is_dot(de->name) && de->has_fh && de->has_attr) {
			ino = gw_inode_ref(gw, &de->fh, &de->attr, nodeid);
			if (ino) {
				gw_inode_note_name(ino, nodeid, de->name,
						   &de->attr);
				if (dir)
					gw_md_note_dent(gw, dir, de->name,
							ino->nodeid);
				gw_make_entry(gw, ino, &de->attr, &e);
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

static void gw_readdir(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, nodeid, size, off, fi, false);
}

static void gw_readdirplus(fuse_req_t req, fuse_ino_t nodeid, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, nodeid, size, off, fi, true);
}

static void gw_releasedir(fuse_req_t req, fuse_ino_t nodeid,
			  struct fuse_file_info *fi)
{
	struct gw_dir *d = (struct gw_dir *)(uintptr_t)fi->fh;

	(void)nodeid;
	gw_handle_del(&d->h);
	dir_free(req_gw(req), &d->h);
	fuse_reply_err(req, 0);
}

/* ---- files ---- */

int gw_file_open(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
		 const struct nfsc_attr *created, struct fuse_file_info *fi)
{
	struct nfsc_attr a;
	struct gw_file *f;
	int ret, mask;

	if (!__atomic_exchange_n(&gw->readahead_set, 1, __ATOMIC_RELAXED))
		gw_set_kernel_readahead(gw->o);
	if (gw->o->writeback &&
	    !__atomic_exchange_n(&gw->dirty_limits_set, 1, __ATOMIC_RELAXED))
		gw_set_kernel_dirty_limits(gw->o);
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	gw_req_cred(req, &f->cred);
	if (created) {
		a = *created;
	} else {
		uint64_t gen;
		bool fresh;

		/* 0. Open from here on for an unlink of the file: one that
		 *    came while the origin is asked below would remove it, and
		 *    this open would fail (ENOENT or ESTALE from the origin,
		 *    where a local file system opens the file); hidden, its
		 *    name goes at the last close, or below if this open fails. */
		pthread_mutex_lock(&ino->lock);
		ino->opening++;
		pthread_mutex_unlock(&ino->lock);
		/* 1. Never serve a byte the origin would refuse this user,
		 *    cached or not. */
		mask = (fi->flags & O_ACCMODE) == O_RDONLY ? R_OK :
		       (fi->flags & O_ACCMODE) == O_WRONLY ? W_OK :
							     R_OK | W_OK;
		gen = gw_inode_attr_gen(ino);
		ret = gw_access_check(gw, ino, &f->cred, mask, &a, &fresh);
		if (ret && (fresh || ret != -EACCES))
			goto out_free;
		/* 2. Close-to-open: the origin's attributes now (those that
		 *    came with ACCESS are as fresh), unless nocto. A write
		 *    answered meanwhile is newer than them: keep its. */
		if (fresh && !gw_inode_set_attr_since(ino, &a, gen)) {
			pthread_mutex_lock(&ino->lock);
			a = ino->attr;
			pthread_mutex_unlock(&ino->lock);
		} else if (!fresh) {
			/* The answer, yes or no, came from the access cache:
			 * attributes that show a change since void it
			 * (access.c), and the origin is asked again. */
			ret = get_attr(gw, req, ino, !gw->o->nocto, &a);
			if (ret >= 0) {
				int acc = gw_access_check(gw, ino, &f->cred,
							  mask, NULL, NULL);

				if (acc)
					ret = acc;
			}
		}
		if (ret < 0)
			goto out_free;
	}
	f->writer = created || (fi->flags & O_ACCMODE) != O_RDONLY;
	pthread_mutex_lock(&ino->lock);
	ino->opens++;
	if (!created)
		ino->opening--;
	if (f->writer) {
		struct gw_file **pp = &ino->wfiles;

		ino->writers++;
		/* Write errors from here on are this file's to report. */
		f->werr_seen = ino->werr_seq;
		while (*pp)
			pp = &(*pp)->wnext;
		*pp = f;
	}
	/* 4. A reader of a file that is open for writing through this mount
	 *    reads around the kernel's page cache (direct_io). The kernel
	 *    copies a write into its page before the gateway has it; a read
	 *    of that page answered meanwhile ends at the old end of file, and
	 *    the kernel zero-fills the rest of the page and keeps it, under
	 *    the size the write then gives it: zeros where the appended bytes
	 *    are. Read directly, such a read just returns fewer bytes. With
	 *    writeback the page cache is the newest copy (the kernel owns the
	 *    size; its dirty pages may not have reached the origin yet): a
	 *    read around it would miss them. */
	if (!f->writer && ino->writers > 0 && !gw->o->writeback)
		fi->direct_io = 1;
	/* 5. Unchanged since the last open (or changed only by writes through
	 *    this mount, which the kernel made in its page cache too): the
	 *    kernel's pages are good. With a write through the gateway still
	 *    unanswered the origin may already show it: a difference is then
	 *    taken for that write, never for someone else's. Dropping the
	 *    pages would be wrong, not just slow: the kernel copies a write
	 *    into a page before sending it, so a reader could read that page
	 *    back from the origin without the write, zero-filled past the
	 *    old end, under the new size (zeros in the middle of the file). */
	fi->keep_cache = ino->opened_before &&
			 (gw_inode_writing(ino) ||
			  (!ino->pages_stale &&
			   gw_attr_same_version(&ino->open_attr, &a)));
	if (!fi->keep_cache)
		ino->pages_stale = false;
	if (ino->opened_before && !fi->keep_cache) {
		__atomic_fetch_add(&gw->kernel_cache_drops, 1,
				   __ATOMIC_RELAXED);
		f->inval_attr = true;
	}
	ino->open_attr = a;
	ino->opened_before = true;
	pthread_mutex_unlock(&ino->lock);
	/* 6. The cache object, checked against this version of the file.
	 *    Only now that the open is counted: the last release of another
	 *    descriptor drops the object only when no open is left, so it
	 *    can neither take this open's object away nor leave one behind
	 *    on a closed file. */
	if (gw->cache && gw_cache_attach(gw, ino, &a) < 0)
		gw_log("cache: cannot hold file %llu, reading from the origin",
		       (unsigned long long)a.fileid);
	f->nodeid = ino->nodeid;
	gw_handle_add(&f->h, file_release);
	fi->fh = (uintptr_t)f;
	return 0;

out_free:
	free(f);
	pthread_mutex_lock(&ino->lock);
	ino->opening--;
	pthread_mutex_unlock(&ino->lock);
	gw_silly_release(gw, ino);	/* hidden for this open only */
	return ret;
}

void gw_file_release(struct gw *gw, struct gw_inode *ino,
		     struct fuse_file_info *fi)
{
	struct gw_file *f = (struct gw_file *)(uintptr_t)fi->fh;
	struct cache_obj *obj = NULL;
	bool last;

	(void)gw;
	pthread_mutex_lock(&ino->lock);
	last = ino->opens > 0 && --ino->opens == 0;
	if (f && f->writer) {
		struct gw_file **pp = &ino->wfiles;

		if (ino->writers > 0)
			ino->writers--;
		while (*pp && *pp != f)
			pp = &(*pp)->wnext;
		if (*pp)
			*pp = f->wnext;
	}
	pthread_mutex_unlock(&ino->lock);
	if (last) {
		gw_inode_drop_fetch(ino);
		/* The object holds two fds: a closed file gives them back
		 * (the kernel may keep thousands of inodes), unless an open
		 * came in meanwhile. */
		pthread_mutex_lock(&ino->lock);
		if (ino->opens == 0) {
			obj = ino->obj;
			ino->obj = NULL;
		}
		pthread_mutex_unlock(&ino->lock);
		if (obj)
			cache_obj_put(obj);
	}
	gw_handle_del((struct gw_handle *)(uintptr_t)fi->fh);
	free((void *)(uintptr_t)fi->fh);
	fi->fh = 0;
	/* The last close of a file unlinked while open removes its hidden
	 * name at the origin. */
	gw_silly_release(gw, ino);
}

static void gw_open(fuse_req_t req, fuse_ino_t nodeid,
		    struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_find(gw, nodeid);
	bool inval;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	ret = gw_file_open(gw, req, ino, NULL, fi);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	/* 7. Close-to-open: the open found another version than the one the
	 *    kernel's pages hold; its size may be as old (the OPEN reply
	 *    carries no attributes, and the kernel trusts its own for
	 *    acregmin). Make it ask again, so that a read past its old end
	 *    of file sees the new one. Before the reply: after it, the
	 *    opener's first read can come before the notification (seen in
	 *    test 50, 1 run in 5). Attributes only (offset -1): no page and
	 *    no inode lock is touched, so it cannot wait for this open. */
	inval = ((struct gw_file *)(uintptr_t)fi->fh)->inval_attr;
	if (inval)
		fuse_lowlevel_notify_inval_inode(gw->se, nodeid, -1, 0);
	if (fuse_reply_open(req, fi) == -ENOENT)
		gw_file_release(gw, ino, fi);	/* interrupted */
}

#define INODE_OR_ESTALE(gw, req, nodeid, ino)				\
	struct gw_inode *ino = gw_inode_find(gw, nodeid);		\
	if (!ino) {							\
		fuse_reply_err(req, ESTALE);				\
		return;							\
	}

static void gw_read_op(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	INODE_OR_ESTALE(gw, req, nodeid, ino);

	gw_read(gw, req, ino, (struct gw_file *)(uintptr_t)fi->fh, size, off);
}

/* The bytes go straight into the gw_buf that write.c keeps: with splice
 * (FUSE_CAP_SPLICE_READ, gw_init) they come from a pipe holding the
 * kernel's own pages, one copy in all; else from libfuse's buffer. */
static void gw_write_buf_op(fuse_req_t req, fuse_ino_t nodeid,
			    struct fuse_bufvec *in, off_t off,
			    struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	size_t size = fuse_buf_size(in);
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	ssize_t got;
	char *buf;
	INODE_OR_ESTALE(gw, req, nodeid, ino);

	buf = gw_buf_get(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	dst.buf[0].mem = buf;
	if (in->count && (in->buf[0].flags & FUSE_BUF_IS_FD))
		__atomic_fetch_add(&gw->write_spliced, 1, __ATOMIC_RELAXED);
	got = size ? fuse_buf_copy(&dst, in, 0) : 0;
	if (got != (ssize_t)size) {
		gw_log("write: %zd of %zu bytes from the kernel: %s", got,
		       size, got < 0 ? strerror((int)-got) : "short");
		gw_buf_put(buf);
		fuse_reply_err(req, EIO);
		return;
	}
	gw_write(gw, req, ino, (struct gw_file *)(uintptr_t)fi->fh, buf, size,
		 off, fi->writepage);
}

/* close(2) and fsync(2): COMMIT, and report what an earlier WRITE hit. */
static void gw_flush(fuse_req_t req, fuse_ino_t nodeid,
		     struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	INODE_OR_ESTALE(gw, req, nodeid, ino);

	fuse_reply_err(req, -gw_write_flush(gw, ino,
				(struct gw_file *)(uintptr_t)fi->fh, true));
}

static void gw_fsync(fuse_req_t req, fuse_ino_t nodeid, int datasync,
		     struct fuse_file_info *fi)
{
	(void)datasync;
	gw_flush(req, nodeid, fi);
}

/* NFSv3 has no ALLOCATE: say so, rather than pretend with zeros. */
static void gw_fallocate(fuse_req_t req, fuse_ino_t nodeid, int mode,
			 off_t off, off_t len, struct fuse_file_info *fi)
{
	(void)nodeid;
	(void)mode;
	(void)off;
	(void)len;
	(void)fi;
	fuse_reply_err(req, EOPNOTSUPP);
}

/* Directory operations are synchronous at an NFSv3 origin. */
static void gw_fsyncdir(fuse_req_t req, fuse_ino_t nodeid, int datasync,
			struct fuse_file_info *fi)
{
	(void)nodeid;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void gw_release(fuse_req_t req, fuse_ino_t nodeid,
		       struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_find(gw, nodeid);
	char *drop = NULL;
	uint64_t dir = 0;
	int ret;

	if (ino) {
		/* Data written without a flush (e.g. by a re-exporter) is
		 * committed before the file is let go. */
		if (gw_write_flush(gw, ino, NULL, true))
			gw_log("commit on release of inode %llu failed",
			       (unsigned long long)nodeid);
		gw_file_release(gw, ino, fi);
		drop = gw_inode_refused_name(ino, &dir);
	} else {
		gw_handle_del((struct gw_handle *)(uintptr_t)fi->fh);
		free((void *)(uintptr_t)fi->fh);
	}
	fuse_reply_err(req, 0);
	/* After the reply (the kernel waits for no RELEASE, and takes the
	 * directory's lock for this), and with copies only: the eviction
	 * this brings FORGETs ino. A name renamed or removed meanwhile gives
	 * ENOENT, and the kernel keeps its size until it drops the inode. */
	if (drop) {
		ret = fuse_lowlevel_notify_inval_entry(gw->se, dir, drop,
						       strlen(drop));
		gw_log("file %llu: the origin refused write-back WRITEs; the "
		       "kernel's inode %s", (unsigned long long)nodeid,
		       ret ? "stays (its entry is gone)" :
			     "is dropped for the origin's size");
		free(drop);
	}
}

static void gw_statfs(fuse_req_t req, fuse_ino_t nodeid)
{
	struct gw *gw = req_gw(req);
	struct nfsc_fsstat fs;
	struct nfsc_cred cr;
	struct statvfs sv;
	const unsigned long bs = 4096;
	int ret;

	(void)nodeid;
	gw_req_cred(req, &cr);
	ret = nfsc_fsstat(gw->nfs, &cr, nfsc_root(gw->nfs), &fs);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = bs;
	sv.f_frsize = bs;
	sv.f_blocks = fs.tbytes / bs;
	sv.f_bfree = fs.fbytes / bs;
	sv.f_bavail = fs.abytes / bs;
	sv.f_files = fs.tfiles;
	sv.f_ffree = fs.ffiles;
	sv.f_favail = fs.afiles;
	sv.f_namemax = NFSC_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---- interrupts ----
 * A caller waiting on an origin that does not answer stays killable: a
 * request the gateway has read is no longer the kernel's to cancel (the
 * caller sleeps uninterruptibly until the answer), so these operations,
 * which wait only on idempotent origin calls (GETATTR, LOOKUP, ACCESS,
 * READLINK, FSSTAT), arm their request as the thread's interrupt token
 * (nfsclient's nfsc_intr_*): FUSE_INTERRUPT then ends the wait with EINTR
 * and the operation answers that, through its own error path; the origin
 * call is left to finish, its answer dropped. Writes and namespace
 * changes are not interruptible: their outcome at the origin would be
 * unknown. */
static void intr_fire(fuse_req_t req, void *data)
{
	nfsc_intr_fire(data, req);
}

static void intr_begin(fuse_req_t req)
{
	struct nfsc_intr *i = nfsc_intr_arm(req);

	/* Called at once if the request was interrupted already. */
	if (i)
		fuse_req_interrupt_func(req, intr_fire, i);
}

#define INTERRUPTIBLE(op, params, args)					\
	static void op##_intr params					\
	{								\
		intr_begin(req);					\
		op args;						\
		nfsc_intr_disarm();					\
	}
INTERRUPTIBLE(gw_lookup, (fuse_req_t req, fuse_ino_t parent, const char *name),
	      (req, parent, name))
INTERRUPTIBLE(gw_getattr, (fuse_req_t req, fuse_ino_t nodeid,
			   struct fuse_file_info *fi), (req, nodeid, fi))
INTERRUPTIBLE(gw_readlink, (fuse_req_t req, fuse_ino_t nodeid), (req, nodeid))
INTERRUPTIBLE(gw_opendir, (fuse_req_t req, fuse_ino_t nodeid,
			   struct fuse_file_info *fi), (req, nodeid, fi))
INTERRUPTIBLE(gw_open, (fuse_req_t req, fuse_ino_t nodeid,
			struct fuse_file_info *fi), (req, nodeid, fi))
INTERRUPTIBLE(gw_access, (fuse_req_t req, fuse_ino_t nodeid, int mask),
	      (req, nodeid, mask))
INTERRUPTIBLE(gw_statfs, (fuse_req_t req, fuse_ino_t nodeid), (req, nodeid))

const struct fuse_lowlevel_ops gw_oper = {
	.init = gw_init,
	.mkdir = gw_mkdir,
	.mknod = gw_mknod,
	.symlink = gw_symlink,
	.create = gw_create,
	.link = gw_link,
	.unlink = gw_unlink,
	.rmdir = gw_rmdir,
	.rename = gw_rename,
	.setattr = gw_setattr,
	.access = gw_access_intr,
	.write_buf = gw_write_buf_op,
	.flush = gw_flush,
	.fsync = gw_fsync,
	.fsyncdir = gw_fsyncdir,
	.fallocate = gw_fallocate,
	.lookup = gw_lookup_intr,
	.forget = gw_forget,
	.forget_multi = gw_forget_multi,
	.getattr = gw_getattr_intr,
	.readlink = gw_readlink_intr,
	.opendir = gw_opendir_intr,
	.readdir = gw_readdir,
	.readdirplus = gw_readdirplus,
	.releasedir = gw_releasedir,
	.open = gw_open_intr,
	.read = gw_read_op,
	.release = gw_release,
	.statfs = gw_statfs_intr,
};
