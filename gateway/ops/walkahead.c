/* walkahead.c - a walk's next subdirectories listed ahead of it
 * (walk_ahead=N).
 *
 * A walk (find, du, rsync, a re-export client's recursive listing) reads
 * a directory, then opens its subdirectories one after the other in the
 * order the listing gave them, and each open waits for the origin's
 * READDIRPLUS and, in a fleet, for the store to commit the new names
 * (doc/fleet.md): a round trip and a WAL flush per directory, one after
 * the other. Like a sequential reader's readahead, once a caller has
 * opened two subdirectories of one directory that follow each other in
 * its listing, the next N subdirectories of that listing are read by walk
 * threads while the walk works: each the same snapshot an open would
 * make (listing.c, snap_get: the names committed in the store before the
 * snapshot is done; concurrent ones share the store's group commit), left
 * lingering for the walk's open. That open takes it as a young snapshot
 * and its first read checks the directory's version (the GETATTR every
 * open makes): a directory changed since its parent was listed is read
 * again, as it would have been.
 *
 * What it must not cost: a walk that does not descend (ls of a directory)
 * or descends elsewhere (ls -R sorts by name, not in the listing's order)
 * never triggers it; a walk that stops early leaves at most N listings
 * read for nothing. A listing of the caller's there already (lingering or
 * being read) is not read again, and one the walk has passed is dropped
 * from the queue. Memory: the listings read ahead and not taken yet hold
 * BUDGET entries at most (they are dropped from the kept listings after
 * every other, listing.c), and a directory the origin calls big is left
 * to the walk's own open.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw_state.h"
#include "inode_i.h"
#include "nodes.h"
#include "ops_i.h"

#define WALKS 8		/* walks followed at once (directory, caller) */
#define QUEUE_MAX 64	/* listings waiting for a walk thread */
#define SCAN_MAX 65536	/* entries searched for a subdirectory opened out
			 * of order */
#define BUDGET 65536	/* entries of the listings read ahead and not
			 * taken yet, at most (about 20 MiB) */
#define DIR_SIZE_MAX (1u << 20)	/* a directory the origin says is bigger
				 * (tens of thousands of names) is left to
				 * the walk's own open */

/* One walk through one directory's subdirectories. */
struct walk {
	uint64_t dir;			/* 0: a free slot */
	struct nfsc_cred cr;
	uint64_t child;			/* the subdirectory opened last */
	struct nfsc_fh child_fh;
	size_t at;			/* its index in dir's listing;
					 * SIZE_MAX: not looked for yet */
	size_t queued_to;		/* entries before it were queued */
	unsigned run;			/* opened in the listing's order in
					 * a row */
	uint64_t used;			/* walk_clock when last opened */
};

struct walk_job {
	struct walk_job *next;
	uint64_t dir;			/* the walk's directory ... */
	struct nfsc_cred cr;		/* ... and caller */
	size_t idx;			/* in dir's listing */
	struct nfsc_fh fh;		/* the subdirectory */
	struct nfsc_attr ver;		/* its attributes in dir's listing */
};

static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t walk_cond = PTHREAD_COND_INITIALIZER;
static struct walk walks[WALKS];	/* walk_lock */
static uint64_t walk_clock;		/* walk_lock */
static struct walk_job *jobs;		/* walk_lock; FIFO */
static struct walk_job **jobs_tail = &jobs;
static unsigned njobs;			/* walk_lock */
static pthread_t *threads;		/* walk_lock; nthreads of them */
static unsigned nthreads;
static bool stopping;			/* walk_lock */

static bool same_cred(const struct nfsc_cred *a, const struct nfsc_cred *b)
{
	return a->uid == b->uid && a->gid == b->gid &&
	       a->ngroups == b->ngroups &&
	       !memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0]));
}

static bool same_fh(const struct nfsc_fh *a, const struct nfsc_fh *b)
{
	return a->len == b->len && !memcmp(a->data, b->data, a->len);
}

static bool is_subdir(const struct nfsc_dirent *de)
{
	return de->has_fh && de->has_attr && de->attr.type == NFSC_DIR &&
	       strcmp(de->name, ".") && strcmp(de->name, "..");
}

