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
 * How a pass decides: reclaim_pass.c.
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

#include "condwait.h"
#include "config.h"
#include "inode_i.h"
#include "worker.h"


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
			time_t now = gw_reclaim_now_s();

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
