/* reclaim.c - giving back the node-ids of files that are gone at the origin.
 *
 * The node-id table (nodes_*) keeps a node-id for every handle the
 * kernel was ever given, for ever: a re-export client may hold any of
 * them. A file removed through this gateway is forgotten when a GETATTR of
 * it answers ESTALE; one removed at the origin by someone else (a build
 * farm's clients, a cleanup job) would stay. A pass walks the table and
 * asks the origin about every entry the kernel does not hold now (a GETATTR
 * of its handle, as root, GW_RECLAIM_INFLIGHT at a time): entries whose
 * handle the origin calls stale (NFS3ERR_STALE) are removed. Nothing else
 * is: an entry of a file that still exists keeps its node-id, so every
 * handle a client holds for it stays valid; a handle of a removed entry
 * answers ESTALE (node-ids are never handed out again, so it cannot name
 * another file).
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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "worker.h"
#include "condwait.h"
#include "gw_i.h"

#define GW_RECLAIM_BATCH 256		/* entries copied out at a time */
#define GW_RECLAIM_INFLIGHT 32		/* GETATTRs in flight */

struct gw_reclaim {
	pthread_mutex_t lock;		/* guards stop, kick */
	pthread_cond_t cond;		/* with lock: stop or kick */
	bool stop, kick;
	pthread_t tid;
	pthread_mutex_t run_lock;	/* one pass at a time; before lock */
	uint64_t adds;			/* entries added since the last pass
					 * (atomic) */
	uint64_t next_at;		/* adds that start a pass (atomic) */
	bool pending;			/* a pass is asked for (atomic) */
	/* Counters, atomic. */
	uint64_t runs, checked, held, reclaimed, errors, refusals;
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

/* Remove the entries whose probe said ESTALE. */
static void settle(struct gw *gw, const struct probe *p, unsigned n,
		   struct gw_reclaim_result *res)
{
	struct gw_reclaim *r = gw->reclaim;

	for (unsigned i = 0; i < n; i++) {
		if (p[i].status == -ESTALE) {
			int ret = nodes_remove(gw->nodes, p[i].id);

			gw_md_forget(gw, p[i].id);

			if (ret == 0 || ret == -ENOENT)
				res->reclaimed += ret == 0;
			else
				res->errors++;
		} else if (p[i].status < 0) {
			res->errors++;	/* not known gone: kept */
		}
	}
	__atomic_add_fetch(&r->checked, n, __ATOMIC_RELAXED);
}

int gw_reclaim_run(struct gw *gw, struct gw_reclaim_result *res)
{
	struct gw_reclaim *r = gw->reclaim;
	struct nodes_ent *ents;
	struct reclaim_batch *b;
	struct nodes_stats st;
	uint64_t cursor = 0;
	bool whole = true;
	unsigned np = 0;
	size_t n;

	memset(res, 0, sizeof(*res));
	if (!r)
		return -ENOTCONN;
	ents = calloc(GW_RECLAIM_BATCH, sizeof(*ents));
	b = batch_new();
	if (!ents || !b) {
		free(ents);
		free(b);
		return -ENOMEM;
	}
	pthread_mutex_lock(&r->run_lock);
	__atomic_store_n(&r->adds, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&r->pending, false, __ATOMIC_RELEASE);
	while (whole && !stopping(r) &&
	       (n = nodes_list(gw->nodes, &cursor, ents,
				     GW_RECLAIM_BATCH)) > 0) {
		for (size_t i = 0; i < n && whole; i++) {
			struct probe *p = &b->p[np];

			res->checked++;
			/* Held by the kernel: it revalidates it itself (an
			 * ESTALE there forgets it: gw_inode_gone). */
			if (gw_inode_find(gw, ents[i].id)) {
				res->held++;
				continue;
			}
			p->id = ents[i].id;
			p->fh.len = ents[i].hlen;
			memcpy(p->fh.data, ents[i].h, ents[i].hlen);
			if (++np < GW_RECLAIM_INFLIGHT)
				continue;
			whole = probe_all(gw, b, np);
			if (whole)
				settle(gw, b->p, np, res);
			np = 0;
		}
	}
	if (whole && np && (whole = probe_all(gw, b, np)))
		settle(gw, b->p, np, res);
	/* The pass's reference; an abandoned batch is its callbacks'. */
	pthread_mutex_lock(&b->lock);
	batch_put_locked(b);
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
	free(ents);
	return whole ? 0 : -EINTR;
}

void gw_reclaim_note_add(struct gw *gw)
{
	struct gw_reclaim *r = gw->reclaim;
	uint64_t adds, at;

	if (!r || !gw->o->reclaim_after)
		return;
	adds = __atomic_add_fetch(&r->adds, 1, __ATOMIC_RELAXED);
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
		while (!r->stop && !r->kick)
			pthread_cond_wait(&r->cond, &r->lock);
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
	int ret;

	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_mutex_init(&r->run_lock, NULL);
	r->next_at = gw->o->reclaim_after;
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
}
