/* inode.c - the inode table: FUSE node-id <-> origin file handle.
 *
 * Two chained hash tables over the same inodes, one keyed by node-id (what
 * the kernel sends) and one by origin file handle (what LOOKUP/READDIRPLUS
 * return), so one origin file is one inode. Node-ids come from the cache's
 * persistent node-id table (nodes_*): never reused, and the same
 * origin handle gets the same node-id in every run, so handles a
 * re-exporter gave its clients keep working after a restart. An inode lives
 * in memory while the kernel holds lookup references to it (nlookup); the
 * root lives forever. A node-id the kernel asks about after forgetting it
 * (a re-exporter's file handle) is brought back from the table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "cache.h"
#include "inode_i.h"
#include "keep_i.h"

#define ITABLE_MIN_BUCKETS 1024

static size_t fh_hash(const struct nfsc_fh *fh, size_t nb)
{
	return (size_t)XXH3_64bits(fh->data, fh->len) & (nb - 1);
}

static size_t id_hash(uint64_t nodeid, size_t nb)
{
	/* Node-ids are sequential: a multiplicative mix spreads them. */
	return (size_t)((nodeid * 0x9E3779B97F4A7C15ull) >> 17) & (nb - 1);
}

static bool fh_equal(const struct nfsc_fh *a, const struct nfsc_fh *b)
{
	return a->len == b->len && !memcmp(a->data, b->data, a->len);
}

static struct gw_inode *inode_new(struct gw *gw, const struct nfsc_fh *fh,
				  uint64_t nodeid)
{
	struct gw_inode *ino = calloc(1, sizeof(*ino));

	if (!ino)
		return NULL;
	ino->nodeid = nodeid;
	ino->fh = *fh;
	pthread_mutex_init(&ino->lock, NULL);
	pthread_mutex_init(&ino->coh_lock, NULL);
	pthread_cond_init(&ino->fetch_cond, NULL);
	if (gw)
		gw_md_attach(gw, ino);	/* not yet shared */
	return ino;
}

static void insert_locked(struct gw_itable *t, struct gw_inode *ino)
{
	size_t hi = id_hash(ino->nodeid, t->nbuckets);
	size_t hf = fh_hash(&ino->fh, t->nbuckets);

	GW_ASSERT_HELD(&t->lock);
	ino->next_id = t->by_id[hi];
	t->by_id[hi] = ino;
	ino->next_fh = t->by_fh[hf];
	t->by_fh[hf] = ino;
	t->count++;
}

/* Double the bucket arrays when the table gets crowded; on allocation
 * failure keep the old ones (longer chains, still correct). */
static void grow_locked(struct gw_itable *t)
{
	size_t nb = t->nbuckets * 2, i;
	struct gw_inode **by_id = calloc(nb, sizeof(*by_id));
	struct gw_inode **by_fh = calloc(nb, sizeof(*by_fh));
	struct gw_inode *ino, *next;

	GW_ASSERT_HELD(&t->lock);
	if (!by_id || !by_fh) {
		free(by_id);
		free(by_fh);
		return;
	}
	for (i = 0; i < t->nbuckets; i++) {
		for (ino = t->by_id[i]; ino; ino = next) {
			size_t hi = id_hash(ino->nodeid, nb);
			size_t hf = fh_hash(&ino->fh, nb);

			next = ino->next_id;
			ino->next_id = by_id[hi];
			by_id[hi] = ino;
			ino->next_fh = by_fh[hf];
			by_fh[hf] = ino;
		}
	}
	free(t->by_id);
	free(t->by_fh);
	t->by_id = by_id;
	t->by_fh = by_fh;
	t->nbuckets = nb;
}

