/* reclaim_base.c - what reclaim's other files (reclaim.c: when passes run;
 * reclaim_pass.c: one pass) stand on, and what the rest of the gateway
 * tells it: the node-id table grew (gw_reclaim_note_add) or refused a new
 * entry (gw_reclaim_room); the stop and the clock a pass watches; the
 * GETATTRs of a pass, sent in batches that outlive a pass told to stop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "condwait.h"
#include "inode_i.h"

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

bool gw_reclaim_stopping(struct gw_reclaim *r)
{
	bool stop;

	pthread_mutex_lock(&r->lock);
	stop = r->stop;
	pthread_mutex_unlock(&r->lock);
	return stop;
}

time_t gw_reclaim_now_s(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec;
}

/* ---- the GETATTRs of a pass ---- */

struct reclaim_batch *reclaim_batch_new(void)
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
void reclaim_batch_put_locked(struct reclaim_batch *b)
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
	struct reclaim_probe *p = priv;
	struct reclaim_batch *b = p->b;

	pthread_mutex_lock(&b->lock);
	p->status = status;
	if (--b->outstanding == 0)
		pthread_cond_signal(&b->cond);
	reclaim_batch_put_locked(b);
}

/* GETATTR the first n probes and wait for all. false: told to stop while
 * waiting (the batch is left to its callbacks; do not touch it again). */
bool reclaim_probe_all(struct gw *gw, struct reclaim_batch *b, unsigned n)
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
		if (b->outstanding && gw_reclaim_stopping(gw->reclaim))
			break;
	}
	done = !b->outstanding;
	pthread_mutex_unlock(&b->lock);
	return done;
}
