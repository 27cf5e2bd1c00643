/* reclaim.c - giving back the node-ids of files that are gone at the origin.
 *
 * The node-id table (nodes_*) keeps a node-id for every handle the
 * kernel was ever given, for ever: a re-export client may hold any of
 * them. Files removed at the origin (through this gateway or by anyone
 * else: a build farm's clients, a cleanup job) would stay. A pass walks
 * the table and asks the origin about every entry the kernel does not hold
 * now (a GETATTR of its handle, as root, GW_RECLAIM_INFLIGHT at a time).
 * An entry of a file that still exists keeps its node-id, so every handle a
 * client holds for it stays valid; a handle of a removed entry answers
 * ESTALE (node-ids are never handed out again, so it cannot name another
 * file, but it cannot name this one again either).
 *
 * So an entry is removed only when the origin has said twice, and in a
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
 *
 * When: by itself once the table has grown by reclaim_after= entries (and
 * at least by its size after the last pass, so that a table of live files
 * costs one GETATTR per entry per doubling, not per add); on demand with
 * `cachegw-inspect reclaim` (control command "reclaim"). One pass at a
 * time (run_lock). At exit gw_reclaim_stop() ends a pass within 200 ms,
 * even one waiting on an origin that does not answer, before the control
 * threads are joined; gw_reclaim_free() after them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "cache.h"
#include "worker.h"
#include "condwait.h"
#include "gw_i.h"

#define GW_RECLAIM_BATCH 256		/* entries copied out at a time */
#define GW_RECLAIM_INFLIGHT 32		/* GETATTRs in flight */
#define GW_RECLAIM_CONFIRM_MS 1000	/* second answer after the first */
#define GW_RECLAIM_SHARE_MIN 32		/* unvouched gone files before their
					 * share can abort a pass */
#define GW_RECLAIM_PERSIST_S 3600	/* an origin that has looked like it
					 * lost a file system this long is
					 * believed */
#define GW_RECLAIM_DEPTH 64		/* directories asked above a file */
#define GW_RECLAIM_CANDIDATES (1u << 20) /* per pass; the rest wait for the
					 * next */

struct gw_reclaim {
	pthread_mutex_t lock;		/* guards stop, kick, retry_at */
	pthread_cond_t cond;		/* with lock: stop or kick */
	bool stop, kick;
	time_t retry_at;		/* lock: CLOCK_MONOTONIC s of a pass
					 * after an aborted one; 0: none */
	pthread_t tid;
	pthread_mutex_t run_lock;	/* one pass at a time; before lock */
	/* run_lock: */
	bool root_known;		/* the root's identity, from the first
					 * pass that reached it */
	uint64_t root_fsid, root_fileid;
	time_t trouble_since;		/* CLOCK_MONOTONIC s: the first of the
					 * aborted passes in a row; 0: the
					 * last pass completed */
	unsigned persist_s;		/* GW_RECLAIM_PERSIST_S, or a test's */
	uint64_t adds;			/* entries added since the last pass
					 * (atomic) */
	uint64_t next_at;		/* adds that start a pass (atomic) */
	bool pending;			/* a pass is asked for (atomic) */
	/* Counters, atomic. */
	uint64_t runs, checked, held, reclaimed, errors, refusals, aborted;
};

/* One GETATTR of a pass. */
struct probe {
	struct reclaim_batch *b;
	struct nfsc_fh fh;
	struct nfsc_attr attr;
	uint64_t id;
	int status;
};

/* The GETATTRs of a pass in flight. Heap-allocated and counted: a pass
 * told to stop returns without waiting for an origin that does not answer
 * (a hard mount's calls wait for ever), and the last callback (at the
 * latest when the connections are closed: RPC_STATUS_CANCEL) frees it. */
struct reclaim_batch {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* with lock: outstanding went to 0 */
	unsigned outstanding;		/* lock */
	unsigned refs;			/* lock: outstanding + the pass */
	struct probe p[GW_RECLAIM_INFLIGHT];
};

