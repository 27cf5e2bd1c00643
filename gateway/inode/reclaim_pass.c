/* reclaim_pass.c - one reclaim pass: which node-ids of the table belong to
 * files gone at the origin (reclaim.c: when passes run).
 *
 * A pass walks the table and asks the origin about every entry the
 * kernel does not hold now (a GETATTR of its handle, as root,
 * GW_RECLAIM_INFLIGHT at a time).
 *
 * An entry is removed only when the origin has said twice, and in a
 * state that can be believed, that its file is gone. An origin answers
 * NFS3ERR_STALE for live files too, for a while: during a failover, or
 * while the file system of an export is not mounted yet (the export then
 * shows the empty directory below it). One such answer must not cost the
 * clients their handles. A pass:
 *   1. asks about the export's root first: it must answer, as the
 *      directory it was (fsid, fileid as at the first pass): else the
 *      origin is not serving the export it served, and the pass is
 *      aborted (nothing removed);
 *   2. walks the table; entries answering NFS3ERR_STALE are candidates;
 *   3. at least GW_RECLAIM_CONFIRM_MS after the first of those answers,
 *      asks about the root again (as 1), then each candidate again (a
 *      second answer) and the directories they were found in, up the
 *      table's parents until one answers: a candidate is gone when it
 *      answers STALE again and its nearest directory that is not STALE
 *      answers normally (the origin serves that part of the tree, and no
 *      longer knows the file). Any other answer keeps the entry;
 *   4. a file whose own directory (not the root) answers normally is
 *      vouched for by it. Many gone files with no such directory (more
 *      than half the pass's GETATTRs, at least GW_RECLAIM_SHARE_MIN) look
 *      like an origin that lost a file system below the root, more than
 *      like one big removal: the pass is aborted, and only when the origin
 *      has looked like that for GW_RECLAIM_PERSIST_S (aborted passes all
 *      the while; CACHEGW_INJECT_RECLAIM_PERSIST=S in tests) are they
 *      believed. A removal of a whole large tree is given back that much
 *      later.
 * An aborted pass is logged once (until a pass completes), counted, and
 * tried again by itself GW_RECLAIM_PERSIST_S later (when passes run by
 * themselves): one walk more, not one every few minutes, of a table that
 * may hold millions.
 *
 * A GETATTR that the kernel sends and that answers NFS3ERR_STALE removes
 * nothing (ops.c): the kernel holds that inode; once it lets go, a pass
 * decides.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "condwait.h"
#include "inode_i.h"
#include "keep_i.h"

#define GW_RECLAIM_BATCH 256		/* entries copied out at a time */
#define GW_RECLAIM_CONFIRM_MS 1000	/* second answer after the first */
#define GW_RECLAIM_SHARE_MIN 32		/* unvouched gone files before their
					 * share can abort a pass */
#define GW_RECLAIM_DEPTH 64		/* directories asked above a file */
#define GW_RECLAIM_CANDIDATES (1u << 20) /* per pass; the rest wait for the
					 * next */


/* ---- one pass ---- */

/* Verdicts of step 3, per node-id. */
enum { V_NONE, V_LIVE, V_GONE, V_UNKNOWN };

struct known {
	uint64_t id;			/* 0: a free slot */
	uint64_t parent;
	int status;			/* the GETATTR's, -ENOENT: not in the
					 * table (given back before) */
	int verdict;			/* V_*, memo of verdict() */
};

struct pass {
	struct gw *gw;
	struct reclaim_batch *b;
	struct gw_reclaim_result *res;
	uint64_t *cand;			/* entries that answered STALE */
	size_t ncand, candcap;
	struct timespec first_stale;	/* CLOCK_MONOTONIC */
	struct known *k;		/* open addressing on id */
	size_t ksize, kused;		/* ksize a power of 2 */
	int ret;			/* -EINTR once told to stop */
};

/* Say why a pass stopped short (once per run of them: the caller). */
static void why(struct pass *ps, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void why(struct pass *ps, const char *fmt, ...)
{
	va_list ap;

	ps->res->aborted = true;
	va_start(ap, fmt);
	vsnprintf(ps->res->why, sizeof(ps->res->why), fmt, ap);
	va_end(ap);
}

static size_t k_slot(const struct pass *ps, uint64_t id)
{
	size_t i = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) &
		   (ps->ksize - 1);

	while (ps->k[i].id && ps->k[i].id != id)
		i = (i + 1) & (ps->ksize - 1);
	return i;
}

static struct known *k_find(const struct pass *ps, uint64_t id)
{
	struct known *e;

	if (!ps->ksize)
		return NULL;
	e = &ps->k[k_slot(ps, id)];
	return e->id ? e : NULL;
}

