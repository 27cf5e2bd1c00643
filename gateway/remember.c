/* remember.c - what the gateway knew of its files, across a restart
 * (issue 20, item 3): the origin's attributes and ACCESS answers of each
 * node-id, with the wall-clock time they were fetched, kept in the cache
 * directory (nodes/md.c: md.log, checksummed records).
 *
 * Only what was kept before this start is used (md_epoch): while it
 * runs, the gateway behaves as it always did, and what it learns serves
 * the next start. A new inode (after a restart: the first LOOKUP,
 * READDIRPLUS or re-export handle that names it) starts with what was
 * kept, aged by the time since the fetch, not since the restart: answers older than the
 * attribute timeout are not used, and an ACCESS answer holds only while
 * the inode's attributes (fresh from the origin as a rule, the LOOKUP or
 * READDIRPLUS that made the inode) still show the file it was given for
 * (access.c: ctime, mode, owner, group). So with nocto,actimeo=600 a
 * restarted gateway opens files it read before the restart without an
 * ACCESS per file, and a file whose mode changed at the origin while the
 * gateway was down is asked about again.
 *
 * Names too: a directory's entries (name -> node-id, from LOOKUP and
 * READDIRPLUS replies) are kept with their fetch time, and a LOOKUP is
 * answered from them while younger than the directory's attribute
 * timeout (what the kernel NFS client allows its dentry cache), if the
 * caller may search the directory (access.c, kept answers count), the
 * node-id is still in the node-id table and its attributes are known and
 * young enough; else it goes to the origin. A name not kept is asked:
 * negative answers are never given from here. A directory listed whole
 * from the origin (READDIRPLUS) is kept so too (MD_LISTED: its version
 * and how many names), and a restarted gateway opens it from what was
 * kept while that is younger than the directory's attribute timeout, the
 * names are all there (no name made or removed since) and every file's
 * attributes are young enough; with close-to-open the directory's version
 * is still asked (GETATTR) and must be the one listed. A name removed or renamed
 * through the gateway is forgotten at once (gw_md_unname); one made is
 * kept.
 *
 * After a stop that was not clean (a crash, SIGKILL, a damaged md.log)
 * the last records of the run before may be missing, so a name removed
 * or attributes changed through the gateway could come back as they were:
 * only the ACCESS answers are kept then (gw_md_unclean).
 *
 * What is written: every ACCESS answer the origin gave (remember() in
 * access.c); names when they differ from the last ones written or when
 * those are older than half their timeout; an inode's attributes when it
 * is freed (the kernel forgot it, or the gateway stops), as the gateway
 * last had them (its own writes included) with the time it got them: so
 * after a clean stop every kept attribute is the newest the gateway knew. A node-id the origin calls
 * stale loses its records (its names in its directory stay, and lead to
 * a node-id no longer in the table: asked again). Blobs are this machine's layout, fixed-width fields.
 * Locks: the md store's own (a leaf); called with ino->lock not held,
 * except gw_md_attach (a new inode, not yet shared).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "gw_i.h"

#define MD_ATTR 1
#define MD_ACCESS 2
#define MD_LISTED 3			/* a directory's whole listing is kept */
#define MD_LINK 4			/* a symbolic link's target (a link's
					 * target never changes: a new target
					 * is a new file) */
#define MD_LIST_MAX 65536		/* larger listings are not kept */
#define MD_NAME_MAX (NODES_MD_BLOB_MAX - 8)	/* longer names: not kept */

struct md_attr {
	uint8_t type;
	uint8_t pad[3];
	uint32_t mode, nlink, uid, gid, rdev_major, rdev_minor;
	uint64_t size, used, fsid, fileid;
	int64_t at_s, mt_s, ct_s;
	uint32_t at_ns, mt_ns, ct_ns;
} __attribute__((packed));

struct md_access {
	uint32_t uid, gid;
	uint64_t groups;
	uint32_t asked, granted;
	int64_t ct_s;
	uint32_t ct_ns, mode, fuid, fgid;
} __attribute__((packed));

/* A directory listed whole: its version then, how many names (each kept
 * as a NODES_MD_DENT record with its file's attributes), and the fileids
 * of "." and "..". */
