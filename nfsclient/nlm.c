/* nlm.c - byte-range locks at the origin: NLM v4 (the lock protocol of
 * NFSv3) over libnfs's raw calls, on a connection of its own.
 *
 * The NLM service listens on a port of its own (rpcbind's entry for
 * program 100021 version 4, or nlmport= in the URL), so it gets one more
 * libnfs context, owned by one thread like the pool's connections: other
 * threads queue calls (mutex + eventfd) and sleep on the call until the
 * thread completes it. The context is made when the first call comes and
 * made afresh after its connection fails (the origin restarted: its NLM
 * port may have changed, so the portmapper is asked again); calls in
 * flight then are sent again (and while the gateway holds locks, it is
 * made again at once: nfsc_lock_epoch counts those reconnections, after
 * which the gateway reclaims its locks). Every lock call is non-blocking (block =
 * false): a caller that waits for a lock asks again later (the gateway's
 * lock room), so no NLM_GRANTED callback is ever needed.
 *
 * Hard and soft as the pool's calls: a call that times out is sent again,
 * for ever (hard) or retrans times, then -ENOLCK (soft). An origin that
 * answers without a lock manager (none registered, nobody at nlmport=)
 * fails the calls with -ENOLCK at once, as does an origin lost
 * (offline=).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "nfsc_i.h"
#include "worker.h"
#include <nfsc/libnfs-raw-nlm.h>
#include <nfsc/libnfs-raw-nsm.h>

enum { NLM_DOWN, NLM_CONNECTING, NLM_UP };
#define NLM_CALL_FAILURES 5

struct nlm_call {
	struct nlm_call *next;
	struct nfsc_nlm *m;
	int proc;			/* NLM4_TEST, _LOCK, _UNLOCK */
	struct nfsc_cred cred;
	struct nfsc_fh fh;
	struct nfsc_lock lk;
	struct nfsc_lock *holder;	/* TEST: the conflicting lock */
	unsigned tries;			/* timeouts seen */
	unsigned failures;		/* connections that failed under it */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;			/* lock */
	int status;			/* lock */
};

struct nfsc_nlm {
	struct nfsc *n;
	char *caller;			/* caller_name of every call */
	int port;			/* nlmport=; 0: ask the portmapper */
	int efd;			/* eventfd: queue non-empty / stop */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	struct nlm_call *head, *tail;	/* submitted, lock */
	bool stopping;			/* lock */
	/* The thread's own: */
	struct nfs_context *nfs;	/* holds rpc (its timeout setter is
					 * the public one) */
	struct rpc_context *rpc;
	int state;			/* NLM_DOWN ... */
	bool dead;			/* the connection failed: remade */
	struct nlm_call *wait_head, *wait_tail;	/* not yet sent */
	uint64_t next_try_ns;		/* connect again from then on */
	bool told_down;			/* the failure was logged */
	unsigned refusals;		/* "no locks" answers (logged 1 in
					 * 100) */
	bool absent;			/* the last connect found no lock
					 * manager there */
	struct nfsc_cred auth_cred;	/* what rpc's AUTH carries */
	bool auth_set;
	int nsm_state;			/* our NSM state, in every LOCK;
					 * set before the thread starts */
	bool notify;			/* tell the origin's statd first
					 * (until it answered) */
	uint64_t notify_next_ns;	/* and again from then on */
	bool keep;			/* keep connected (locks held);
					 * atomic */
	bool ever_up;			/* a connection was made before */
	uint64_t epoch;			/* connections made after the
					 * first: atomic */
	uint64_t calls, errors;		/* atomic */
};