/* What gw_walk_opened looks for in the directory's listing. */
struct walk_scan {
	struct walk *w;			/* in: the walk (walk_lock held) */
	const struct nfsc_fh *fh;	/* in: the subdirectory opened now */
	unsigned n;			/* in: walk_ahead */
	size_t at;			/* out: its index (SIZE_MAX: none) */
	bool next;			/* out: the one after w->child */
	struct walk_job *got;		/* out: what to read ahead */
};

/* Index of fh in l, searched from `from` on (cyclically), SIZE_MAX if
 * not within SCAN_MAX entries. */
static size_t find_fh(const struct nfsc_dirlist *l, const struct nfsc_fh *fh,
		      size_t from)
{
	size_t k, i;

	if (!l->n)
		return SIZE_MAX;
	from = from >= l->n ? 0 : from;
	for (k = 0; k < l->n && k < SCAN_MAX; k++) {
		i = (from + k) % l->n;
		if (l->ents[i].has_fh && same_fh(&l->ents[i].fh, fh))
			return i;
	}
	return SIZE_MAX;
}

static void scan(const struct nfsc_dirlist *l, void *arg)
{
	struct walk_scan *s = arg;
	struct walk *w = s->w;
	struct walk_job **tail = &s->got;
	size_t i, prev = w->at;
	unsigned k;

	/* 1. Where the previous subdirectory is, and whether this one is
	 * the next subdirectory after it. */
	if (prev == SIZE_MAX || prev >= l->n || !l->ents[prev].has_fh ||
	    !same_fh(&l->ents[prev].fh, &w->child_fh))
		prev = find_fh(l, &w->child_fh, 0);
	s->at = SIZE_MAX;
	if (prev != SIZE_MAX) {
		for (i = prev + 1; i < l->n && !is_subdir(&l->ents[i]); i++)
			;
		if (i < l->n && same_fh(&l->ents[i].fh, s->fh)) {
			s->at = i;
			s->next = true;
		}
	}
	if (s->at == SIZE_MAX)
		s->at = find_fh(l, s->fh, prev == SIZE_MAX ? 0 : prev + 1);
	if (s->at == SIZE_MAX || !s->next || w->run + 1 < 2)
		return;
	/* 2. In a walk: the next n subdirectories, those not queued yet. */
	for (i = s->at + 1, k = 0; i < l->n && k < s->n; i++) {
		struct walk_job *j;

		if (!is_subdir(&l->ents[i]))
			continue;
		k++;
		if (i < w->queued_to || l->ents[i].attr.size > DIR_SIZE_MAX)
			continue;
		j = calloc(1, sizeof(*j));
		if (!j)
			break;
		j->dir = w->dir;
		j->cr = w->cr;
		j->idx = i;
		j->fh = l->ents[i].fh;
		j->ver = l->ents[i].attr;
		*tail = j;
		tail = &j->next;
		w->queued_to = i + 1;
	}
}

/* The walk of (dir, cr), or a slot for it: a free one, or the one not
 * opened for the longest. */
static struct walk *walk_find_locked(uint64_t dir, const struct nfsc_cred *cr,
				     bool *found)
{
	struct walk *w, *old = &walks[0];

	GW_ASSERT_HELD(&walk_lock);
	for (w = walks; w < walks + WALKS; w++) {
		if (w->dir == dir && same_cred(&w->cr, cr)) {
			*found = true;
			return w;
		}
		if (!w->dir || (old->dir && w->used < old->used))
			old = w;
	}
	*found = false;
	return old;
}

/* Is the job's subdirectory still ahead of its walk? */
static bool still_ahead(const struct walk_job *j)
{
	bool found, ahead;
	struct walk *w;

	pthread_mutex_lock(&walk_lock);
	w = walk_find_locked(j->dir, &j->cr, &found);
	ahead = !stopping && (!found || w->at == SIZE_MAX || w->at < j->idx);
	pthread_mutex_unlock(&walk_lock);
	return ahead;
}

static void walk_read(struct gw *gw, const struct walk_job *j)
{
	struct gw_inode *ino;
	uint64_t id;

	if (!still_ahead(j))
		return;
	/* The kernel holds it (the parent's listing gave it): a reference
	 * keeps it while it is read. Or the kernel let it go (its caches
	 * shrunk under memory pressure: the walk's open will look it up
	 * again): brought back from the node-id table for the read, under
	 * the node-id the listing is kept by. */
	ino = gw_inode_ref_fh(gw, &j->fh);
	if (!ino && gw->nodes &&
	    !nodes_find(gw->nodes, j->fh.data, j->fh.len, &id, NULL))
		ino = gw_inode_resolve(gw, id);
	if (!ino)
		return;
	if (gw_listing_ahead(gw, ino, &j->cr, &j->ver, BUDGET) > 0)
		__atomic_add_fetch(&gw->walk_ahead_listings, 1,
				   __ATOMIC_RELAXED);
	gw_inode_forget(gw, ino->nodeid, 1);
}

