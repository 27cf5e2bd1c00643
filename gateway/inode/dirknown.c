/* dirknown.c - directories whose every name the gateway knows, so that a
 * LOOKUP of a name not among them is answered ENOENT without the origin.
 *
 * The kernel sends a LOOKUP before each file it creates (FUSE passes no
 * create intent), and in a directory being filled (an untar) each costs a
 * round trip to answer what the gateway already knows. It knows a
 * directory whole when it made it itself (MKDIR: empty then) and every
 * change since came through it with an unbroken chain of the directory's
 * wcc: each CREATE, MKDIR, SYMLINK or MKNOD reply's pre-operation
 * attributes of the directory are the post-operation ones of the last
 * (nobody else changed it in between). The names are kept as 64-bit
 * hashes: a collision only sends a LOOKUP to the origin.
 *
 * The knowledge ends at any break: a reply without the directory's wcc
 * or whose pre-op attributes are not the last post-op ones, a change that
 * failed (EEXIST: someone else made the name), a change whose reply does
 * not say (REMOVE, RENAME, SETATTR: gw_inode_invalidate_attr), attributes
 * of the directory from anywhere (GETATTR, a listing) that are not the
 * last post-op ones, and the end of the directory's attribute lifetime
 * (gw_attr_ttl: acdirmin up to acdirmax). So a name another client makes
 * there is seen at the latest when the directory's attributes would be
 * asked again, as the Linux NFS client's negative dentries (lookupcache=
 * all) are trusted while the directory's attributes are: doc/how-it-works.md.
 * Only a caller who made a name there is answered (its CREATE showed the
 * origin let it search the directory, at a version the chain covers; the
 * maker of the directory, if its mode lets it search it).
 *
 * Locks: ino->lock (a leaf here).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "inode_i.h"

#define DIRKNOWN_MAX (1u << 20)		/* names; more: forgotten */
#define DIRKNOWN_CREDS 4

struct gw_dirknown {
	struct nfsc_attr post;		/* the directory after the last change */
	struct timespec since;		/* when the MKDIR was answered: the
					 * knowledge lasts one attribute
					 * lifetime from then, however many
					 * changes of ours follow (each
					 * refreshes dir->attr_at) */
	unsigned ncred;
	struct { uint32_t uid, gid; uint64_t groups; } cred[DIRKNOWN_CREDS];
	size_t n, cap;			/* cap: a power of 2, at least 2n */
	uint64_t *keys;			/* hashes of the names, open
					 * addressing (0: a free slot) */
};

static uint64_t name_key(const char *name)
{
	uint64_t k = XXH3_64bits(name, strlen(name));

	return k ? k : 1;
}