struct md_listed {
	uint64_t size;
	int64_t mt_s, ct_s;
	uint32_t mt_ns, ct_ns;
	uint32_t n, pad;
	uint64_t dot, dotdot;
} __attribute__((packed));

_Static_assert(sizeof(struct md_attr) <= NODES_MD_BLOB_MAX, "md_attr");
_Static_assert(sizeof(struct md_listed) <= NODES_MD_BLOB_MAX, "md_listed");
_Static_assert(sizeof(struct md_access) <= NODES_MD_BLOB_MAX, "md_access");

uint64_t gw_md_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void pack_attr(const struct nfsc_attr *a, struct md_attr *m)
{
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)a->type;
	m->mode = a->mode;
	m->nlink = a->nlink;
	m->uid = a->uid;
	m->gid = a->gid;
	m->rdev_major = a->rdev_major;
	m->rdev_minor = a->rdev_minor;
	m->size = a->size;
	m->used = a->used;
	m->fsid = a->fsid;
	m->fileid = a->fileid;
	m->at_s = a->atime.tv_sec;
	m->at_ns = (uint32_t)a->atime.tv_nsec;
	m->mt_s = a->mtime.tv_sec;
	m->mt_ns = (uint32_t)a->mtime.tv_nsec;
	m->ct_s = a->ctime.tv_sec;
	m->ct_ns = (uint32_t)a->ctime.tv_nsec;
}

/* A time's seconds as an NFSv3 origin gives them (32 bits unsigned):
 * others are damage, and would overflow what is computed with them. */
static bool nfs3_secs(int64_t s)
{
	return s >= 0 && s <= (int64_t)UINT32_MAX;
}

/* false for a record that cannot be attributes (the store checks its
 * checksums; this checks the meaning). */
static bool unpack_attr(const struct nodes_md_rec *r, struct nfsc_attr *a)
{
	struct md_attr m;

	if (r->len != sizeof(m))
		return false;
	memcpy(&m, r->blob, sizeof(m));
	if (m.type > NFSC_FIFO || m.mode > 07777 || m.at_ns >= 1000000000u ||
	    m.mt_ns >= 1000000000u || m.ct_ns >= 1000000000u ||
	    m.size > (uint64_t)INT64_MAX || !nfs3_secs(m.at_s) ||
	    !nfs3_secs(m.mt_s) || !nfs3_secs(m.ct_s))
		return false;
	memset(a, 0, sizeof(*a));
	a->type = (enum nfsc_type)m.type;
	a->mode = m.mode;
	a->nlink = m.nlink;
	a->uid = m.uid;
	a->gid = m.gid;
	a->rdev_major = m.rdev_major;
	a->rdev_minor = m.rdev_minor;
	a->size = m.size;
	a->used = m.used;
	a->fsid = m.fsid;
	a->fileid = m.fileid;
	a->atime.tv_sec = m.at_s;
	a->atime.tv_nsec = m.at_ns;
	a->mtime.tv_sec = m.mt_s;
	a->mtime.tv_nsec = m.mt_ns;
	a->ctime.tv_sec = m.ct_s;
	a->ctime.tv_nsec = m.ct_ns;
	return true;
}

static uint64_t access_key(uint32_t uid, uint32_t gid, uint64_t groups)
{
	return (((uint64_t)uid << 32) | gid) * 0x9E3779B97F4A7C15ull ^ groups;
}

/* Seconds since a fetch at fetched_ns, or a negative number when the
 * clock went back since (then nothing kept is trusted). */
static double age_of(uint64_t fetched_ns, uint64_t now_ns)
{
	if (fetched_ns > now_ns)
		return -1;
	return (double)(now_ns - fetched_ns) / 1e9;
}

/* CLOCK_MONOTONIC "now minus age", as a timespec and in seconds. */
static void mono_minus(double age, struct timespec *ts, double *secs)
{
	struct timespec now;
	double t;

	clock_gettime(CLOCK_MONOTONIC, &now);
	t = (double)now.tv_sec + (double)now.tv_nsec / 1e9 - age;
	if (ts) {
		ts->tv_sec = (time_t)t;
		ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
		if (ts->tv_nsec < 0)
			ts->tv_nsec = 0;
	}
	if (secs)
		*secs = t;
}

