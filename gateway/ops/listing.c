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
#include "config.h"
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
 * credentials share one snapshot (refcounted): memory is bounded by the
 * distinct listings in use, each by dir_max_entries, not by the number of
 * opens.
 *
 * A snapshot outlives its last open for LINGER_S seconds (at most
 * LINGER_MAX of them, LINGER_ENTRIES entries in all; the oldest go
 * first): knfsd opens the directory for each READDIR a client sends and
 * seeks to the client's cookie, so without it every cookie-continued
 * READDIR would read the whole directory from the origin again. An open
 * that finds one of the caller's young snapshots takes it without asking
 * the origin; its first read decides: from offset 0 (a new listing) the
 * directory's version is asked for (the GETATTR an open makes) and a
 * snapshot of another version is replaced; from further on (a client
 * continuing a listing with a cookie) it reads on in the snapshot its
 * listing began with. Entries' attributes from a snapshot keep the time
 * they were read: the kernel trusts them for what is left of their
 * timeout, not a whole one. */
#define LINGER_S 30
#define LINGER_MAX 16
#define LINGER_ENTRIES 262144

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
	struct timespec loaded_at;	/* CLOCK_MONOTONIC; set once loaded */
	uint64_t idle_since;		/* snap_lock; seconds (monotonic)
					 * its last open closed; 0: open */
	bool ahead;			/* snap_lock; read ahead of a walk
					 * (walkahead.c), no open has taken
					 * it yet */
	size_t ahead_n;			/* snap_lock; its entries counted in
					 * ahead_entries */
};

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t snap_cond = PTHREAD_COND_INITIALIZER;
static struct gw_dirsnap *snaps;	/* snap_lock */
static unsigned lingering;		/* snap_lock: snapshots no open */
static size_t lingering_entries;	/* holds, and their entries */
static struct gw_dirsnap *doomed;	/* snap_lock: off the list, to free
					 * once the lock is dropped */
static size_t ahead_entries;		/* snap_lock: entries of snapshots
					 * read ahead that no open took yet */

/* sn is taken by an open, or goes: no more read ahead and not taken. */
static void ahead_drop_locked(struct gw_dirsnap *sn)
{
	GW_ASSERT_HELD(&snap_lock);
	sn->ahead = false;
	ahead_entries -= sn->ahead_n;
	sn->ahead_n = 0;
}

struct gw_dir {
	struct gw_handle h;		/* first: fi->fh's id names both */
	struct gw_dirsnap *snap;
	bool unsure;			/* snap taken without asking the
					 * directory's version (snap_young):
					 * a read from offset 0 asks */
};

static bool ts_later(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec :
					a->tv_nsec > b->tv_nsec;
}

/* LINGER_S; tests shorten it (CACHEGW_INJECT_LINGER_S). */
static uint64_t linger_s = LINGER_S;

static uint64_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec + 1;	/* never 0 */
}

static bool same_cred(const struct nfsc_cred *a, const struct nfsc_cred *b)
{
	return a->uid == b->uid && a->gid == b->gid &&
	       a->ngroups == b->ngroups &&
	       !memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0]));
}

static void unlink_locked(struct gw_dirsnap *sn)
{
	struct gw_dirsnap **pp;

	for (pp = &snaps; *pp; pp = &(*pp)->next)
		if (*pp == sn) {
			*pp = sn->next;
			break;
		}
}

/* A lingering snapshot taken by an open again. */
static void snap_take_locked(struct gw_dirsnap *sn)
{
	GW_ASSERT_HELD(&snap_lock);
	if (!sn->refs++ && sn->idle_since) {
		sn->idle_since = 0;
		lingering--;
		lingering_entries -= sn->list.n;
	}
}

/* Lingering snapshots past LINGER_S, and the oldest while over the
 * bounds, or (dead) every lingering one of that directory and caller
 * (another version of it exists): onto the doomed list. Those read ahead
 * of a walk and not taken yet are bounded apart (walkahead.c: its
 * budget) and go only by age or dead: a walk in a deep tree has several
 * levels read ahead at once, which the walk needs later, and dropping
 * them would make it list them again. */
