/* kept_md.c - what the gateway knew of its files, across a restart:
 * the origin's attributes and ACCESS answers of each
 * node-id, with the wall-clock time they were fetched, kept in the cache
 * directory (nodes/md.c: md.log, checksummed records).
 *
 * Only what was kept before this start is used (md_epoch): while it
 * runs, the gateway behaves as it always did, and what it learns serves
 * the next start; but for ACCESS answers, which a new inode takes from
 * this run too: the kernel forgets unused inodes (memory pressure, a
 * drop_caches anywhere on the machine) and names them again, and the
 * answers freed with the gateway's inode would each cost an ACCESS
 * again, though they hold only while the inode's attributes show their
 * file, whenever they were got. A new inode (after a restart: the first
 * LOOKUP, READDIRPLUS or re-export handle that names it) starts with what was
 * kept, aged by the time since the fetch, not since the restart: answers older than the
 * attribute timeout are not used, and an ACCESS answer holds only while
 * the inode's attributes (fresh from the origin as a rule, the LOOKUP or
 * READDIRPLUS that made the inode) still show the file it was given for
 * (access.c: ctime, mode, owner, group). So with nocto,actimeo=600 a
 * restarted gateway opens files it read before the restart without an
 * ACCESS per file, and a file whose mode changed at the origin while the
 * gateway was down is asked about again.
 *
 * After a stop that was not clean (a crash, SIGKILL, a damaged md.log)
 * the last records of the run before may be missing, so a name removed
 * or attributes changed through the gateway could come back as they were:
 * only the ACCESS answers are kept then (gw_md_unclean). Not for a
 * successor (gw_state.h): the process died, the machine did not, and every
 * record it wrote is in the file (each is written at once); attributes it
 * changed itself were marked so as they changed (gw_md_note_changed: once
 * per inode and run), and are unknown to the successor, not old.
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

#include "keep_i.h"

struct md_access {
	uint32_t uid, gid;
	uint64_t groups;
	uint32_t asked, granted;
	int64_t ct_s;
	uint32_t ct_ns, mode, fuid, fgid;
} __attribute__((packed));

_Static_assert(sizeof(struct md_attr) <= NODES_MD_BLOB_MAX, "md_attr");
_Static_assert(sizeof(struct md_access) <= NODES_MD_BLOB_MAX, "md_access");

uint64_t gw_md_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void md_pack_attr(const struct nfsc_attr *a, struct md_attr *m)
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

static void pack_access(const struct gw_access *s, struct md_access *m)
{
	memset(m, 0, sizeof(*m));
	m->uid = s->uid;
	m->gid = s->gid;
	m->groups = s->groups;
	m->asked = s->asked;
	m->granted = s->granted;
	m->ct_s = s->ctime.tv_sec;
	m->ct_ns = (uint32_t)s->ctime.tv_nsec;
	m->mode = s->mode;
	m->fuid = s->fuid;
	m->fgid = s->fgid;
}

/* A time's seconds as an NFSv3 origin gives them (32 bits unsigned):
 * others are damage, and would overflow what is computed with them. */
static bool nfs3_secs(int64_t s)
{
	return s >= 0 && s <= (int64_t)UINT32_MAX;
}

/* false for a record that cannot be attributes (the store checks its
 * checksums; this checks the meaning). */
bool md_unpack_attr(const struct nodes_md_rec *r, struct nfsc_attr *a)
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
double md_age_of(uint64_t fetched_ns, uint64_t now_ns)
{
	if (fetched_ns > now_ns)
		return -1;
	return (double)(now_ns - fetched_ns) / 1e9;
}

