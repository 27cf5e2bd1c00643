/* nfsc_helpers.h - shared by the nfsclient/ unit tests that run without
 * an origin: a pool made by hand (struct nfsc from nfsc_i.h: connections
 * with their submission queues and eventfds, no libnfs context, no
 * thread), so that a test plays the service thread itself; and a callback
 * that counts its runs. Checks from check.h. */
#ifndef CACHEGW_NFSC_HELPERS_H
#define CACHEGW_NFSC_HELPERS_H

#include <stdint.h>
#include <sys/eventfd.h>

#include "check.h"
#include "nfsc_i.h"

/* A pool of nconn connections to nowhere, with opts as nfsc_open would
 * leave them (the test sets soft, retrans, offline, ...). */
static inline struct nfsc *t_pool_new(unsigned nconn)
{
	struct nfsc *n = calloc(1, sizeof(*n));
	unsigned i;

	CHECK(n);
	n->server = strdup("origin.test");
	n->export = strdup("/export");
	n->opts.nconnect = nconn;
	n->opts.timeo = 600;
	n->opts.retrans = 3;
	n->nconn = nconn;
	n->conns = calloc(nconn, sizeof(*n->conns));
	CHECK(n->server && n->export && n->conns);
	nfsc_origin_init(n);
	for (i = 0; i < nconn; i++) {
		struct nfsc_conn *c = &n->conns[i];

		c->n = n;
		c->idx = i;
		c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		CHECK(c->efd >= 0);
		pthread_mutex_init(&c->lock, NULL);
	}
	return n;
}

/* What connection i's queue holds, as its service thread would take it
 * (the queue emptied); the eventfd's count in *kicks if not NULL. */
static inline struct nfsc_req *t_pool_take(struct nfsc *n, unsigned i,
					   uint64_t *kicks)
{
	struct nfsc_conn *c = &n->conns[i];
	struct nfsc_req *r;
	uint64_t v = 0;

	if (read(c->efd, &v, sizeof(v)) < 0)
		v = 0;
	if (kicks)
		*kicks = v;
	pthread_mutex_lock(&c->lock);
	r = c->head;
	c->head = c->tail = NULL;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static inline size_t t_req_count(const struct nfsc_req *r)
{
	size_t k = 0;

	for (; r; r = r->next)
		k++;
	return k;
}

/* Free the pool and whatever its queues still hold (no callback runs). */
static inline void t_pool_free(struct nfsc *n)
{
	unsigned i;

	for (i = 0; i < n->nconn; i++) {
		struct nfsc_req *r = t_pool_take(n, i, NULL), *next;

		for (; r; r = next) {
			next = r->next;
			nfsc_req_free(r);
		}
		close(n->conns[i].efd);
		pthread_mutex_destroy(&n->conns[i].lock);
	}
	nfsc_origin_free(n);
	free(n->conns);
	free(n->server);
	free(n->export);
	free(n);
}

/* A callback's runs: how many, and the last status. */
struct t_done {
	int runs;
	int status;
};

static inline void t_done_cb(int status, void *priv)
{
	struct t_done *d = priv;

	d->runs++;
	d->status = status;
}

#endif
