/* nfsc_wait_test: the waits of nfsclient/sync.c and sync_intr.c without
 * an origin (the test answers the calls itself, on a pool made by hand):
 * a countdown waiter ends with the first error of its calls; a caller's
 * wait for an idempotent call ends with the answer, with the errno the
 * interrupt names (EINTR, ETIMEDOUT) when its request is interrupted (also
 * when fired before the call, until it arms another token), with EHOSTDOWN when the origin is lost meanwhile; and
 * an abandoned call still finishes into memory that is its own (ASan). */
#include <pthread.h>

#include "nfsc_helpers.h"

static struct nfsc_cred cr = { .uid = 1000, .gid = 1000 };
static struct nfsc_fh fh = { .len = 4, .data = { 4, 3, 2, 1 } };

/* A thread that serves one request: arms its token, makes `calls`
 * GETATTRs and keeps their results. */
struct caller {
	struct nfsc *n;
	const void *token;
	struct nfsc_intr *intr;		/* lock; set before any call */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int go;				/* lock: calls that may start */
	int calls;
	int ret[4];
	struct nfsc_attr attr[4];
	pthread_t t;
};

static void *caller_run(void *arg)
{
	struct caller *c = arg;
	int i;

	pthread_mutex_lock(&c->lock);
	c->intr = nfsc_intr_arm(c->token);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < c->calls; i++) {
		pthread_mutex_lock(&c->lock);
		while (c->go <= i)
			pthread_cond_wait(&c->cond, &c->lock);
		pthread_mutex_unlock(&c->lock);
		c->ret[i] = nfsc_getattr(c->n, &cr, &fh, &c->attr[i]);
	}
	nfsc_intr_disarm();
	return NULL;
}

static void caller_start(struct caller *c, struct nfsc *n, const void *token,
			 int calls)
{
	memset(c, 0, sizeof(*c));
	c->n = n;
	c->token = token;
	c->calls = calls;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	CHECK_EQ(pthread_create(&c->t, NULL, caller_run, c), 0);
}

static void caller_go(struct caller *c, int upto)
{
	pthread_mutex_lock(&c->lock);
	c->go = upto;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* The caller's interrupt state, once it has armed its token. */
static struct nfsc_intr *caller_intr(struct caller *c)
{
	struct nfsc_intr *i;

	pthread_mutex_lock(&c->lock);
	while (!c->intr)
		pthread_cond_wait(&c->cond, &c->lock);
	i = c->intr;
	pthread_mutex_unlock(&c->lock);
	return i;
}

static void caller_join(struct caller *c)
{
	pthread_join(c->t, NULL);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

/* The next `want` requests on connection 0's queue (the caller's
 * calls, in their order), waited for up to 20 s. */
static void next_reqs(struct nfsc *n, struct nfsc_req **out, int want)
{
	int got = 0, i;

	for (i = 0; i < 20000 && got < want; i++) {
		struct nfsc_req *r = t_pool_take(n, 0, NULL), *next;

		for (; r; r = next) {
			next = r->next;
			r->next = NULL;
			CHECK(got < want);
			out[got++] = r;
		}
		if (got < want)
			usleep(1000);
	}
	CHECK_EQ(got, want);
}

static struct nfsc_req *next_req(struct nfsc *n)
{
	struct nfsc_req *r;

	next_reqs(n, &r, 1);
	return r;
}

/* Answer r as the origin would: its attributes, size given. */
static void answer(struct nfsc_req *r, uint64_t size)
{
	r->proc = NFS3_GETATTR;
	memset(r->u.getattr.attr, 0, sizeof(*r->u.getattr.attr));
	r->u.getattr.attr->type = NFSC_REG;
	r->u.getattr.attr->size = size;
	nfsc_complete(r, 0);
}

int main(void)
{
	struct nfsc *n = t_pool_new(1);
	struct nfsc_waiter w;
	struct caller c;
	struct nfsc_req *r, *two[2];
	int token_a, token_b;

	/* 1. A countdown waiter: the first error of its calls. */
	nfsc_waiter_init(&w);
	nfsc_waiter_add(&w);
	nfsc_waiter_add(&w);
	nfsc_waiter_add(&w);
	nfsc_waiter_done(0, &w);
	nfsc_waiter_done(-EIO, &w);
	nfsc_waiter_done(-ENOENT, &w);
	CHECK_EQ(nfsc_waiter_wait(&w), -EIO);
	nfsc_waiter_init(&w);
	CHECK_EQ(nfsc_waiter_wait(&w), 0);

	/* 2. Answered: the caller gets the origin's attributes. */
	caller_start(&c, n, &token_a, 1);
	caller_go(&c, 1);
	answer(next_req(n), 4242);
	caller_join(&c);
	CHECK_EQ(c.ret[0], 0);
	CHECK_EQ(c.attr[0].size, 4242);

	/* 3. Interrupted while waiting: EINTR; the call finishes later into
	 * its own memory (ASan would see a write to the caller's freed
	 * wait otherwise). */
	caller_start(&c, n, &token_a, 1);
	caller_go(&c, 1);
	r = next_req(n);
	nfsc_intr_fire(caller_intr(&c), &token_a, EINTR);
	caller_join(&c);
	CHECK_EQ(c.ret[0], -EINTR);
	answer(r, 1);

	/* 4. A fire for another request's token does nothing: the call
	 * made after it waits for its answer. */
	caller_start(&c, n, &token_a, 1);
	nfsc_intr_fire(caller_intr(&c), &token_b, EINTR);
	caller_go(&c, 1);
	answer(next_req(n), 99);
	caller_join(&c);
	CHECK_EQ(c.ret[0], 0);
	CHECK_EQ(c.attr[0].size, 99);

	/* 5. Fired before the call, with the errno the gateway gives a
	 * kernel thread: this call and the next end with it at once (both
	 * still go out); a caller that arms another token waits again. */
	caller_start(&c, n, &token_a, 2);
	nfsc_intr_fire(caller_intr(&c), &token_a, ETIMEDOUT);
	caller_go(&c, 2);
	next_reqs(n, two, 2);
	caller_join(&c);
	CHECK_EQ(c.ret[0], -ETIMEDOUT);
	CHECK_EQ(c.ret[1], -ETIMEDOUT);
	answer(two[1], 2);
	answer(two[0], 3);
	caller_start(&c, n, &token_b, 1);
	caller_go(&c, 1);
	answer(next_req(n), 77);
	caller_join(&c);
	CHECK_EQ(c.ret[0], 0);
	CHECK_EQ(c.attr[0].size, 77);

	/* 6. With offline=, the origin lost while the caller waits: the wait
	 * ends with EHOSTDOWN; the call goes on and its answer is dropped. */
	n->opts.offline = 3;
	caller_start(&c, n, &token_a, 1);
	caller_go(&c, 1);
	r = next_req(n);
	__atomic_store_n(&n->lost, 1, __ATOMIC_RELEASE);
	caller_join(&c);
	CHECK_EQ(c.ret[0], -EHOSTDOWN);
	answer(r, 5);

	t_pool_free(n);
	printf("nfsc_wait_test: ok\n");
	return 0;
}