/* The slot of key in keys[cap], or the free one where it would go. */
static size_t slot_of(const uint64_t *keys, size_t cap, uint64_t key)
{
	size_t i = (size_t)key & (cap - 1);

	while (keys[i] && keys[i] != key)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Double k's table; false: no memory. */
static bool grow(struct gw_dirknown *k)
{
	size_t cap = k->cap ? k->cap * 2 : 32, i;
	uint64_t *keys = calloc(cap, sizeof(*keys));

	if (!keys)
		return false;
	for (i = 0; i < k->cap; i++)
		if (k->keys[i])
			keys[slot_of(keys, cap, k->keys[i])] = k->keys[i];
	free(k->keys);
	k->keys = keys;
	k->cap = cap;
	return true;
}

static uint64_t groups_key(const struct nfsc_cred *cr)
{
	uint32_t n = cr->ngroups < NFSC_NGROUPS_MAX ? cr->ngroups :
		     NFSC_NGROUPS_MAX;

	return XXH3_64bits(cr->groups, n * sizeof(cr->groups[0])) ^ n;
}

void gw_dirknown_free(struct gw_dirknown *k)
{
	if (k) {
		free(k->keys);
		free(k);
	}
}

/* ino->lock held. */
static void forget_locked(struct gw_inode *ino)
{
	gw_dirknown_free(ino->known);
	ino->known = NULL;
}

void gw_dirknown_forget(struct gw_inode *dir)
{
	GW_ASSERT_NOT_HELD(&dir->lock);
	pthread_mutex_lock(&dir->lock);
	forget_locked(dir);
	pthread_mutex_unlock(&dir->lock);
}

static void note_cred(struct gw_dirknown *k, const struct nfsc_cred *cr)
{
	uint64_t g = groups_key(cr);
	unsigned i;

	for (i = 0; i < k->ncred; i++)
		if (k->cred[i].uid == cr->uid && k->cred[i].gid == cr->gid &&
		    k->cred[i].groups == g)
			return;
	if (k->ncred == DIRKNOWN_CREDS)
		return;
	k->cred[k->ncred].uid = cr->uid;
	k->cred[k->ncred].gid = cr->gid;
	k->cred[k->ncred].groups = g;
	k->ncred++;
}

/* May cr search a directory it just made, with attributes a, as its mode
 * says? (Root, squashed or not, as its owner: the origin made it the
 * owner.) Else the origin would refuse a LOOKUP there (EACCES), which an
 * answer of ENOENT must not hide. */
static bool maker_may_search(const struct nfsc_attr *a,
			     const struct nfsc_cred *cr)
{
	uint32_t i;

	if (cr->uid == a->uid || cr->uid == 0)
		return a->mode & 0100;
	if (cr->gid == a->gid)
		return a->mode & 0010;
	for (i = 0; i < cr->ngroups && i < NFSC_NGROUPS_MAX; i++)
		if (cr->groups[i] == a->gid)
			return a->mode & 0010;
	return a->mode & 0001;
}

void gw_dirknown_made(struct gw_inode *dir, const struct nfsc_attr *a,
		      const struct nfsc_cred *cr)
{
	struct gw_dirknown *k;

	if (a->type != NFSC_DIR || !maker_may_search(a, cr))
		return;
	k = calloc(1, sizeof(*k));
	if (!k) {
		free(k);
		return;
	}
	k->post = *a;
	clock_gettime(CLOCK_MONOTONIC, &k->since);
	note_cred(k, cr);
	GW_ASSERT_NOT_HELD(&dir->lock);
	pthread_mutex_lock(&dir->lock);
	forget_locked(dir);
	dir->known = k;
	pthread_mutex_unlock(&dir->lock);
}

void gw_dirknown_added(struct gw_inode *dir, const char *name,
		       const struct nfsc_post *wcc, const struct nfsc_cred *cr)
{
	uint64_t key = name_key(name);
	struct gw_dirknown *k;
	size_t i;

	GW_ASSERT_NOT_HELD(&dir->lock);
	pthread_mutex_lock(&dir->lock);
	/* The directory's attributes after the change (as
	 * gw_inode_set_attr_if_newer), under the same lock as what is known
	 * of its names: a LOOKUP meanwhile finds both of one version. */
	if (wcc->has_attr &&
	    (!dir->attr_valid || !gw_attr_newer(&dir->attr, &wcc->attr))) {
		dir->attr = wcc->attr;
		clock_gettime(CLOCK_MONOTONIC, &dir->attr_at);
		dir->attr_valid = true;
		dir->attr_gen++;
	}
	k = dir->known;
	if (!k)
		goto out;
	if (!wcc->has_attr || !wcc->has_pre ||
	    !gw_version_eq(wcc->pre.size, &wcc->pre.mtime, &wcc->pre.ctime,
			   k->post.size, &k->post.mtime, &k->post.ctime) ||
	    k->n == DIRKNOWN_MAX) {
		forget_locked(dir);
		goto out;
	}
	if (2 * (k->n + 1) > k->cap && !grow(k)) {
		forget_locked(dir);
		goto out;
	}
	i = slot_of(k->keys, k->cap, key);
	if (!k->keys[i]) {
		k->keys[i] = key;
		k->n++;
	}
	k->post = wcc->attr;
	note_cred(k, cr);
out:
	pthread_mutex_unlock(&dir->lock);
}

bool gw_dirknown_absent(struct gw *gw, struct gw_inode *dir,
			const char *name, const struct nfsc_cred *cr)
{
	uint64_t key = name_key(name), g = groups_key(cr);
	struct gw_dirknown *k;
	bool absent = false;
	unsigned i;

	GW_ASSERT_NOT_HELD(&dir->lock);
	pthread_mutex_lock(&dir->lock);
	k = dir->known;
	if (!k)
		goto out;
	/* The directory's attributes as the gateway holds them must be
	 * the last change's and within their lifetime. */
	if (!dir->attr_valid || !gw_attr_same_version(&dir->attr, &k->post) ||
	    gw_elapsed_since(&dir->attr_at) >= gw_attr_ttl(gw, &dir->attr) ||
	    gw_elapsed_since(&k->since) >= gw_attr_ttl(gw, &dir->attr)) {
		forget_locked(dir);
		goto out;
	}
	for (i = 0; i < k->ncred; i++)
		if (k->cred[i].uid == cr->uid && k->cred[i].gid == cr->gid &&
		    k->cred[i].groups == g)
			break;
	if (i == k->ncred)
		goto out;
	absent = !k->cap || !k->keys[slot_of(k->keys, k->cap, key)];
out:
	pthread_mutex_unlock(&dir->lock);
	return absent;
}