/* Add (or update) id; -ENOMEM. */
static int k_put(struct pass *ps, uint64_t id, uint64_t parent, int status)
{
	struct known *e;

	if ((ps->kused + 1) * 2 > ps->ksize) {
		size_t n = ps->ksize ? ps->ksize * 2 : 1024;
		struct known *old = ps->k, *k = calloc(n, sizeof(*k));
		size_t oldsize = ps->ksize;

		if (!k)
			return -ENOMEM;
		ps->k = k;
		ps->ksize = n;
		for (size_t i = 0; i < oldsize; i++)
			if (old[i].id)
				ps->k[k_slot(ps, old[i].id)] = old[i];
		free(old);
	}
	e = &ps->k[k_slot(ps, id)];
	if (!e->id)
		ps->kused++;
	e->id = id;
	e->parent = parent;
	e->status = status;
	e->verdict = V_NONE;
	return 0;
}

/* Ask the origin about the root: 0 if it answers as the directory it
 * was (learnt at the first pass that reached it; a new identity is taken
 * once the old one has been missing for persist_s), else -EAGAIN and why.
 * -EINTR: told to stop. */
static int check_root(struct pass *ps)
{
	struct gw *gw = ps->gw;
	struct gw_reclaim *r = gw->reclaim;
	struct reclaim_probe *p = &ps->b->p[0];

	p->id = FUSE_ROOT_ID;
	p->fh = gw->it.root->fh;
	if (!reclaim_probe_all(gw, ps->b, 1))
		return -EINTR;
	if (p->status) {
		why(ps, "the origin's root answers %s", strerror(-p->status));
		return -EAGAIN;
	}
	if (p->attr.type != NFSC_DIR) {
		why(ps, "the origin's root is not a directory");
		return -EAGAIN;
	}
	if (r->root_known && (p->attr.fsid != r->root_fsid ||
			      p->attr.fileid != r->root_fileid)) {
		if (!r->trouble_since ||
		    gw_reclaim_now_s() - r->trouble_since < (time_t)r->persist_s) {
			why(ps, "the origin's root is another directory "
			    "(fsid %llx fileid %llu, was fsid %llx fileid "
			    "%llu)", (unsigned long long)p->attr.fsid,
			    (unsigned long long)p->attr.fileid,
			    (unsigned long long)r->root_fsid,
			    (unsigned long long)r->root_fileid);
			return -EAGAIN;
		}
		gw_log("node-id table: the origin's root has been fsid %llx "
		       "fileid %llu for %u s: taken as the export's root",
		       (unsigned long long)p->attr.fsid,
		       (unsigned long long)p->attr.fileid, r->persist_s);
	}
	r->root_known = true;
	r->root_fsid = p->attr.fsid;
	r->root_fileid = p->attr.fileid;
	return 0;
}

/* Step 2's answers: STALE ones become candidates. */
static void walk_settle(struct pass *ps, unsigned n)
{
	struct gw_reclaim *r = ps->gw->reclaim;
	const struct reclaim_probe *p = ps->b->p;

	for (unsigned i = 0; i < n; i++) {
		if (p[i].status == -ESTALE) {
			if (ps->ncand == ps->candcap) {
				size_t cap = ps->candcap ?
					     ps->candcap * 2 : 256;
				uint64_t *c = realloc(ps->cand,
						      cap * sizeof(*c));

				if (!c) {
					ps->res->errors++;
					continue;
				}
				ps->cand = c;
				ps->candcap = cap;
			}
			if (!ps->ncand)
				clock_gettime(CLOCK_MONOTONIC,
					      &ps->first_stale);
			ps->cand[ps->ncand++] = p[i].id;
		} else if (p[i].status < 0) {
			ps->res->errors++;	/* not known gone: kept */
		}
	}
	ps->res->probed += n;
	__atomic_add_fetch(&r->checked, n, __ATOMIC_RELAXED);
}

/* Step 2. */
static int walk(struct pass *ps)
{
	struct gw *gw = ps->gw;
	struct nodes_ent *ents = calloc(GW_RECLAIM_BATCH, sizeof(*ents));
	uint64_t cursor = 0;
	unsigned np = 0;
	size_t n;

	if (!ents)
		return -ENOMEM;
	while (!gw_reclaim_stopping(gw->reclaim) &&
	       ps->ncand < GW_RECLAIM_CANDIDATES &&
	       (n = nodes_list(gw->nodes, &cursor, ents,
			       GW_RECLAIM_BATCH)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct reclaim_probe *p = &ps->b->p[np];

			ps->res->checked++;
			/* Held by the kernel: it revalidates it itself. */
			if (gw_inode_find(gw, ents[i].id)) {
				ps->res->held++;
				continue;
			}
			p->id = ents[i].id;
			p->fh.len = ents[i].hlen;
			memcpy(p->fh.data, ents[i].h, ents[i].hlen);
			if (++np < GW_RECLAIM_INFLIGHT)
				continue;
			if (!reclaim_probe_all(gw, ps->b, np)) {
				free(ents);
				return -EINTR;
			}
			walk_settle(ps, np);
			np = 0;
		}
	}
	free(ents);
	if (np && !reclaim_probe_all(gw, ps->b, np))
		return -EINTR;
	walk_settle(ps, np);
	return gw_reclaim_stopping(gw->reclaim) ? -EINTR : 0;
}