static void linger_trim_locked(uint64_t now, const struct gw_dirsnap *dead)
{
	for (;;) {
		struct gw_dirsnap *sn, *oldest = NULL;
		size_t entries = 0;
		unsigned n = 0;
		bool over;

		for (sn = snaps; sn; sn = sn->next)
			if (sn->idle_since && !sn->ahead) {
				n++;
				entries += sn->list.n;
			}
		over = n > LINGER_MAX || entries > LINGER_ENTRIES;
		for (sn = snaps; sn; sn = sn->next) {
			if (!sn->idle_since)
				continue;
			if (now - sn->idle_since >= linger_s ||
			    (dead && sn->nodeid == dead->nodeid &&
			     same_cred(&sn->cr, &dead->cr))) {
				oldest = sn;
				break;
			}
			/* Over the bounds: the oldest goes first; of those
			 * of one second, the first made (last on the list). */
			if (over && !sn->ahead &&
			    (!oldest || sn->idle_since <= oldest->idle_since))
				oldest = sn;
		}
		if (!oldest)
			return;
		unlink_locked(oldest);
		lingering--;
		lingering_entries -= oldest->list.n;
		ahead_drop_locked(oldest);
		oldest->next = doomed;
		doomed = oldest;
	}
}

/* Drop a reference, snap_lock held; true when it was the last and sn is
 * off the list, for the caller to free. A loaded snapshot of the origin's
 * stays (lingers) instead, if it is within the bounds. */
static bool snap_unref_locked(struct gw_dirsnap *sn)
{
	GW_ASSERT_HELD(&snap_lock);
	if (--sn->refs)
		return false;
	if (!sn->loading && !sn->err && !sn->kept && !sn->unnamed &&
	    sn->list.n <= LINGER_ENTRIES) {
		sn->idle_since = mono_s();
		lingering++;
		lingering_entries += sn->list.n;
		linger_trim_locked(sn->idle_since, NULL);
		return false;
	}
	unlink_locked(sn);
	ahead_drop_locked(sn);
	return true;
}

static void snap_free(struct gw_dirsnap *sn)
{
	nfsc_dirlist_free(&sn->list);
	free(sn->kept_at);
	free(sn);
}

/* Free what linger_trim_locked doomed (snap_lock not held). */
static void free_doomed(void)
{
	struct gw_dirsnap *sn;

	pthread_mutex_lock(&snap_lock);
	sn = doomed;
	doomed = NULL;
	pthread_mutex_unlock(&snap_lock);
	while (sn) {
		struct gw_dirsnap *next = sn->next;

		snap_free(sn);
		sn = next;
	}
}

static void snap_put(struct gw_dirsnap *sn)
{
	bool last;

	pthread_mutex_lock(&snap_lock);
	last = snap_unref_locked(sn);
	pthread_mutex_unlock(&snap_lock);
	if (last)
		snap_free(sn);
	free_doomed();
}

void gw_listings_init(void)
{
#if CACHEGW_FAULT_INJECTION
	const char *env = getenv("CACHEGW_INJECT_LINGER_S");
	unsigned long v;

	if (env && *env && (v = strtoul(env, NULL, 10)) > 0 && v <= 3600)
		linger_s = v;
#endif
}

void gw_listings_kept(uint64_t *listings, uint64_t *entries)
{
	pthread_mutex_lock(&snap_lock);
	linger_trim_locked(mono_s(), NULL);
	*listings = lingering;
	*entries = lingering_entries;
	pthread_mutex_unlock(&snap_lock);
	free_doomed();
}

void gw_listings_free(void)
{
	struct gw_dirsnap **pp, *sn;

	pthread_mutex_lock(&snap_lock);
	for (pp = &snaps; (sn = *pp);) {
		if (sn->idle_since) {
			*pp = sn->next;
			lingering--;
			lingering_entries -= sn->list.n;
			ahead_drop_locked(sn);
			sn->next = doomed;
			doomed = sn;
		} else {
			pp = &sn->next;
		}
	}
	pthread_mutex_unlock(&snap_lock);
	free_doomed();
}

/* The caller's youngest loaded snapshot of ino's directory, open or
 * lingering, taken without asking the origin anything; NULL if none. */