static void call_done(struct nlm_call *c, int status)
{
	if (status)
		__atomic_fetch_add(&c->m->errors, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->lock);
	c->status = status;
	c->done = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void wait_push(struct nfsc_nlm *m, struct nlm_call *c)
{
	c->next = NULL;
	QUEUE_PUSH(m->wait_head, m->wait_tail, c, next);
}

static void fail_waiting(struct nfsc_nlm *m, int status)
{
	struct nlm_call *c, *next;

	for (c = m->wait_head; c; c = next) {
		next = c->next;
		call_done(c, status);
	}
	m->wait_head = m->wait_tail = NULL;
}

static int nlm_errno(nlmstat4 st)
{
	switch (st) {
	case NLM4_GRANTED:		return 0;
	case NLM4_DENIED:		return -EAGAIN;
	case NLM4_DENIED_NOLOCKS:	return -ENOLCK;
	case NLM4_BLOCKED:		return -EAGAIN;
	case NLM4_DENIED_GRACE_PERIOD:	return -EINPROGRESS;
	case NLM4_DEADLCK:		return -EDEADLK;
	case NLM4_ROFS:			return -EROFS;
	case NLM4_STALE_FH:		return -ESTALE;
	case NLM4_FBIG:			return -EFBIG;
	default:			return -ENOLCK;
	}
}

/* The libnfs callback of every call. */
static void call_reply(struct rpc_context *rpc, int status, void *data,
		       void *priv)
{
	struct nlm_call *c = priv;
	struct nfsc_nlm *m = c->m;
	nlmstat4 st;

	(void)rpc;
	if (status == RPC_STATUS_SUCCESS) {
		nfsc_origin_answered(m->n);
		m->told_down = false;
		switch (c->proc) {
		case NLM4_TEST: {
			NLM4_TESTres *res = data;

			st = res->reply.status;
			if (st == NLM4_DENIED && c->holder) {
				nlm4_holder *h =
					&res->reply.nlm4_testreply_u.lock.holder;

				memset(c->holder, 0, sizeof(*c->holder));
				c->holder->exclusive = h->exclusive;
				c->holder->svid = h->svid;
				c->holder->off = h->l_offset;
				c->holder->len = h->l_len;
			}
			break;
		}
		case NLM4_LOCK:
			st = ((NLM4_LOCKres *)data)->status;
			break;
		default:
			st = ((NLM4_UNLOCKres *)data)->status;
			break;
		}
		if (nlm_errno(st) == -ENOLCK && m->refusals++ % 100 == 0)
			fprintf(stderr, "cachegw: the lock manager (NLM) of %s "
				"refused a lock call: %s\n", m->n->server,
				st == NLM4_DENIED_NOLOCKS ? "no locks" :
				"failed");
		call_done(c, nlm_errno(st));
		return;
	}
	if (status == RPC_STATUS_TIMEOUT) {
		c->tries++;
		if (m->n->opts.soft && c->tries > m->n->opts.retrans) {
			call_done(c, -ENOLCK);
			return;
		}
		if (c->tries == 1 || c->tries % 10 == 0)
			fprintf(stderr, "cachegw: lock manager (NLM) of %s not "
				"responding, still trying\n", m->n->server);
		wait_push(m, c);	/* sent again by the loop */
		return;
	}
	/* The connection failed (or is being torn down): sent again on the
	 * next one, unless the gateway stops. */
	pthread_mutex_lock(&m->lock);
	status = m->stopping;
	pthread_mutex_unlock(&m->lock);
	if (status) {
		call_done(c, -ECANCELED);
		return;
	}
	m->dead = true;
	/* A connection that fails under the same call again and again is
	 * more likely the call refused (an RPC error reply) than the
	 * network: given up on after a few. */
	if (++c->failures > NLM_CALL_FAILURES) {
		fprintf(stderr, "cachegw: a lock call to %s failed %u times: "
			"%s\n", m->n->server, c->failures,
			data ? (char *)data : "cancelled");
		call_done(c, -ENOLCK);
		return;
	}
	wait_push(m, c);
}

static void connect_done(struct rpc_context *rpc, int status, void *data,
			 void *priv)
{
	struct nfsc_nlm *m = priv;
	const char *msg;

	(void)rpc;
	if (status == RPC_STATUS_SUCCESS) {
		m->state = NLM_UP;
		m->absent = false;
		/* Connected again after a failure: the origin may have
		 * restarted and forgotten our locks (the gateway reclaims). */
		if (m->ever_up)
			__atomic_add_fetch(&m->epoch, 1, __ATOMIC_RELEASE);
		m->ever_up = true;
		if (m->told_down)
			fprintf(stderr, "cachegw: lock manager (NLM) of %s "
				"connected\n", m->n->server);
		return;
	}
	msg = status == RPC_STATUS_ERROR && data ? (char *)data : "cancelled";
	if (!m->told_down)
		fprintf(stderr, "cachegw: cannot reach the lock manager (NLM) "
			"of %s: %s\n", m->n->server, msg);
	m->told_down = true;
	m->dead = true;
	/* The origin answers and has no lock manager (rpcbind has none
	 * registered: "Program is not available"; nobody listens on
	 * nlmport=: the connect is refused, "POLLHUP"): no locks there, now
	 * (ENOLCK, as the Linux NFS client answers), rather than waiting
	 * for one that may never come. An origin that does not answer at
	 * all (a timeout) is waited for (hard) like any call. */
	if (!strstr(msg, "imeout") && !strstr(msg, "timed out"))
		m->absent = true;
}

static void teardown(struct nfsc_nlm *m)
{
	struct nfs_context *nfs = m->nfs;

	/* Destroying the context runs the callbacks of what is in flight
	 * (RPC_STATUS_CANCEL): they go back on the wait list. */
	m->nfs = NULL;
	m->rpc = NULL;
	m->state = NLM_DOWN;
	m->auth_set = false;
	if (nfs)
		nfs_destroy_context(nfs);
	m->dead = false;
}

static void try_connect(struct nfsc_nlm *m)
{
	int ret;

	m->nfs = nfs_init_context();
	if (!m->nfs)
		goto fail;
	m->rpc = nfs_get_rpc_context(m->nfs);
	nfs_set_autoreconnect(m->nfs, 0);
	nfs_set_timeout(m->nfs, (int)m->n->opts.timeo * 100);
	m->state = NLM_CONNECTING;
	if (m->port)
		ret = rpc_connect_port_async(m->rpc, m->n->server, m->port,
					     NLM_PROGRAM, NLM_V4,
					     connect_done, m);
	else
		ret = rpc_connect_program_async(m->rpc, m->n->server,
						NLM_PROGRAM, NLM_V4,
						connect_done, m);
	if (ret == 0)
		return;
fail:
	if (!m->told_down)
		fprintf(stderr, "cachegw: cannot connect to the lock manager "
			"(NLM) of %s\n", m->n->server);
	m->told_down = true;
	m->dead = true;
}

static int set_auth(struct nfsc_nlm *m, const struct nfsc_cred *cr)
{
	struct AUTH *auth;

	if (m->auth_set && !memcmp(&m->auth_cred, cr, sizeof(*cr)))
		return 0;
	auth = libnfs_authunix_create("cachegw", cr->uid, cr->gid,
				      cr->ngroups, (uint32_t *)cr->groups);
	if (!auth)
		return -ENOMEM;
	rpc_set_auth(m->rpc, auth);
	m->auth_cred = *cr;
	m->auth_set = true;
	return 0;
}

/* Put c on the wire (m is up). The arguments are encoded before the call
 * returns, so they live on this stack. */
static int issue(struct nfsc_nlm *m, struct nlm_call *c)
{
	struct nlm4_lock lk = {
		.caller_name = m->caller,
		.fh = { .data = { .data_len = c->fh.len,
				  .data_val = (char *)c->fh.data } },
		.oh = c->lk.oh,
		.svid = c->lk.svid,
		.l_offset = c->lk.off,
		.l_len = c->lk.len,
	};
	int ret = set_auth(m, &c->cred);

	if (ret)
		return ret;
	__atomic_fetch_add(&m->calls, 1, __ATOMIC_RELAXED);
	switch (c->proc) {
	case NLM4_TEST: {
		NLM4_TESTargs a = { .exclusive = c->lk.exclusive, .lock = lk };

		ret = rpc_nlm4_test_async(m->rpc, call_reply, &a, c);
		break;
	}
	case NLM4_LOCK: {
		NLM4_LOCKargs a = { .block = 0, .exclusive = c->lk.exclusive,
				    .lock = lk, .reclaim = c->lk.reclaim,
				    .state = m->nsm_state };

		ret = rpc_nlm4_lock_async(m->rpc, call_reply, &a, c);
		break;
	}
	default: {
		NLM4_UNLOCKargs a = { .lock = lk };

		ret = rpc_nlm4_unlock_async(m->rpc, call_reply, &a, c);
		break;
	}
	}
	return ret ? -ENOLCK : 0;
}

struct nsm_job {
	struct nfsc_nlm *m;
	bool done;
	int status;
	const char *what;
};

static void nsm_reply(struct rpc_context *rpc, int status, void *data,
		      void *priv)
{
	struct nsm_job *j = priv;

	(void)rpc;
	j->done = true;
	j->status = status;
	if (status == RPC_STATUS_ERROR && data)
		j->what = "refused";
}

static void nsm_connected(struct rpc_context *rpc, int status, void *data,
			  void *priv)
{
	struct nsm_job *j = priv;
	struct nfsc_nlm *m = j->m;
	NSM1_NOTIFYargs a = { .mon_name = m->caller, .state = m->nsm_state };

	(void)data;
	if (status != RPC_STATUS_SUCCESS) {
		j->done = true;
		j->status = status;
		j->what = "cannot reach its status monitor (rpc.statd)";
		return;
	}
	if (rpc_nsm1_notify_async(rpc, nsm_reply, &a, j)) {
		j->done = true;
		j->status = RPC_STATUS_ERROR;
		j->what = "cannot send";
	}
}

/* A gateway started cold (no predecessor handed it its locks): tell the
 * origin's status monitor that this client (caller) rebooted, with a new
 * state number (SM_NOTIFY, as sm-notify(8) does at boot), so that its
 * lock manager lets go what an earlier instance of this gateway held.
 * Synchronous, before the first lock call is sent, bounded (10 s): an
 * origin that does not answer is logged, and told again 30 s later (once
 * the lock manager answers), until it did. */
static void nsm_notify(struct nfsc_nlm *m)
{
	struct nfs_context *nfs = nfs_init_context();
	struct rpc_context *rpc;
	struct nsm_job j = { .m = m, .what = "no answer" };
	uint64_t limit = 10000000000u, until = nfsc_now_ns() + limit;

	m->notify_next_ns = until + 30000000000u;
	if (!nfs)
		return;
	rpc = nfs_get_rpc_context(nfs);
	nfs_set_autoreconnect(nfs, 0);
	nfs_set_timeout(nfs, (int)(limit / 1000000u));
	if (rpc_connect_program_async(rpc, m->n->server, NSM_PROGRAM, NSM_V1,
				      nsm_connected, &j)) {
		j.done = true;
		j.status = RPC_STATUS_ERROR;
		j.what = "cannot connect";
	}
	while (!j.done && nfsc_now_ns() < until) {
		struct pollfd p = { .fd = rpc_get_fd(rpc),
				    .events = (short)rpc_which_events(rpc) };

		if (p.fd < 0 || (poll(&p, 1, 100) < 0 && errno != EINTR))
			break;
		if (rpc_service(rpc, p.revents) < 0)
			break;
	}
	if (j.done && j.status == RPC_STATUS_SUCCESS) {
		m->notify = false;
		fprintf(stderr, "cachegw: told the status monitor (NSM) of %s "
			"that lock client %s restarted (state %d): the locks an "
			"earlier instance held there are let go\n",
			m->n->server, m->caller, m->nsm_state);
	} else {
		fprintf(stderr, "cachegw: could not tell the status monitor "
			"(NSM) of %s that lock client %s restarted (%s): locks "
			"an earlier instance held there may stay until the "
			"origin restarts\n", m->n->server, m->caller,
			j.done ? j.what : "no answer");
	}
	nfs_destroy_context(nfs);
}

static void *nlm_thread(void *arg)
{
	struct nfsc_nlm *m = arg;
	bool stop = false;

	if (m->notify && !nfsc_origin_lost(m->n))
		nsm_notify(m);
	else if (m->notify)
		fprintf(stderr, "cachegw: the origin %s is lost: it is told "
			"that lock client %s restarted once its lock manager "
			"answers\n", m->n->server, m->caller);
	while (!stop) {
		struct pollfd p[2] = {
			{ .fd = m->efd, .events = POLLIN },
			{ .fd = -1 },
		};
		struct nlm_call *c, *next;
		uint64_t v, now;

		if (m->rpc && rpc_get_fd(m->rpc) >= 0) {
			p[1].fd = rpc_get_fd(m->rpc);
			p[1].events = (short)rpc_which_events(m->rpc);
		}
		/* The timeout lets rpc_service() expire calls (timeo). */
		if (poll(p, 2, 100) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			if (read(m->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
			pthread_mutex_lock(&m->lock);
			c = m->head;
			m->head = m->tail = NULL;
			stop = m->stopping;
			pthread_mutex_unlock(&m->lock);
			for (; c; c = next) {
				next = c->next;
				wait_push(m, c);
			}
		}
		if (stop)
			break;
		if (m->wait_head && nfsc_origin_lost(m->n)) {
			fail_waiting(m, -ENOLCK);
		}
		now = nfsc_now_ns();
		if (m->state == NLM_DOWN && now >= m->next_try_ns &&
		    (m->wait_head ||
		     __atomic_load_n(&m->keep, __ATOMIC_RELAXED)))
			try_connect(m);
		/* Told before any lock call is sent (again, if it failed). */
		if (m->notify && m->state == NLM_UP &&
		    nfsc_now_ns() >= m->notify_next_ns)
			nsm_notify(m);
		if (m->state == NLM_UP) {
			c = m->wait_head;
			m->wait_head = m->wait_tail = NULL;
			for (; c; c = next) {
				int ret;

				next = c->next;
				ret = issue(m, c);
				if (ret) {
					fprintf(stderr, "cachegw: a lock call "
						"to %s could not be sent (%s)\n",
						m->n->server, strerror(-ret));
					call_done(c, ret);
				}
			}
		}
		if (m->rpc && p[1].fd >= 0 &&
		    rpc_service(m->rpc, p[1].revents) < 0)
			m->dead = true;
		if (m->dead) {
			teardown(m);
			m->next_try_ns = nfsc_now_ns() + 1000000000u;
			/* soft: a lock manager that cannot be reached fails
			 * the calls waiting for it; hard: they wait, unless
			 * the origin said it has none. */
			if (m->n->opts.soft || m->absent)
				fail_waiting(m, -ENOLCK);
			m->absent = false;
		}
	}
	/* Stopping: what waits is cancelled; then what is in flight. */
	fail_waiting(m, -ECANCELED);
	teardown(m);
	fail_waiting(m, -ECANCELED);
	return NULL;
}

static char *url_nlmport(const char *url, int *port)
{
	const char *q = strchr(url, '?');

	*port = 0;
	while (q) {
		q++;
		if (!strncmp(q, "nlmport=", 8)) {
			char *end;
			long v = strtol(q + 8, &end, 10);

			if (end == q + 8 || v <= 0 || v > 65535 ||
			    (*end && *end != '&'))
				return NULL;
			*port = (int)v;
		}
		q = strchr(q, '&');
	}
	return (char *)url;
}

int nfsc_nlm_init(struct nfsc *n, const char *caller)
{
	struct nfsc_nlm *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->n = n;
	m->efd = -1;
	pthread_mutex_init(&m->lock, NULL);
	if (!url_nlmport(n->url, &m->port)) {
		free(m);
		return -EINVAL;
	}
	m->caller = strdup(caller && *caller ? caller : "cachegw");
	m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!m->caller || m->efd < 0) {
		int ret = m->caller ? -errno : -ENOMEM;

		nfsc_nlm_free(m);
		return ret;
	}
	n->nlm = m;
	return 0;
}

int nfsc_nlm_start(struct nfsc_nlm *m)
{
	int ret;

	if (!m)
		return 0;
	ret = pthread_create(&m->thread, NULL, nlm_thread, m);
	if (ret)
		return -ret;
	m->started = true;
	return 0;
}

void nfsc_nlm_stop(struct nfsc_nlm *m)
{
	uint64_t one = 1;

	if (!m || !m->started)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_mutex_unlock(&m->lock);
	if (write(m->efd, &one, sizeof(one)) < 0)
		perror("cachegw: eventfd write");
	pthread_join(m->thread, NULL);
	m->started = false;
}

void nfsc_nlm_free(struct nfsc_nlm *m)
{
	struct nlm_call *c, *next;

	if (!m)
		return;
	/* Never started: what was queued is cancelled here. */
	for (c = m->head; c; c = next) {
		next = c->next;
		call_done(c, -ECANCELED);
	}
	if (m->efd >= 0)
		close(m->efd);
	pthread_mutex_destroy(&m->lock);
	free(m->caller);
	free(m);
}

/* Queue a call and wait for it. */
static int nlm_call(struct nfsc *n, int proc, const struct nfsc_cred *cr,
		    const struct nfsc_fh *fh, const struct nfsc_lock *lk,
		    struct nfsc_lock *holder)
{
	struct nfsc_nlm *m = n->nlm;
	struct nlm_call c = {
		.m = m, .proc = proc, .fh = *fh, .lk = *lk, .holder = holder,
	};
	uint64_t one = 1;
	bool stopping;
	int ret;

	if (!m || !m->started)
		return -ENOLCK;
	if (nfsc_origin_lost(n))
		return -ENOLCK;
	if (cr) {
		c.cred = *cr;
		if (c.cred.ngroups > NFSC_NGROUPS_MAX)
			c.cred.ngroups = NFSC_NGROUPS_MAX;
	}
	c.lk.oh[NFSC_LOCK_OH_MAX - 1] = 0;
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	pthread_mutex_lock(&m->lock);
	stopping = m->stopping;
	if (!stopping)
		QUEUE_PUSH(m->head, m->tail, &c, next);
	pthread_mutex_unlock(&m->lock);
	if (stopping) {
		ret = -ESHUTDOWN;
		goto out;
	}
	if (write(m->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		perror("cachegw: eventfd write");
	pthread_mutex_lock(&c.lock);
	while (!c.done)
		pthread_cond_wait(&c.cond, &c.lock);
	ret = c.status;
	pthread_mutex_unlock(&c.lock);
out:
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
	return ret;
}

int nfsc_lock_test(struct nfsc *n, const struct nfsc_cred *cr,
		   const struct nfsc_fh *fh, const struct nfsc_lock *lk,
		   struct nfsc_lock *holder)
{
	return nlm_call(n, NLM4_TEST, cr, fh, lk, holder);
}

int nfsc_lock(struct nfsc *n, const struct nfsc_cred *cr,
	      const struct nfsc_fh *fh, const struct nfsc_lock *lk)
{
	return nlm_call(n, NLM4_LOCK, cr, fh, lk, NULL);
}

int nfsc_unlock(struct nfsc *n, const struct nfsc_cred *cr,
		const struct nfsc_fh *fh, const struct nfsc_lock *lk)
{
	return nlm_call(n, NLM4_UNLOCK, cr, fh, lk, NULL);
}

void nfsc_lock_nsm(struct nfsc *n, int state, bool notify)
{
	if (!n->nlm)
		return;
	n->nlm->nsm_state = state;
	n->nlm->notify = notify;
}

void nfsc_lock_keep(struct nfsc *n, bool keep)
{
	if (n->nlm)
		__atomic_store_n(&n->nlm->keep, keep, __ATOMIC_RELAXED);
}

uint64_t nfsc_lock_epoch(const struct nfsc *n)
{
	return n->nlm ? __atomic_load_n(&n->nlm->epoch, __ATOMIC_ACQUIRE) :
			0;
}

void nfsc_lock_stat(const struct nfsc *n, uint64_t *calls, uint64_t *errors)
{
	*calls = n->nlm ? __atomic_load_n(&n->nlm->calls, __ATOMIC_RELAXED) : 0;
	*errors = n->nlm ? __atomic_load_n(&n->nlm->errors,
					   __ATOMIC_RELAXED) : 0;
}