/* GETATTR the node-ids ids[0..n) and note each answer (with its parent)
 * in ps->k; ids the table no longer has are noted -ENOENT. */
static int ask(struct pass *ps, const uint64_t *ids, size_t n)
{
	struct reclaim_batch *b = ps->b;
	uint64_t parents[GW_RECLAIM_INFLIGHT];
	unsigned np = 0;
	int ret;

	for (size_t i = 0; i <= n; i++) {
		if (i < n) {
			struct reclaim_probe *p = &b->p[np];
			size_t len = sizeof(p->fh.data);

			ret = nodes_get(ps->gw->nodes, ids[i], p->fh.data,
					&len, &parents[np], NULL);
			if (ret < 0) {
				if (k_put(ps, ids[i], 0, -ENOENT))
					return -ENOMEM;
				continue;
			}
			p->fh.len = (uint32_t)len;
			p->id = ids[i];
			if (++np < GW_RECLAIM_INFLIGHT)
				continue;
		}
		if (!np)
			continue;
		if (!reclaim_probe_all(ps->gw, b, np))
			return -EINTR;
		for (unsigned j = 0; j < np; j++)
			if (k_put(ps, b->p[j].id, parents[j], b->p[j].status))
				return -ENOMEM;
		np = 0;
	}
	return 0;
}

/* Is id's file there (V_LIVE), gone (V_GONE) or not known (V_UNKNOWN),
 * from the answers in ps->k: see step 3. */
static int verdict(struct pass *ps, uint64_t id, unsigned depth)
{
	struct known *e;
	int v;

	if (id == FUSE_ROOT_ID || id == 0)
		return V_LIVE;		/* answered as itself (check_root) */
	e = k_find(ps, id);
	if (!e || depth > GW_RECLAIM_DEPTH)
		return V_UNKNOWN;
	if (e->verdict != V_NONE)
		return e->verdict;
	if (e->status == 0)
		v = V_LIVE;
	else if (e->status == -ENOENT)
		v = V_GONE;		/* given back before: was gone */
	else if (e->status != -ESTALE)
		v = V_UNKNOWN;
	else
		v = verdict(ps, e->parent, depth + 1) == V_UNKNOWN ?
		    V_UNKNOWN : V_GONE;
	e->verdict = v;
	return v;
}

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Drop repeats from the sorted ids[0..n); the count left. */
static size_t uniq(uint64_t *ids, size_t n)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (!m || ids[m - 1] != ids[i])
			ids[m++] = ids[i];
	return m;
}