static struct gw_dirsnap *snap_young(struct gw_inode *ino,
				     const struct nfsc_cred *cr)
{
	struct gw_dirsnap *sn, *best = NULL;

	pthread_mutex_lock(&snap_lock);
	linger_trim_locked(mono_s(), NULL);
	for (sn = snaps; sn; sn = sn->next)
		if (sn->nodeid == ino->nodeid && !sn->loading && !sn->err &&
		    !sn->kept && same_cred(&sn->cr, cr) &&
		    (!best || ts_later(&sn->loaded_at, &best->loaded_at)))
			best = sn;
	if (best)
		snap_take_locked(best);
	pthread_mutex_unlock(&snap_lock);
	free_doomed();
	return best;
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
/* An open takes sn: if it was read ahead of a walk, count it, used
 * (same: of the version the open found) or not. */
static void ahead_taken_locked(struct gw *gw, struct gw_dirsnap *sn,
			       bool same)
{
	GW_ASSERT_HELD(&snap_lock);
	if (!sn->ahead)
		return;
	ahead_drop_locked(sn);
	__atomic_add_fetch(same ? &gw->walk_ahead_used :
			   &gw->walk_ahead_stale, 1, __ATOMIC_RELAXED);
}

static void ahead_taken(struct gw *gw, struct gw_dirsnap *sn, bool same)
{
	pthread_mutex_lock(&snap_lock);
	ahead_taken_locked(gw, sn, same);
	pthread_mutex_unlock(&snap_lock);
}

/* ahead: a walk thread's read (walkahead.c), not an open's. */
static int snap_get(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr, const struct nfsc_attr *ver,
		    bool ahead, struct gw_dirsnap **out)
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
		snap_take_locked(sn);
		while (sn->loading)
			pthread_cond_wait(&snap_cond, &snap_lock);
		same = gw_attr_same_version(&sn->ver, ver);
		ret = sn->err;
		if (!ahead && !ret)
			ahead_taken_locked(gw, sn, same);
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
	sn->ahead = ahead;
	/* What lingers of this directory for cr is of another version. */
	linger_trim_locked(mono_s(), sn);
	sn->next = snaps;
	snaps = sn;
	pthread_mutex_unlock(&snap_lock);
	free_doomed();

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
	clock_gettime(CLOCK_MONOTONIC, &sn->loaded_at);
	pthread_mutex_lock(&snap_lock);
	sn->loading = false;
	sn->err = ret;
	if (sn->ahead && !ret) {
		sn->ahead_n = sn->list.n;
		ahead_entries += sn->ahead_n;
	}
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
int gw_listing_ahead(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr, const struct nfsc_attr *ver,
		     size_t budget)
{
	struct gw_dirsnap *sn;
	bool have = false;
	int ret;

	/* Any listing of it for cr (being read, or lingering of whatever
	 * version): the walk's open will take it or read its own. */
	pthread_mutex_lock(&snap_lock);
	for (sn = snaps; sn && !have; sn = sn->next)
		have = sn->nodeid == ino->nodeid && !sn->err &&
		       same_cred(&sn->cr, cr);
	if (ahead_entries >= budget) {
		pthread_mutex_unlock(&snap_lock);
		return -ENOSPC;
	}
	pthread_mutex_unlock(&snap_lock);
	if (have)
		return 0;
	ret = snap_get(gw, ino, cr, ver, true, &sn);
	if (ret)
		return ret;
	snap_put(sn);	/* lingers for the walk's open */
	return 1;
}

int gw_listing_with(uint64_t dir, const struct nfsc_cred *cr,
		    void (*fn)(const struct nfsc_dirlist *l, void *arg),
		    void *arg)
{
	struct gw_dirsnap *sn, *best = NULL;

	pthread_mutex_lock(&snap_lock);
	for (sn = snaps; sn; sn = sn->next)
		if (sn->nodeid == dir && !sn->loading && !sn->err &&
		    same_cred(&sn->cr, cr) &&
		    (!best || ts_later(&sn->loaded_at, &best->loaded_at)))
			best = sn;
	if (best)
		fn(&best->list, arg);
	pthread_mutex_unlock(&snap_lock);
	return best ? 0 : -ENOENT;
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
	/* A walk's next subdirectories, listed while this one is. */
	gw_walk_opened(gw, ino, &cr);
	/* After a restart, with nocto: the listing kept before it, while
	 * young enough (kept_md.c), without asking the origin for it (an
	 * ACCESS, if no answer for cr is held). */
	if (gw->o->nocto) {
		ret = snap_kept(gw, ino, &cr, NULL, false, &d->snap);
		if (ret != -ENOENT)
			goto opened;
	}
	/* One of the caller's young snapshots: the first read says whether
	 * it will do (a listing continued) or the version is asked. */
	d->snap = snap_young(ino, &cr);
	if (d->snap) {
		d->unsure = true;
		ret = 0;
		goto opened;
	}
	/* The directory's version now: an open shares a snapshot of this
	 * version only, never an older one; one kept before a restart
	 * serves if it is of this version. */
	ret = gw_get_attr(gw, req, ino, true, &ver);
	if (ret >= 0) {
		ret = snap_kept(gw, ino, &cr, &ver, false, &d->snap);
		if (ret == -ENOENT)
			ret = snap_get(gw, ino, &cr, &ver, false, &d->snap);
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

/* An entry of a snapshot read at loaded_at: with the inode's attributes
 * (what the snapshot gave it, or newer: a chmod through the mount since
 * changes the file's attributes, not the directory's version, and a
 * snapshot outlives its open), trusted for what is left of their
 * timeout; none held (dropped after a change): the kernel asks. */
static void entry_from_inode(struct gw *gw, struct gw_inode *ino,
			     const struct nfsc_dirent *de,
			     const struct timespec *loaded_at,
			     struct fuse_entry_param *e)
{
	struct nfsc_attr cur = de->attr;
	struct timespec at = *loaded_at;
	bool valid;

	pthread_mutex_lock(&ino->lock);
	valid = ino->attr_valid;
	if (valid) {
		cur = ino->attr;
		at = ino->attr_at;
	}
	pthread_mutex_unlock(&ino->lock);
	gw_make_entry(gw, ino, &cur, e);
	e->attr_timeout = valid ? gw_attr_ttl_left(gw, &cur, &at) : 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t nodeid, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	struct gw *gw = req_gw(req);
	struct gw_dir *d = (struct gw_dir *)gw_handle_get(fi->fh);
	uint64_t *refs = NULL;	/* node-ids referenced for this reply */
	size_t left = size, i, nrefs = 0;
	char *buf, *p;
	bool aged;

	if (!d) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (!d->snap || (d->unsure && off == 0)) {
		/* Adopted from an earlier process (gw_dir_adopt): listed
		 * again, the offsets the kernel has index the new listing,
		 * the same one unless the directory changed meanwhile. Or a
		 * young snapshot taken at open, read from the start: of the
		 * directory's version now, or replaced by one that is. */
		struct gw_inode *ino = gw_inode_get(gw, nodeid);
		struct gw_dirsnap *sn = NULL;
		struct nfsc_attr ver;
		struct nfsc_cred cr;
		int ret = -ESTALE;

		gw_req_cred(req, &cr);
		if (ino)
			ret = gw_get_attr(gw, req, ino, true, &ver);
		if (ret >= 0 && d->snap &&
		    gw_attr_same_version(&d->snap->ver, &ver)) {
			ahead_taken(gw, d->snap, true);
			d->unsure = false;
		} else {
			if (ret >= 0 && d->snap)
				ahead_taken(gw, d->snap, false);
			if (ret >= 0)
				ret = snap_get(gw, ino, &cr, &ver, false, &sn);
			if (ret < 0) {
				fuse_reply_err(req, -ret);
				return;
			}
			if (d->snap)
				snap_put(d->snap);
			d->snap = sn;
			d->unsure = false;
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
	/* A snapshot read a while ago (it lingered): its entries'
	 * attributes keep the time they were read, as kept ones do. */
	aged = !d->snap->kept &&
	       gw_elapsed_since(&d->snap->loaded_at) >= 1.0;
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
			      aged ?
				gw_inode_ref_kept(gw, &de->fh, &de->attr,
						  nodeid,
						  &d->snap->loaded_at) :
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

				if (d->snap->kept) {
					/* Kept attributes: trusted for what
					 * is left of their timeout, as old
					 * as they are. */
					gw_make_entry(gw, ino, &de->attr, &e);
					e.attr_timeout = gw_attr_ttl_left(
						gw, &de->attr,
						&d->snap->kept_at[i]);
				} else {
					entry_from_inode(gw, ino, de,
							 &d->snap->loaded_at,
							 &e);
				}
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