static struct reclaim_batch *batch_new(void)
{
	struct reclaim_batch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	b->refs = 1;
	return b;
}

/* Drop a reference; lock held, released here. */
static void batch_put_locked(struct reclaim_batch *b)
{
	bool last = --b->refs == 0;

	pthread_mutex_unlock(&b->lock);
	if (last) {
		pthread_cond_destroy(&b->cond);
		pthread_mutex_destroy(&b->lock);
		free(b);
	}
}

static void probe_done(int status, void *priv)
{
	struct probe *p = priv;
	struct reclaim_batch *b = p->b;

	pthread_mutex_lock(&b->lock);
	p->status = status;
	if (--b->outstanding == 0)
		pthread_cond_signal(&b->cond);
	batch_put_locked(b);
}

static bool stopping(struct gw_reclaim *r);

/* GETATTR the first n probes and wait for all. false: told to stop while
 * waiting (the batch is left to its callbacks; do not touch it again). */
static bool probe_all(struct gw *gw, struct reclaim_batch *b, unsigned n)
{
	struct nfsc_cred root = { 0 };
	bool done;

	pthread_mutex_lock(&b->lock);
	b->outstanding = n;
	b->refs += n;
	pthread_mutex_unlock(&b->lock);
	for (unsigned i = 0; i < n; i++) {
		b->p[i].b = b;
		b->p[i].status = 0;
		if (nfsc_getattr_async(gw->nfs, -1, &root, &b->p[i].fh,
				       &b->p[i].attr, probe_done,
				       &b->p[i]) < 0)
			probe_done(-EIO, &b->p[i]);
	}
	pthread_mutex_lock(&b->lock);
	while (b->outstanding) {
		cond_wait_ms(&b->cond, &b->lock, 200);
		if (b->outstanding && stopping(gw->reclaim))
			break;
	}
	done = !b->outstanding;
	pthread_mutex_unlock(&b->lock);
	return done;
}

static bool stopping(struct gw_reclaim *r)
{
	bool stop;

	pthread_mutex_lock(&r->lock);
	stop = r->stop;
	pthread_mutex_unlock(&r->lock);
	return stop;
}

static time_t mono_s(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec;
}

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
	struct probe *p = &ps->b->p[0];

	p->id = FUSE_ROOT_ID;
	p->fh = gw->it.root->fh;
	if (!probe_all(gw, ps->b, 1))
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
		    mono_s() - r->trouble_since < (time_t)r->persist_s) {
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
	const struct probe *p = ps->b->p;

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
	while (!stopping(gw->reclaim) &&
	       ps->ncand < GW_RECLAIM_CANDIDATES &&
	       (n = nodes_list(gw->nodes, &cursor, ents,
			       GW_RECLAIM_BATCH)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct probe *p = &ps->b->p[np];

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
			if (!probe_all(gw, ps->b, np)) {
				free(ents);
				return -EINTR;
			}
			walk_settle(ps, np);
			np = 0;
		}
	}
	free(ents);
	if (np && !probe_all(gw, ps->b, np))
		return -EINTR;
	walk_settle(ps, np);
	return stopping(gw->reclaim) ? -EINTR : 0;
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
			struct probe *p = &b->p[np];
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
		if (!probe_all(ps->gw, b, np))
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
		if (stopping(r))
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
	     mono_s() - r->trouble_since < (time_t)r->persist_s)) {
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
			r->trouble_since = mono_s();
			gw_log("node-id table: reclaim pass aborted, nothing "
			       "given back: %s (believed if it lasts %u s)",
			       ps->res->why, r->persist_s);
		}
		pthread_mutex_lock(&r->lock);
		r->retry_at = mono_s() + r->persist_s;
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
	ps.b = batch_new();
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
	batch_put_locked(ps.b);
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

