/* kept_names.c - names and listings kept across a restart (md.log, with
 * kept_md.c's attributes and ACCESS answers).
 *
 * A directory's entries (name -> node-id, from LOOKUP and READDIRPLUS
 * replies) are kept with their fetch time, and a LOOKUP is
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
 * is still asked (GETATTR) and must be the one listed. A name removed or
 * renamed through the gateway is forgotten at once (gw_md_unname); one made is
 * kept. Whoever is shown kept names, attributes or listings must hold an
 * answer of the origin that lets them search (names) or read (listings)
 * the directory, kept or asked now (access.c): who listed it is kept too
 * (MD_READER), so that offline a listing is shown to its readers. Kept
 * attributes keep their age, in the inode and in what the kernel is told
 * (the timeout left): so, once the origin is back, they are asked again
 * when their age says, however long they were served offline.
 *
 * Locks: the md store's own (a leaf); called with ino->lock not held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "keep_i.h"

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

_Static_assert(sizeof(struct md_listed) <= NODES_MD_BLOB_MAX, "md_listed");

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

int gw_md_kept_child(struct gw *gw, struct gw_inode *dir, const char *name,
		     bool offline, uint64_t *child)
{
	size_t len = strlen(name);
	struct nodes_md_rec r;
	double age;

	if (!gw->md || len > MD_NAME_MAX ||
	    nodes_md_get_one(gw->md, dir->nodeid, NODES_MD_DENT,
			     name_key(name, len), &r) ||
	    r.len != 8 + len || memcmp(r.blob + 8, name, len))
		return -ENOENT;
	age = md_age_of(r.fetched_ns, gw_md_now_ns());
	if (!offline && (age < 0 || age >= dir_ttl(gw, dir) ||
			 r.fetched_ns >= gw->md_epoch))
		return -ENOENT;
	memcpy(child, r.blob, 8);
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

bool gw_md_listed_whole(struct gw *gw, struct gw_inode *dir)
{
	struct nodes_md_rec r;

	return gw->md &&
	       nodes_md_get_one(gw->md, dir->nodeid, MD_LISTED, 0, &r) == 0 &&
	       r.len == sizeof(struct md_listed);
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

uint64_t gw_md_note_listing(struct gw *gw, struct gw_inode *dir,
			    const struct nfsc_attr *ver,
			    const struct nfsc_dirlist *l)
{
	uint64_t now = gw_md_now_ns(), dot = 0, dotdot = 0, added = 0;
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
			added++;
		gw_md_note_dent(gw, dir, de->name, id);
		md_pack_attr(&de->attr, &ma);
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
	return added;
incomplete:
	/* Not kept whole: no listing may come from what is kept of it. */
	if (gw->md)
		(void)nodes_md_put(gw->md, dir->nodeid, MD_LISTED, 0, now,
				   NULL, 0);
	return added;
}

static bool listed_is(const struct md_listed *m, const struct nfsc_attr *a)
{
	struct timespec mt = { m->mt_s, m->mt_ns }, ct = { m->ct_s, m->ct_ns };

	return gw_version_eq(m->size, &mt, &ct, a->size, &a->mtime,
			     &a->ctime);
}

int gw_md_listing(struct gw *gw, struct gw_inode *dir,
		  const struct nfsc_attr *ver, bool offline,
		  struct nfsc_dirlist *out, struct timespec **at)
{
	uint64_t now = gw_md_now_ns();
	struct nodes_md_rec r, *dents = NULL;
	struct timespec *fetched = NULL;
	struct md_listed m;
	double age;
	size_t got, i, n;
	int ret = -ENOENT;

	memset(out, 0, sizeof(*out));
	*at = NULL;
	if (!gw->md ||
	    nodes_md_get_one(gw->md, dir->nodeid, MD_LISTED, 0, &r) ||
	    r.len != sizeof(m) || (!offline && r.fetched_ns >= gw->md_epoch))
		return -ENOENT;
	memcpy(&m, r.blob, sizeof(m));
	/* The count comes from a file: one that no listing kept could have
	 * (damage) is refused before it sizes anything. */
	if (m.n > MD_LIST_MAX)
		return -ENOENT;
	age = md_age_of(r.fetched_ns, now);
	if (!offline && (age < 0 || age >= dir_ttl(gw, dir) ||
			 (ver && !listed_is(&m, ver))))
		return -ENOENT;
	/* Names kept; offline, names made through the gateway since count
	 * too. */
	n = (size_t)m.n + (offline ? 256 : 0);
	dents = malloc((n + 1) * sizeof(*dents));
	out->ents = calloc(n + 2, sizeof(*out->ents));
	fetched = calloc(n + 2, sizeof(*fetched));
	if (!dents || !out->ents || !fetched)
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
		    !md_unpack_attr(&ar, &de->attr))
			goto fail;
		aage = md_age_of(ar.fetched_ns, now);
		if (!offline && (aage < 0 ||
				 aage >= gw_attr_ttl(gw, &de->attr)))
			goto fail;
		/* A clock that went back: as old as can be (offline). */
		md_mono_minus(aage < 0 ? 1e9 : aage, &fetched[out->n], NULL);
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
	*at = fetched;
	fetched = NULL;
	ret = 0;
fail:
	free(dents);
	free(fetched);
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