/* Steps 3 and 4. */
static int confirm(struct pass *ps)
{
	struct gw *gw = ps->gw;
	struct gw_reclaim *r = gw->reclaim;
	uint64_t *ask_ids = NULL;
	size_t unvouched = 0;
	struct timespec now;
	long waited;
	int ret;

	/* 3. A second answer, not at once. */
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		waited = (now.tv_sec - ps->first_stale.tv_sec) * 1000 +
			 (now.tv_nsec - ps->first_stale.tv_nsec) / 1000000;
		if (waited >= GW_RECLAIM_CONFIRM_MS)
			break;
		if (gw_reclaim_stopping(r))
			return -EINTR;
		pthread_mutex_lock(&r->lock);
		if (!r->stop)
			cond_wait_ms(&r->cond, &r->lock,
				     GW_RECLAIM_CONFIRM_MS - waited);
		pthread_mutex_unlock(&r->lock);
	}
	ret = check_root(ps);
	if (ret)
		return ret;
	ret = ask(ps, ps->cand, ps->ncand);
	/* Up the tree: the parents not asked yet of every STALE one, a
	 * level at a time. */
	for (unsigned level = 0; !ret && level < GW_RECLAIM_DEPTH; level++) {
		size_t n = 0;

		free(ask_ids);
		ask_ids = malloc(ps->kused * sizeof(*ask_ids));
		if (!ask_ids) {
			ret = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < ps->ksize; i++) {
			const struct known *e = &ps->k[i];

			if (e->id && e->status == -ESTALE &&
			    e->parent != FUSE_ROOT_ID && e->parent != 0 &&
			    !k_find(ps, e->parent))
				ask_ids[n++] = e->parent;
		}
		if (!n)
			break;
		qsort(ask_ids, n, sizeof(*ask_ids), id_cmp);
		n = uniq(ask_ids, n);
		ret = ask(ps, ask_ids, n);
	}
	free(ask_ids);
	if (ret)
		return ret;

	/* 4. Vouched for by their own directory, or many. */
	for (size_t i = 0; i < ps->ncand; i++) {
		const struct known *e = k_find(ps, ps->cand[i]), *d;

		if (!e || verdict(ps, e->id, 0) != V_GONE)
			continue;
		d = e->parent == FUSE_ROOT_ID ? NULL : k_find(ps, e->parent);
		if (!d || d->status != 0)
			unvouched++;
	}
	if (unvouched >= GW_RECLAIM_SHARE_MIN &&
	    unvouched * 2 > ps->res->probed &&
	    (!r->trouble_since ||
	     gw_reclaim_now_s() - r->trouble_since < (time_t)r->persist_s)) {
		why(ps, "%zu of %llu files asked about answer stale and so "
		    "do their directories (the origin may have lost a file "
		    "system)", unvouched,
		    (unsigned long long)ps->res->probed);
		return -EAGAIN;
	}

	for (size_t i = 0; i < ps->ncand; i++) {
		const struct known *e = k_find(ps, ps->cand[i]);

		if (!e || e->status == -ENOENT)
			continue;	/* gone from the table meanwhile */
		if (verdict(ps, e->id, 0) != V_GONE ||
		    gw_inode_find(gw, e->id)) {
			ps->res->kept++;
			continue;
		}
		ret = nodes_remove(gw->nodes, e->id);
		gw_md_forget(gw, e->id);
		if (ret == 0 || ret == -ENOENT)
			ps->res->reclaimed += ret == 0;
		else
			ps->res->errors++;
	}
	return 0;
}

/* After a pass: its outcome for the next ones, logged once per run of
 * aborted passes. */
static void pass_outcome(struct pass *ps, int ret)
{
	struct gw_reclaim *r = ps->gw->reclaim;

	if (ret == -EAGAIN) {
		__atomic_add_fetch(&r->aborted, 1, __ATOMIC_RELAXED);
		if (!r->trouble_since) {
			r->trouble_since = gw_reclaim_now_s();
			gw_log("node-id table: reclaim pass aborted, nothing "
			       "given back: %s (believed if it lasts %u s)",
			       ps->res->why, r->persist_s);
		}
		pthread_mutex_lock(&r->lock);
		r->retry_at = gw_reclaim_now_s() + r->persist_s;
		pthread_mutex_unlock(&r->lock);
	} else if (ret == 0 && r->trouble_since) {
		r->trouble_since = 0;
		gw_log("node-id table: reclaim passes complete again");
	}
}

int gw_reclaim_run(struct gw *gw, struct gw_reclaim_result *res)
{
	struct gw_reclaim *r = gw->reclaim;
	struct nodes_stats st;
	struct pass ps;
	int ret;

	memset(res, 0, sizeof(*res));
	if (!r)
		return -ENOTCONN;
	memset(&ps, 0, sizeof(ps));
	ps.gw = gw;
	ps.res = res;
	ps.b = reclaim_batch_new();
	if (!ps.b)
		return -ENOMEM;
	pthread_mutex_lock(&r->run_lock);
	__atomic_store_n(&r->adds, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&r->pending, false, __ATOMIC_RELEASE);
	pthread_mutex_lock(&r->lock);
	r->retry_at = 0;
	pthread_mutex_unlock(&r->lock);
	/* 1, 2, then 3 and 4 if anything answered STALE. */
	ret = check_root(&ps);
	if (!ret)
		ret = walk(&ps);
	if (!ret && ps.ncand)
		ret = confirm(&ps);
	pass_outcome(&ps, ret);
	/* The pass's reference; an abandoned batch is its callbacks'. */
	pthread_mutex_lock(&ps.b->lock);
	reclaim_batch_put_locked(ps.b);
	nodes_stats(gw->nodes, &st);
	res->entries = st.entries;
	/* The next pass by itself: after reclaim_after= adds, and not
	 * before the table could have doubled. */
	__atomic_store_n(&r->next_at, st.entries > gw->o->reclaim_after ?
			 st.entries : gw->o->reclaim_after, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->runs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->held, res->held, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->reclaimed, res->reclaimed, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->errors, res->errors, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&r->run_lock);
	if (res->reclaimed)
		gw_log("node-id table: %llu entries of files gone at the "
		       "origin reclaimed, %llu left",
		       (unsigned long long)res->reclaimed,
		       (unsigned long long)res->entries);
	free(ps.cand);
	free(ps.k);
	return ret == -EAGAIN ? 0 : ret;
}