void gw_md_attach(struct gw *gw, struct gw_inode *ino)
{
	struct nodes_md_rec r[1 + GW_ACCESS_SLOTS + 4];
	uint64_t now = gw_md_now_ns();
	struct nfsc_attr a;
	size_t n;

	if (!gw->md)
		return;
	n = nodes_md_get(gw->md, ino->nodeid, r, sizeof(r) / sizeof(r[0]));
	/* Attributes first: the access answers are checked against them. */
	for (size_t i = 0; i < n; i++) {
		double age = age_of(r[i].fetched_ns, now);

		if (r[i].kind != MD_ATTR || age < 0 ||
		    r[i].fetched_ns >= gw->md_epoch ||
		    !unpack_attr(&r[i], &a) || age >= gw_attr_ttl(gw, &a))
			continue;
		ino->attr = a;
		mono_minus(age, &ino->attr_at, NULL);
		ino->attr_valid = true;
		__atomic_add_fetch(&gw->md_restored_attrs, 1, __ATOMIC_RELAXED);
	}
	for (size_t i = 0; i < n; i++) {
		double age = age_of(r[i].fetched_ns, now);
		struct gw_access *s;
		struct md_access m;

		if (r[i].kind != MD_ACCESS || age < 0 ||
		    r[i].fetched_ns >= gw->md_epoch || r[i].len != sizeof(m) ||
		    ino->access_next >= GW_ACCESS_SLOTS)
			continue;
		memcpy(&m, r[i].blob, sizeof(m));
		if (m.ct_ns >= 1000000000u)
			continue;
		/* Kept even without attributes: access.c drops an answer
		 * whose stamp the inode's attributes (fresh from the
		 * origin) do not show. */
		s = &ino->access[ino->access_next++];
		s->valid = true;
		s->uid = m.uid;
		s->gid = m.gid;
		s->groups = m.groups;
		s->asked = m.asked;
		s->granted = m.granted;
		mono_minus(age, NULL, &s->at);
		s->stamped = true;
		s->ctime.tv_sec = m.ct_s;
		s->ctime.tv_nsec = m.ct_ns;
		s->mode = m.mode;
		s->fuid = m.fuid;
		s->fgid = m.fgid;
		__atomic_add_fetch(&gw->md_restored_access, 1,
				   __ATOMIC_RELAXED);
	}
}

void gw_md_note_access(struct gw *gw, uint64_t nodeid,
		       const struct gw_access *s)
{
	struct md_access m;

	if (!gw->md || !s->valid || !s->stamped)
		return;
	memset(&m, 0, sizeof(m));
	m.uid = s->uid;
	m.gid = s->gid;
	m.groups = s->groups;
	m.asked = s->asked;
	m.granted = s->granted;
	m.ct_s = s->ctime.tv_sec;
	m.ct_ns = (uint32_t)s->ctime.tv_nsec;
	m.mode = s->mode;
	m.fuid = s->fuid;
	m.fgid = s->fgid;
	(void)nodes_md_put(gw->md, nodeid, MD_ACCESS,
			   access_key(s->uid, s->gid, s->groups),
			   gw_md_now_ns(), &m, sizeof(m));
}