int gw_itable_init(struct gw_itable *t, const struct nfsc_fh *rootfh)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->nbuckets = ITABLE_MIN_BUCKETS;
	t->by_id = calloc(t->nbuckets, sizeof(*t->by_id));
	t->by_fh = calloc(t->nbuckets, sizeof(*t->by_fh));
	t->root = inode_new(NULL, rootfh, FUSE_ROOT_ID);
	if (!t->by_id || !t->by_fh || !t->root) {
		free(t->by_id);
		free(t->by_fh);
		free(t->root);
		return -ENOMEM;
	}
	t->root->nlookup = 1;	/* the kernel never forgets the root */
	t->root->parent = FUSE_ROOT_ID;
	pthread_mutex_lock(&t->lock);	/* alone yet; for the assert */
	insert_locked(t, t->root);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static void inode_free(struct gw *gw, struct gw_inode *ino)
{
	gw_md_keep_inode(gw, ino);	/* for the next start */
	if (gw->it.evict)	/* waits for READs that fill ino->obj */
		gw->it.evict(gw, ino);
	if (ino->obj)
		cache_obj_put(ino->obj);
	free(ino->name);
	gw_dirknown_free(ino->known);
	pthread_cond_destroy(&ino->fetch_cond);
	pthread_mutex_destroy(&ino->coh_lock);
	pthread_mutex_destroy(&ino->lock);
	free(ino);
}

