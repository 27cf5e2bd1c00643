/* origin.c - the origin lost and back (opts.offline=).
 *
 * Every RPC reply stamps last_answer_ns. A watcher thread looks four
 * times a second: when the origin has been quiet for a second it sends a
 * probe (GETATTR of the export's root, as root; at most NFSC_PROBES in
 * flight, so a dead origin does not pile them up), so that an idle
 * gateway learns of a lost origin as a busy one does; when nothing has
 * answered for opts.offline seconds the origin is lost, and it is back at
 * the first answer after that. Only this thread changes `lost` and logs.
 * While lost, nfsc_submit_idem fails the idempotent calls at once with
 * -EHOSTDOWN (sync.c's waits for them end so too); what changes the
 * origin is queued as always.
 *
 * Locks: watch_lock guards watch_stop and probe_busy (a leaf: nothing is
 * called under it but the condition wait); the rest are atomics.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "condwait.h"
#include "worker.h"
#include "nfsc_i.h"

void nfsc_origin_init(struct nfsc *n)
{
	pthread_mutex_init(&n->watch_lock, NULL);
	pthread_cond_init(&n->watch_cond, NULL);
	n->last_answer_ns = nfsc_now_ns();
}

void nfsc_origin_start_lost(struct nfsc *n)
{
	n->lost = 1;
	n->lost_since_ns = nfsc_now_ns();
	n->last_answer_ns = 0;
	n->lost_total = 1;
}

void nfsc_origin_answered(struct nfsc *n)
{
	__atomic_store_n(&n->last_answer_ns, nfsc_now_ns(), __ATOMIC_RELAXED);
}

bool nfsc_origin_lost(const struct nfsc *n)
{
	return n->opts.offline && __atomic_load_n(&n->lost, __ATOMIC_ACQUIRE);
}

int nfsc_submit_idem(struct nfsc *n, int conn, struct nfsc_req *r)
{
	if (nfsc_origin_lost(n)) {
		__atomic_add_fetch(&n->refused, 1, __ATOMIC_RELAXED);
		nfsc_req_free(r);
		return -EHOSTDOWN;
	}
	return nfsc_submit_or_free(n, conn, r);
}

static void probe_done(int status, void *priv)
{
	struct nfsc_probe *p = priv;
	struct nfsc *n = p->n;

	(void)status;	/* any answer was stamped by nfsc_origin_answered */
	pthread_mutex_lock(&n->watch_lock);
	n->probe_busy &= ~(1u << p->slot);
	pthread_mutex_unlock(&n->watch_lock);
}

/* One probe, if a slot is free. watch_lock not held. */
static void probe(struct nfsc *n)
{
	static const struct nfsc_cred root;	/* uid 0, gid 0 */
	struct nfsc_probe *p;
	unsigned slot;
	int ret;

	pthread_mutex_lock(&n->watch_lock);
	for (slot = 0; slot < NFSC_PROBES; slot++)
		if (!(n->probe_busy & (1u << slot)))
			break;
	if (slot < NFSC_PROBES)
		n->probe_busy |= 1u << slot;
	pthread_mutex_unlock(&n->watch_lock);
	if (slot == NFSC_PROBES)
		return;
	p = &n->probe[slot];
	p->n = n;
	p->slot = slot;
	__atomic_add_fetch(&n->probes, 1, __ATOMIC_RELAXED);
	ret = nfsc_getattr_submit(n, -1, &root, &n->root, &p->attr,
				  probe_done, p, false);
	if (ret)
		probe_done(ret, p);
}

/* Nanoseconds without an answer at now. A service thread may stamp an
 * answer after the watcher read the clock and before it loaded the stamp:
 * last is then a little after now, and that is an answer just now, not
 * 2^64 ns of quiet (that took the origin for lost: a log line, and
 * idempotent calls refused with EHOSTDOWN until the next answer). */
static uint64_t quiet_ns(uint64_t now, uint64_t last)
{
	return now > last ? now - last : 0;
}