static void *walk_thread(void *arg)
{
	struct gw *gw = arg;
	struct walk_job *j;

	pthread_mutex_lock(&walk_lock);
	for (;;) {
		while (!jobs && !stopping)
			pthread_cond_wait(&walk_cond, &walk_lock);
		if (stopping)
			break;
		j = jobs;
		jobs = j->next;
		if (!jobs)
			jobs_tail = &jobs;
		njobs--;
		pthread_mutex_unlock(&walk_lock);
		walk_read(gw, j);
		free(j);
		pthread_mutex_lock(&walk_lock);
	}
	pthread_mutex_unlock(&walk_lock);
	return NULL;
}

/* The walk threads, the first time there is work for them; signals
 * blocked (they are the FUSE workers' to take, and the main thread's). */
static void threads_start_locked(struct gw *gw, unsigned n)
{
	sigset_t all, old;
	unsigned i;

	GW_ASSERT_HELD(&walk_lock);
	if (threads || stopping)
		return;
	threads = calloc(n, sizeof(*threads));
	if (!threads)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < n; i++)
		if (pthread_create(&threads[i], NULL, walk_thread, gw))
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	nthreads = i;
	if (!i) {
		free(threads);
		threads = NULL;
		gw_log("walk_ahead: cannot start a thread: not listing ahead");
	}
}

void gw_walk_opened(struct gw *gw, struct gw_inode *ino,
		    const struct nfsc_cred *cr)
{
	struct walk_scan s = { .fh = &ino->fh, .n = gw->o->walk_ahead };
	struct walk_job *j, *next;
	uint64_t dir;
	bool found;
	struct walk *w;

	if (!s.n || ino->nodeid == FUSE_ROOT_ID)
		return;
	dir = gw_inode_parent(gw, ino);
	pthread_mutex_lock(&walk_lock);
	if (stopping)
		goto out;
	w = walk_find_locked(dir, cr, &found);
	w->used = ++walk_clock;
	if (!found || w->child == ino->nodeid) {
		/* The first subdirectory opened, or the same again (knfsd
		 * opens a directory for every READDIR of a client). */
		if (!found) {
			memset(w, 0, sizeof(*w));
			w->dir = dir;
			w->cr = *cr;
			w->used = walk_clock;
			w->at = SIZE_MAX;
			w->child = ino->nodeid;
			w->child_fh = ino->fh;
			w->run = 1;
		}
		goto out;
	}
	s.w = w;
	if (gw_listing_with(dir, cr, scan, &s)) {
		/* dir's listing is gone (or was never read for cr): no
		 * walk to follow. */
		s.at = SIZE_MAX;
		s.next = false;
	}
	w->child = ino->nodeid;
	w->child_fh = ino->fh;
	w->at = s.at;
	w->run = s.next ? w->run + 1 : 1;
	if (!s.next)
		w->queued_to = 0;
	if (s.got)
		threads_start_locked(gw, s.n);
	for (j = s.got; j; j = next) {
		next = j->next;
		if (!threads || njobs >= QUEUE_MAX) {
			free(j);
			continue;
		}
		j->next = NULL;
		*jobs_tail = j;
		jobs_tail = &j->next;
		njobs++;
	}
	if (s.got)
		pthread_cond_broadcast(&walk_cond);
out:
	pthread_mutex_unlock(&walk_lock);
}

void gw_walk_stop(void)
{
	struct walk_job *j;
	pthread_t *t;
	unsigned i, n;

	pthread_mutex_lock(&walk_lock);
	stopping = true;
	pthread_cond_broadcast(&walk_cond);
	t = threads;
	n = nthreads;
	threads = NULL;
	nthreads = 0;
	pthread_mutex_unlock(&walk_lock);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	pthread_mutex_lock(&walk_lock);
	while ((j = jobs)) {
		jobs = j->next;
		free(j);
	}
	jobs_tail = &jobs;
	njobs = 0;
	pthread_mutex_unlock(&walk_lock);
}