void gw_itable_free(struct gw *gw)
{
	struct gw_itable *t = &gw->it;
	struct gw_inode *ino, *next;
	size_t i;

	for (i = 0; t->by_id && i < t->nbuckets; i++) {
		for (ino = t->by_id[i]; ino; ino = next) {
			next = ino->next_id;
			inode_free(gw, ino);
		}
	}
	free(t->by_id);
	free(t->by_fh);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

static struct gw_inode *find_id_locked(struct gw_itable *t, uint64_t nodeid)
{
	struct gw_inode *ino;

	GW_ASSERT_HELD(&t->lock);
	ino = t->by_id[id_hash(nodeid, t->nbuckets)];
	while (ino && ino->nodeid != nodeid)
		ino = ino->next_id;
	return ino;
}

static struct gw_inode *find_fh_locked(struct gw_itable *t,
				       const struct nfsc_fh *fh)
{
	struct gw_inode *ino;

	GW_ASSERT_HELD(&t->lock);
	ino = t->by_fh[fh_hash(fh, t->nbuckets)];
	while (ino && !fh_equal(&ino->fh, fh))
		ino = ino->next_fh;
	return ino;
}

struct gw_inode *gw_inode_find(struct gw *gw, uint64_t nodeid)
{
	struct gw_inode *ino;

	pthread_mutex_lock(&gw->it.lock);
	ino = find_id_locked(&gw->it, nodeid);
	pthread_mutex_unlock(&gw->it.lock);
	return ino;
}

/* A new inode (not in the table) for a node-id of the node-id table (or
 * of the fleet store's). NULL with errno: ESTALE if neither has it, the
 * store's error if it could not be asked (EIO; ETIMEDOUT or EINTR when
 * the request waiting for it was interrupted: not the handle's fault). */
static struct gw_inode *inode_from_table(struct gw *gw, uint64_t nodeid)
{
	struct gw_inode *ino;
	struct nfsc_fh fh;
	uint64_t parent;
	uint32_t gen;
	size_t len = sizeof(fh.data);
	int ret;

	if (nodes_get(gw->nodes, nodeid, fh.data, &len, &parent, &gen) < 0) {
		ret = gw_fleet_bring(gw, nodeid);
		if (ret == -EIO || ret == -ETIMEDOUT || ret == -EINTR) {
			errno = -ret;
			return NULL;
		}
		len = sizeof(fh.data);
		if (ret || nodes_get(gw->nodes, nodeid, fh.data, &len, &parent,
				     &gen) < 0) {
			errno = ESTALE;
			return NULL;
		}
	}
	fh.len = (uint32_t)len;
	ino = inode_new(gw, &fh, nodeid);
	if (ino)
		ino->parent = parent;
	else
		errno = ENOMEM;
	return ino;
}

/* nodeid, not in memory, brought back from the node-id table: inserted
 * with one lookup (an earlier process's, of a count this one does not
 * know: adopted, when it is a successor); with ref, one more is taken, on
 * an inode found too. NULL (errno ESTALE) if the table does not have it,
 * or if its handle is in memory under another node-id (a second inode of
 * one handle would split the file's state); errno otherwise as
 * inode_from_table's. */
static struct gw_inode *inode_bring_back(struct gw *gw, uint64_t nodeid,
					 bool ref)
{
	struct gw_itable *t = &gw->it;
	struct gw_inode *ino, *fresh = inode_from_table(gw, nodeid);

	if (!fresh)
		return NULL;
	pthread_mutex_lock(&t->lock);
	ino = find_id_locked(t, nodeid);
	if (!ino && !find_fh_locked(t, &fresh->fh)) {
		if (t->count >= t->nbuckets)
			grow_locked(t);
		fresh->adopted = gw->successor;	/* as in gw_inode_ref */
		insert_locked(t, fresh);
		ino = fresh;
		fresh = NULL;
		if (!ref)
			ino->nlookup = 1;
	}
	if (ino && ref)
		ino->nlookup++;
	pthread_mutex_unlock(&t->lock);
	if (fresh)
		inode_free(gw, fresh);
	if (!ino)
		errno = ESTALE;
	return ino;
}

struct gw_inode *gw_inode_get(struct gw *gw, uint64_t nodeid)
{
	struct gw_inode *ino = gw_inode_find(gw, nodeid);

	if (ino || !gw->successor)
		return ino;
	return inode_bring_back(gw, nodeid, false);
}

/* gw_inode_ref but for the attributes, which are the caller's to set. */
static struct gw_inode *inode_ref(struct gw *gw, const struct nfsc_fh *fh,
				  const struct nfsc_attr *attr,
				  uint64_t parent)
{
	struct gw_itable *t = &gw->it;
	struct gw_inode *ino;
	bool moved = false;
	int fret;

	/* A fleet's node-id comes from its store, asked without the table
	 * lock (a name the node-id table knows asks nothing). */
	if (gw->fleet && (fret = gw_fleet_name(gw, fh, parent)) < 0) {
		errno = -fret;
		return NULL;
	}
	pthread_mutex_lock(&t->lock);
	ino = find_fh_locked(t, fh);
	if (!ino) {
		uint64_t nodeid;
		uint32_t gen;
		int ret;

		/* Written to the table before the kernel ever sees it. A
		 * table that cannot write says why (EIO, ENOSPC): that is
		 * what the caller replies, not ENOMEM. */
		ret = nodes_add(gw->nodes, fh->data, fh->len, parent,
				      &nodeid, &gen);
		if (ret == 1)
			gw_reclaim_note_add(gw, 1);
		if (ret >= 0 && !(ino = inode_new(gw, fh, nodeid)))
			ret = -ENOMEM;
		if (ret < 0) {
			pthread_mutex_unlock(&t->lock);
			errno = -ret;
			return NULL;
		}
		ino->parent = parent;
		/* A node-id made before this process took over: the kernel
		 * may hold lookups of it counted by an earlier process. */
		ino->adopted = gw->successor && ret == 0;
		if (t->count >= t->nbuckets)
			grow_locked(t);
		insert_locked(t, ino);
	} else if (parent && ino != t->root && ino->parent != parent &&
		   attr && attr->type == NFSC_DIR) {
		/* A directory moved: ".." must follow it. */
		ino->parent = parent;
		nodes_set_parent(gw->nodes, ino->nodeid, parent);
		moved = true;
	}
	ino->nlookup++;
	pthread_mutex_unlock(&t->lock);
	/* The fleet's other gateways answer ".." from the store. */
	if (moved)
		gw_fleet_set_parent(gw, ino->nodeid, parent);
	return ino;
}

struct gw_inode *gw_inode_ref(struct gw *gw, const struct nfsc_fh *fh,
			      const struct nfsc_attr *attr, uint64_t parent)
{
	struct gw_inode *ino = inode_ref(gw, fh, attr, parent);

	if (ino && attr)
		gw_inode_set_attr_if_newer(ino, attr);
	return ino;
}

static bool ts_after(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec :
					a->tv_nsec > b->tv_nsec;
}

struct gw_inode *gw_inode_ref_kept(struct gw *gw, const struct nfsc_fh *fh,
				   const struct nfsc_attr *attr,
				   uint64_t parent, const struct timespec *at)
{
	struct gw_inode *ino = inode_ref(gw, fh, attr, parent);

	if (!ino)
		return NULL;
	/* Stamped now, attributes of any age would look fresh for a whole
	 * timeout (offline, the origin back meanwhile): they keep their
	 * fetch time, and what the inode got since stands. */
	pthread_mutex_lock(&ino->lock);
	if (!ino->attr_valid || (ts_after(at, &ino->attr_at) &&
				 !gw_attr_newer(&ino->attr, attr))) {
		ino->attr = *attr;
		ino->attr_at = *at;
		ino->attr_valid = true;
		ino->attr_gen++;
	}
	pthread_mutex_unlock(&ino->lock);
	return ino;
}

struct gw_inode *gw_inode_ref_fh(struct gw *gw, const struct nfsc_fh *fh)
{
	struct gw_itable *t = &gw->it;
	struct gw_inode *ino;

	pthread_mutex_lock(&t->lock);
	ino = find_fh_locked(t, fh);
	if (ino)
		ino->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

static void unlink_locked(struct gw_itable *t, struct gw_inode *ino)
{
	struct gw_inode **pp;

	GW_ASSERT_HELD(&t->lock);
	for (pp = &t->by_id[id_hash(ino->nodeid, t->nbuckets)]; *pp;
	     pp = &(*pp)->next_id) {
		if (*pp == ino) {
			*pp = ino->next_id;
			break;
		}
	}
	for (pp = &t->by_fh[fh_hash(&ino->fh, t->nbuckets)]; *pp;
	     pp = &(*pp)->next_fh) {
		if (*pp == ino) {
			*pp = ino->next_fh;
			break;
		}
	}
	t->count--;
}

void gw_inode_forget(struct gw *gw, uint64_t nodeid, uint64_t n)
{
	struct gw_itable *t = &gw->it;
	struct gw_inode *ino;

	pthread_mutex_lock(&t->lock);
	ino = find_id_locked(t, nodeid);
	if (!ino || ino == t->root) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	/* The kernel forgets no more than it was given: more means a
	 * reference was lost or counted twice here, and the inode (maybe
	 * still in use by a request) would be freed early. Stop, in every
	 * build, rather than go on with the table wrong. */
	if (ino->nlookup < n && ino->adopted) {
		/* The kernel's count of an adopted inode was not known: a
		 * FORGET means it evicted the inode, whatever it held. */
		n = ino->nlookup;
	} else if (ino->nlookup < n) {
		gw_log("BUG: forget of %llu lookups of node-id %llu, which has "
		       "%llu", (unsigned long long)n,
		       (unsigned long long)nodeid,
		       (unsigned long long)ino->nlookup);
		abort();
	}
	ino->nlookup -= n;
	if (ino->nlookup == 0)
		unlink_locked(t, ino);
	else
		ino = NULL;
	pthread_mutex_unlock(&t->lock);
	if (ino)
		inode_free(gw, ino);
}

size_t gw_itable_count(struct gw *gw)
{
	size_t n;

	pthread_mutex_lock(&gw->it.lock);
	n = gw->it.count;
	pthread_mutex_unlock(&gw->it.lock);
	return n;
}

struct gw_inode *gw_inode_resolve(struct gw *gw, uint64_t nodeid)
{
	struct gw_itable *t = &gw->it;
	struct gw_inode *ino;

	/* The reference is taken under the table lock: the kernel may send
	 * the FORGET of an evicted inode while it looks the same node-id up
	 * again through a file handle, and without a reference that FORGET
	 * frees the inode under the caller. */
	pthread_mutex_lock(&t->lock);
	ino = find_id_locked(t, nodeid);
	if (ino)
		ino->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return ino ? ino : inode_bring_back(gw, nodeid, true);
}

uint64_t gw_inode_parent(struct gw *gw, struct gw_inode *ino)
{
	uint64_t parent;

	pthread_mutex_lock(&gw->it.lock);
	parent = ino->parent ? ino->parent : FUSE_ROOT_ID;
	pthread_mutex_unlock(&gw->it.lock);
	return parent;
}