/* CLOCK_MONOTONIC "now minus age", as a timespec and in seconds. */
void md_mono_minus(double age, struct timespec *ts, double *secs)
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
	/* Attributes, answers, and room for the rest (listing, readers). */
	struct nodes_md_rec r[1 + 2 * GW_ACCESS_SLOTS + 4];
	uint64_t now = gw_md_now_ns();
	struct nfsc_attr a;
	size_t n;

	if (!gw->md)
		return;
	n = nodes_md_get(gw->md, ino->nodeid, r, sizeof(r) / sizeof(r[0]));
	/* Attributes first: the access answers are checked against them. */
	for (size_t i = 0; i < n; i++) {
		double age = md_age_of(r[i].fetched_ns, now);

		if (r[i].kind != MD_ATTR || age < 0 ||
		    r[i].fetched_ns >= gw->md_epoch ||
		    !md_unpack_attr(&r[i], &a) || age >= gw_attr_ttl(gw, &a))
			continue;
		ino->attr = a;
		md_mono_minus(age, &ino->attr_at, NULL);
		ino->attr_valid = true;
		__atomic_add_fetch(&gw->md_restored_attrs, 1, __ATOMIC_RELAXED);
	}
	for (size_t i = 0; i < n; i++) {
		double age = md_age_of(r[i].fetched_ns, now);
		struct gw_access *s;
		struct md_access m;

		if (r[i].kind != MD_ACCESS || age < 0 || r[i].len != sizeof(m) ||
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
		md_mono_minus(age, NULL, &s->at);
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
	pack_access(s, &m);
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
	/* The root's too (start.c attaches them at start). */
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
	md_pack_attr(&a, &m);
	(void)nodes_md_put(gw->md, ino->nodeid, MD_ATTR, 0,
			   gw_md_now_ns() - (uint64_t)(age * 1e9), &m,
			   sizeof(m));
}

void gw_md_note_changed(struct gw *gw, struct gw_inode *ino)
{
	struct nodes_md_rec r;

	/* Once per inode and run: what is kept of its attributes is older
	 * than this change from now on. Kept again, new, when the inode is
	 * freed (gw_md_keep_inode); in between, a successor after a crash
	 * finds it unknown rather than as it was. Nothing kept (a file made
	 * in this run, most often): nothing to write. */
	if (!gw->md || __atomic_load_n(&ino->md_changed, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&ino->md_changed, true, __ATOMIC_RELAXED) ||
	    nodes_md_get_one(gw->md, ino->nodeid, MD_ATTR, 0, &r) || !r.len)
		return;
	(void)nodes_md_put(gw->md, ino->nodeid, MD_ATTR, 0, gw_md_now_ns(),
			   NULL, 0);
}

void gw_md_forget(struct gw *gw, uint64_t nodeid)
{
	if (gw->md)
		(void)nodes_md_drop(gw->md, nodeid);
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

int gw_md_attr_any(struct gw *gw, uint64_t nodeid, struct nfsc_attr *a)
{
	struct nodes_md_rec r;

	if (!gw->md || nodes_md_get_one(gw->md, nodeid, MD_ATTR, 0, &r) ||
	    !md_unpack_attr(&r, a))
		return -ENOENT;
	return 0;
}

static bool access_get(struct gw *gw, uint8_t kind, uint64_t nodeid,
		       uint32_t uid, uint32_t gid, uint64_t groups,
		       struct gw_access *out)
{
	struct nodes_md_rec r;
	struct md_access m;

	if (!gw->md ||
	    nodes_md_get_one(gw->md, nodeid, kind,
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

bool gw_md_access_any(struct gw *gw, uint64_t nodeid, uint32_t uid,
		      uint32_t gid, uint64_t groups, struct gw_access *out)
{
	return access_get(gw, MD_ACCESS, nodeid, uid, gid, groups, out);
}

bool gw_md_reader_any(struct gw *gw, uint64_t dir, uint32_t uid,
		      uint32_t gid, uint64_t groups, struct gw_access *out)
{
	return access_get(gw, MD_READER, dir, uid, gid, groups, out);
}

void gw_md_note_reader(struct gw *gw, uint64_t dir, const struct gw_access *s)
{
	uint64_t key = access_key(s->uid, s->gid, s->groups);
	struct nodes_md_rec r;
	struct md_access m;

	if (!gw->md || !s->valid || !s->stamped)
		return;
	pack_access(s, &m);
	/* Written once per reader and version, not per listing. */
	if (nodes_md_get_one(gw->md, dir, MD_READER, key, &r) == 0 &&
	    r.len == sizeof(m) && !memcmp(r.blob, &m, sizeof(m)))
		return;
	(void)nodes_md_put(gw->md, dir, MD_READER, key, gw_md_now_ns(), &m,
			   sizeof(m));
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