void gw_md_keep_inode(struct gw *gw, struct gw_inode *ino)
{
	struct timespec at, now;
	struct nfsc_attr a;
	struct md_attr m;
	bool valid, dropped;
	double age;

	GW_ASSERT_NOT_HELD(&ino->lock);
	/* The root's too (main.c attaches them at start). */
	if (!gw->md)
		return;
	pthread_mutex_lock(&ino->lock);
	valid = ino->attr_valid;
	dropped = ino->attr_dropped;
	a = ino->attr;
	at = ino->attr_at;
	pthread_mutex_unlock(&ino->lock);
	if (!valid) {
		/* Whatever was kept is older than a change the gateway saw
		 * (it dropped its attributes): not to be used. An inode that
		 * never had attributes in this run (made from kept names
		 * while the origin was away) leaves what was kept alone. */
		if (dropped)
			(void)nodes_md_put(gw->md, ino->nodeid, MD_ATTR, 0,
					   gw_md_now_ns(), NULL, 0);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	age = (double)(now.tv_sec - at.tv_sec) +
	      (double)(now.tv_nsec - at.tv_nsec) / 1e9;
	if (age < 0)
		age = 0;
	pack_attr(&a, &m);
	(void)nodes_md_put(gw->md, ino->nodeid, MD_ATTR, 0,
			   gw_md_now_ns() - (uint64_t)(age * 1e9), &m,
			   sizeof(m));
}

void gw_md_forget(struct gw *gw, uint64_t nodeid)
{
	if (gw->md)
		(void)nodes_md_drop(gw->md, nodeid);
}

static uint64_t name_key(const char *name, size_t len)
{
	return XXH3_64bits(name, len);
}

static double dir_ttl(struct gw *gw, struct gw_inode *dir)
{
	struct nfsc_attr a;
	double ttl;

	pthread_mutex_lock(&dir->lock);
	a = dir->attr;
	ttl = dir->attr_valid ? gw_attr_ttl(gw, &a) : gw->o->acdirmin;
	pthread_mutex_unlock(&dir->lock);
	return ttl;
}

void gw_md_note_dent(struct gw *gw, struct gw_inode *dir, const char *name,
		     uint64_t child)
{
	uint8_t blob[NODES_MD_BLOB_MAX];
	size_t len = strlen(name);
	struct nodes_md_rec r;
	uint64_t key, now;

	if (!gw->md || len > MD_NAME_MAX || !child)
		return;
	key = name_key(name, len);
	now = gw_md_now_ns();
	if (nodes_md_get_one(gw->md, dir->nodeid, NODES_MD_DENT, key,
			     &r) == 0 && r.len == 8 + len &&
	    !memcmp(r.blob, &child, 8) && !memcmp(r.blob + 8, name, len) &&
	    now >= r.fetched_ns &&
	    (double)(now - r.fetched_ns) / 1e9 < dir_ttl(gw, dir) / 2)
		return;
	memcpy(blob, &child, 8);
	memcpy(blob + 8, name, len);
	(void)nodes_md_put(gw->md, dir->nodeid, NODES_MD_DENT, key, now,
			   blob, 8 + len);
}

void gw_md_unname(struct gw *gw, struct gw_inode *dir, const char *name)
{
	size_t len = strlen(name);

	/* A record without a node-id: the name is not kept any more. */
	if (gw->md && len <= MD_NAME_MAX)
		(void)nodes_md_put(gw->md, dir->nodeid, NODES_MD_DENT,
				   name_key(name, len), gw_md_now_ns(), NULL,
				   0);
}

int gw_md_lookup(struct gw *gw, fuse_req_t req, struct gw_inode *dir,
		 const char *name, bool offline, struct fuse_entry_param *e)
{
	size_t len = strlen(name);
	struct nodes_md_rec r;
	struct gw_inode *ino;
	struct nfsc_cred cr;
	struct nfsc_attr a;
	uint64_t child;
	double age;
	int ret;

	if (!gw->md || len > MD_NAME_MAX ||
	    nodes_md_get_one(gw->md, dir->nodeid, NODES_MD_DENT,
			     name_key(name, len), &r) ||
	    r.len != 8 + len || memcmp(r.blob + 8, name, len))
		return -ENOENT;
	age = age_of(r.fetched_ns, gw_md_now_ns());
	if (!offline && (age < 0 || age >= dir_ttl(gw, dir) ||
			 r.fetched_ns >= gw->md_epoch))
		return -ENOENT;
	memcpy(&child, r.blob, 8);
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
	__atomic_add_fetch(offline ? &gw->offline_answers :
			   &gw->md_kept_lookups, 1, __ATOMIC_RELAXED);
	return 0;
}

void gw_md_note_link(struct gw *gw, uint64_t nodeid, const char *target)
{
	size_t len = strlen(target);
	struct nodes_md_rec r;

	if (!gw->md || len > NODES_MD_BLOB_MAX ||
	    (nodes_md_get_one(gw->md, nodeid, MD_LINK, 0, &r) == 0 &&
	     r.len == len && !memcmp(r.blob, target, len)))
		return;
	(void)nodes_md_put(gw->md, nodeid, MD_LINK, 0, gw_md_now_ns(), target,
			   (uint8_t)len);
}

int gw_md_link_any(struct gw *gw, uint64_t nodeid, char *buf, size_t size)
{
	struct nodes_md_rec r;

	if (!gw->md || nodes_md_get_one(gw->md, nodeid, MD_LINK, 0, &r) ||
	    !r.len || r.len >= size)
		return -ENOENT;
	memcpy(buf, r.blob, r.len);
	buf[r.len] = 0;
	return 0;
}

int gw_md_dent_any(struct gw *gw, uint64_t dir, const char *name,
		   uint64_t *child)
{
	size_t len = strlen(name);
	struct nodes_md_rec r;

	if (!gw->md || len > MD_NAME_MAX ||
	    nodes_md_get_one(gw->md, dir, NODES_MD_DENT, name_key(name, len),
			     &r) ||
	    r.len != 8 + len || memcmp(r.blob + 8, name, len))
		return -ENOENT;
	memcpy(child, r.blob, 8);
	return 0;
}

int gw_md_attr_any(struct gw *gw, uint64_t nodeid, struct nfsc_attr *a)
{
	struct nodes_md_rec r;

	if (!gw->md || nodes_md_get_one(gw->md, nodeid, MD_ATTR, 0, &r) ||
	    !unpack_attr(&r, a))
		return -ENOENT;
	return 0;
}

bool gw_md_listed_whole(struct gw *gw, struct gw_inode *dir)
{
	struct nodes_md_rec r;

	return gw->md &&
	       nodes_md_get_one(gw->md, dir->nodeid, MD_LISTED, 0, &r) == 0 &&
	       r.len == sizeof(struct md_listed);
}

bool gw_md_access_any(struct gw *gw, uint64_t nodeid, uint32_t uid,
		      uint32_t gid, uint64_t groups, struct gw_access *out)
{
	struct nodes_md_rec r;
	struct md_access m;

	if (!gw->md ||
	    nodes_md_get_one(gw->md, nodeid, MD_ACCESS,
			     access_key(uid, gid, groups), &r) ||
	    r.len != sizeof(m))
		return false;
	memcpy(&m, r.blob, sizeof(m));
	if (m.uid != uid || m.gid != gid || m.groups != groups ||
	    m.ct_ns >= 1000000000u)
		return false;
	memset(out, 0, sizeof(*out));
	out->valid = out->stamped = true;
	out->uid = uid;
	out->gid = gid;
	out->groups = groups;
	out->asked = m.asked;
	out->granted = m.granted;
	out->ctime.tv_sec = m.ct_s;
	out->ctime.tv_nsec = m.ct_ns;
	out->mode = m.mode;
	out->fuid = m.fuid;
	out->fgid = m.fgid;
	return true;
}

void gw_md_unclean(struct gw *gw)
{
	/* The last records of the run before may be missing: a name
	 * removed or attributes changed through the gateway could come back
	 * as they were before. ACCESS answers stay right however old (each
	 * holds only while fresh attributes show the file it was given
	 * for); names and attributes go. */
	gw_log("kept metadata (md.log): the last stop was not clean; "
	       "keeping only the ACCESS answers");
	if (nodes_md_retain(gw->md, MD_ACCESS)) {
		gw_log("kept metadata (md.log): cannot rewrite it: starting "
		       "without it");
		nodes_md_close(gw->md);
		gw->md = NULL;
	}
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names kept of dir that the listing l no longer has (removed at the
 * origin) are forgotten, so that what is kept is the listing. */
static void forget_unlisted(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_dirlist *l)
{
	size_t max = l->n + 256, got, i;
	struct nodes_md_rec *d = malloc(max * sizeof(*d));
	const char **names = malloc((l->n + 1) * sizeof(*names));

	if (!d || !names)
		goto out;
	for (i = 0; i < l->n; i++)
		names[i] = l->ents[i].name;
	qsort(names, l->n, sizeof(*names), cmp_names);
	got = nodes_md_get_dents(gw->md, dir->nodeid, d, max);
	if (got > max)
		got = max;	/* the rest: the count check refuses it */
	for (i = 0; i < got; i++) {
		char name[NODES_MD_BLOB_MAX];
		const char *key = name;

		if (d[i].len <= 8)
			continue;
		memcpy(name, d[i].blob + 8, d[i].len - 8);
		name[d[i].len - 8] = 0;
		if (!bsearch(&key, names, l->n, sizeof(*names), cmp_names))
			gw_md_unname(gw, dir, name);
	}
out:
	free(d);
	free(names);
}

/* Are these attributes of id kept already, younger than half their
 * timeout? (A listing read again need not write them again.) */
static bool attr_kept_young(struct gw *gw, uint64_t id,
			    const struct md_attr *ma,
			    const struct nfsc_attr *a, uint64_t now)
{
	struct nodes_md_rec r;

	return nodes_md_get_one(gw->md, id, MD_ATTR, 0, &r) == 0 &&
	       r.len == sizeof(*ma) && !memcmp(r.blob, ma, sizeof(*ma)) &&
	       now >= r.fetched_ns &&
	       (double)(now - r.fetched_ns) / 1e9 < gw_attr_ttl(gw, a) / 2;
}

void gw_md_note_listing(struct gw *gw, struct gw_inode *dir,
			const struct nfsc_attr *ver,
			const struct nfsc_dirlist *l)
{
	uint64_t now = gw_md_now_ns(), dot = 0, dotdot = 0;
	struct md_listed m;
	uint32_t n = 0;

	if (!gw->md || l->n > MD_LIST_MAX)
		goto incomplete;
	for (size_t i = 0; i < l->n; i++) {
		const struct nfsc_dirent *de = &l->ents[i];
		struct md_attr ma;
		uint64_t id;
		int ret;

		if (!strcmp(de->name, ".")) {
			dot = de->fileid;
			continue;
		}
		if (!strcmp(de->name, "..")) {
			dotdot = de->fileid;
			continue;
		}
		if (!de->has_fh || !de->has_attr ||
		    strlen(de->name) > MD_NAME_MAX)
			goto incomplete;
		ret = nodes_add(gw->nodes, de->fh.data, de->fh.len,
				dir->nodeid, &id, NULL);
		if (ret < 0)
			goto incomplete;
		if (ret == 1)
			gw_reclaim_note_add(gw);
		gw_md_note_dent(gw, dir, de->name, id);
		pack_attr(&de->attr, &ma);
		if (!attr_kept_young(gw, id, &ma, &de->attr, now) &&
		    nodes_md_put(gw->md, id, MD_ATTR, 0, now, &ma,
				 sizeof(ma)))
			goto incomplete;
		n++;
	}
	forget_unlisted(gw, dir, l);
	memset(&m, 0, sizeof(m));
	m.size = ver->size;
	m.mt_s = ver->mtime.tv_sec;
	m.mt_ns = (uint32_t)ver->mtime.tv_nsec;
	m.ct_s = ver->ctime.tv_sec;
	m.ct_ns = (uint32_t)ver->ctime.tv_nsec;
	m.n = n;
	m.dot = dot;
	m.dotdot = dotdot;
	(void)nodes_md_put(gw->md, dir->nodeid, MD_LISTED, 0, now, &m,
			   sizeof(m));
	return;
incomplete:
	/* Not kept whole: no listing may come from what is kept of it. */
	if (gw->md)
		(void)nodes_md_put(gw->md, dir->nodeid, MD_LISTED, 0, now,
				   NULL, 0);
}

static bool listed_is(const struct md_listed *m, const struct nfsc_attr *a)
{
	struct timespec mt = { m->mt_s, m->mt_ns }, ct = { m->ct_s, m->ct_ns };

	return gw_version_eq(m->size, &mt, &ct, a->size, &a->mtime,
			     &a->ctime);
}

int gw_md_listing(struct gw *gw, struct gw_inode *dir,
		  const struct nfsc_attr *ver, bool offline,
		  struct nfsc_dirlist *out)
{
	uint64_t now = gw_md_now_ns();
	struct nodes_md_rec r, *dents = NULL;
	struct md_listed m;
	double age;
	size_t got, i, n;
	int ret = -ENOENT;

	memset(out, 0, sizeof(*out));
	if (!gw->md ||
	    nodes_md_get_one(gw->md, dir->nodeid, MD_LISTED, 0, &r) ||
	    r.len != sizeof(m) || (!offline && r.fetched_ns >= gw->md_epoch))
		return -ENOENT;
	memcpy(&m, r.blob, sizeof(m));
	/* The count comes from a file: one that no listing kept could have
	 * (damage) is refused before it sizes anything. */
	if (m.n > MD_LIST_MAX)
		return -ENOENT;
	age = age_of(r.fetched_ns, now);
	if (!offline && (age < 0 || age >= dir_ttl(gw, dir) ||
			 (ver && !listed_is(&m, ver))))
		return -ENOENT;
	/* Names kept; offline, names made through the gateway since count
	 * too. */
	n = (size_t)m.n + (offline ? 256 : 0);
	dents = malloc((n + 1) * sizeof(*dents));
	out->ents = calloc(n + 2, sizeof(*out->ents));
	if (!dents || !out->ents)
		goto fail;
	got = nodes_md_get_dents(gw->md, dir->nodeid, dents, n + 1);
	if (got > n + 1)
		goto fail;
	out->cap = n + 2;
	out->ents[0].name = strdup(".");
	out->ents[0].fileid = m.dot;
	out->ents[1].name = strdup("..");
	out->ents[1].fileid = m.dotdot;
	out->n = 2;
	if (!out->ents[0].name || !out->ents[1].name)
		goto fail;
	for (i = 0; i < got; i++) {
		struct nfsc_dirent *de;
		struct nodes_md_rec ar;
		uint64_t child;
		size_t hlen = sizeof(de->fh.data);
		double aage;

		if (dents[i].len <= 8)
			continue;	/* a name forgotten since */
		if (out->n == n + 2)
			goto fail;	/* a name made since */
		de = &out->ents[out->n];
		memcpy(&child, dents[i].blob, 8);
		if (nodes_get(gw->nodes, child, de->fh.data, &hlen, NULL,
			      NULL) ||
		    nodes_md_get_one(gw->md, child, MD_ATTR, 0, &ar) ||
		    (!offline && ar.fetched_ns >= gw->md_epoch) ||
		    !unpack_attr(&ar, &de->attr))
			goto fail;
		aage = age_of(ar.fetched_ns, now);
		if (!offline && (aage < 0 ||
				 aage >= gw_attr_ttl(gw, &de->attr)))
			goto fail;
		de->fh.len = (uint32_t)hlen;
		de->has_fh = de->has_attr = true;
		de->fileid = de->attr.fileid;
		de->name = strndup((const char *)dents[i].blob + 8,
				   dents[i].len - 8);
		if (!de->name)
			goto fail;
		out->n++;
	}
	if (!offline && out->n != n + 2)
		goto fail;	/* a name forgotten since */
	out->seen_dot = out->seen_dotdot = true;
	ret = 0;
	__atomic_add_fetch(offline ? &gw->offline_answers :
			   &gw->md_kept_listings, 1, __ATOMIC_RELAXED);
fail:
	free(dents);
	if (ret)
		nfsc_dirlist_free(out);
	return ret;
}

bool gw_md_listing_version(struct gw *gw, struct gw_inode *dir,
			   struct nfsc_attr *ver)
{
	struct nodes_md_rec r;
	struct md_listed m;

	if (!gw->md ||
	    nodes_md_get_one(gw->md, dir->nodeid, MD_LISTED, 0, &r) ||
	    r.len != sizeof(m))
		return false;
	memcpy(&m, r.blob, sizeof(m));
	memset(ver, 0, sizeof(*ver));
	ver->type = NFSC_DIR;
	ver->size = m.size;
	ver->mtime.tv_sec = m.mt_s;
	ver->mtime.tv_nsec = m.mt_ns;
	ver->ctime.tv_sec = m.ct_s;
	ver->ctime.tv_nsec = m.ct_ns;
	return true;
}