bool nfsc_origin_probe_due(uint64_t now, uint64_t last, uint64_t last_probe)
{
	return quiet_ns(now, last) >= 1000000000u &&
	       now - last_probe >= 1000000000u;
}

enum nfsc_origin_change nfsc_origin_look(struct nfsc *n, uint64_t now,
					 uint64_t last)
{
	const uint64_t limit = (uint64_t)n->opts.offline * 1000000000u;
	bool lost = __atomic_load_n(&n->lost, __ATOMIC_RELAXED);

	if (!lost && quiet_ns(now, last) >= limit) {
		n->lost_since_ns = last;
		__atomic_store_n(&n->lost, 1, __ATOMIC_RELEASE);
		__atomic_add_fetch(&n->lost_total, 1, __ATOMIC_RELAXED);
		return NFSC_ORIGIN_LOST;
	}
	if (lost && last > n->lost_since_ns) {
		__atomic_store_n(&n->lost, 0, __ATOMIC_RELEASE);
		__atomic_add_fetch(&n->back_total, 1, __ATOMIC_RELAXED);
		return NFSC_ORIGIN_BACK;
	}
	return NFSC_ORIGIN_SAME;
}

static void *watch_thread(void *arg)
{
	struct nfsc *n = arg;
	uint64_t last_probe = 0;

	pthread_mutex_lock(&n->watch_lock);
	while (!n->watch_stop) {
		uint64_t now = nfsc_now_ns(), last;

		pthread_mutex_unlock(&n->watch_lock);
		last = __atomic_load_n(&n->last_answer_ns, __ATOMIC_RELAXED);
		if (nfsc_origin_probe_due(now, last, last_probe)) {
			probe(n);
			last_probe = now;
		}
		switch (nfsc_origin_look(n, now, last)) {
		case NFSC_ORIGIN_LOST:
			fprintf(stderr, "cachegw: origin %s lost: no answer "
				"for %.1f s (offline=%u): serving what the "
				"cache holds; what it does not hold fails at "
				"once (EHOSTDOWN); changes wait (hard) or "
				"fail (soft)\n", n->server,
				(double)(now - last) / 1e9, n->opts.offline);
			break;
		case NFSC_ORIGIN_BACK:
			fprintf(stderr, "cachegw: origin %s back after %.1f s "
				"without an answer: revalidating again\n",
				n->server,
				(double)(last - n->lost_since_ns) / 1e9);
			break;
		case NFSC_ORIGIN_SAME:
			break;
		}
		pthread_mutex_lock(&n->watch_lock);
		if (!n->watch_stop)
			cond_wait_ms(&n->watch_cond, &n->watch_lock, 250);
	}
	pthread_mutex_unlock(&n->watch_lock);
	return NULL;
}

int nfsc_origin_start(struct nfsc *n)
{
	int ret;

	if (!n->opts.offline)
		return 0;
	ret = pthread_create(&n->watch, NULL, watch_thread, n);
	if (ret)
		return -ret;
	n->watch_started = true;
	return 0;
}

void nfsc_origin_stop(struct nfsc *n)
{
	if (!n->watch_started)
		return;
	worker_stop(n->watch, &n->watch_lock, &n->watch_cond, &n->watch_stop);
	n->watch_started = false;
}

void nfsc_origin_free(struct nfsc *n)
{
	pthread_cond_destroy(&n->watch_cond);
	pthread_mutex_destroy(&n->watch_lock);
}

void nfsc_origin_stat(const struct nfsc *n, struct nfsc_origin_stat *out)
{
	memset(out, 0, sizeof(*out));
	out->lost = nfsc_origin_lost(n);
	out->started_lost = n->started_lost;
	out->lost_total = __atomic_load_n(&n->lost_total, __ATOMIC_RELAXED);
	out->back_total = __atomic_load_n(&n->back_total, __ATOMIC_RELAXED);
	out->refused = __atomic_load_n(&n->refused, __ATOMIC_RELAXED);
	out->probes = __atomic_load_n(&n->probes, __ATOMIC_RELAXED);
}