void gw_reclaim_note_add(struct gw *gw, uint64_t n)
{
	struct gw_reclaim *r = gw->reclaim;
	uint64_t adds, at;

	if (!r || !n || !gw->o->reclaim_after)
		return;
	adds = __atomic_add_fetch(&r->adds, n, __ATOMIC_RELAXED);
	at = __atomic_load_n(&r->next_at, __ATOMIC_RELAXED);
	if (adds < at || __atomic_exchange_n(&r->pending, true,
					     __ATOMIC_ACQ_REL))
		return;		/* not yet, or a pass is asked for already */
	pthread_mutex_lock(&r->lock);
	r->kick = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

int gw_reclaim_room(struct gw *gw)
{
	int ret = nodes_room(gw->nodes);

	if (ret == -ENOSPC && gw->reclaim)
		__atomic_add_fetch(&gw->reclaim->refusals, 1,
				   __ATOMIC_RELAXED);
	return ret == -EROFS ? 0 : ret;
}

static void *reclaim_thread(void *arg)
{
	struct gw *gw = arg;
	struct gw_reclaim *r = gw->reclaim;
	struct gw_reclaim_result res;

	pthread_setname_np(pthread_self(), "cachegw-reclaim");
	for (;;) {
		pthread_mutex_lock(&r->lock);
		/* Asked for, or an aborted pass to try again (not when
		 * passes are only made on demand). */
		while (!r->stop && !r->kick) {
			time_t now = mono_s();

			if (r->retry_at && gw->o->reclaim_after &&
			    now >= r->retry_at)
				break;
			if (r->retry_at && gw->o->reclaim_after)
				cond_wait_ms(&r->cond, &r->lock,
					     (r->retry_at - now) * 1000);
			else
				pthread_cond_wait(&r->cond, &r->lock);
		}
		if (r->stop) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		r->kick = false;
		pthread_mutex_unlock(&r->lock);
		gw_reclaim_run(gw, &res);
	}
}

int gw_reclaim_start(struct gw *gw)
{
	struct gw_reclaim *r = calloc(1, sizeof(*r));
#if CACHEGW_FAULT_INJECTION
	unsigned long v;
	const char *env;
#endif
	int ret;

	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_mutex_init(&r->run_lock, NULL);
	r->next_at = gw->o->reclaim_after;
	r->persist_s = GW_RECLAIM_PERSIST_S;
#if CACHEGW_FAULT_INJECTION
	/* Tests: how long an origin that looks wrong is disbelieved. */
	env = getenv("CACHEGW_INJECT_RECLAIM_PERSIST");
	if (env && *env && (v = strtoul(env, NULL, 10)) > 0 && v <= 86400)
		r->persist_s = (unsigned)v;
#endif
	gw->reclaim = r;
	ret = pthread_create(&r->tid, NULL, reclaim_thread, gw);
	if (ret) {
		gw->reclaim = NULL;
		pthread_mutex_destroy(&r->run_lock);
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return -ret;
	}
	return 0;
}

void gw_reclaim_stop(struct gw *gw)
{
	struct gw_reclaim *r = gw->reclaim;

	if (!r)
		return;
	worker_stop(r->tid, &r->lock, &r->cond, &r->stop);
}

void gw_reclaim_free(struct gw *gw)
{
	struct gw_reclaim *r = gw->reclaim;

	if (!r)
		return;
	gw->reclaim = NULL;
	pthread_mutex_destroy(&r->run_lock);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void gw_reclaim_counters(struct gw *gw, struct gw_reclaim_counters *c)
{
	struct gw_reclaim *r = gw->reclaim;

	memset(c, 0, sizeof(*c));
	if (!r)
		return;
	c->runs = __atomic_load_n(&r->runs, __ATOMIC_RELAXED);
	c->checked = __atomic_load_n(&r->checked, __ATOMIC_RELAXED);
	c->held = __atomic_load_n(&r->held, __ATOMIC_RELAXED);
	c->reclaimed = __atomic_load_n(&r->reclaimed, __ATOMIC_RELAXED);
	c->errors = __atomic_load_n(&r->errors, __ATOMIC_RELAXED);
	c->refusals = __atomic_load_n(&r->refusals, __ATOMIC_RELAXED);
	c->aborted = __atomic_load_n(&r->aborted, __ATOMIC_RELAXED);
}
