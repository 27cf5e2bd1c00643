/* pool.c - connections to the origin, their service threads and queues.
 *
 * Each connection is a libnfs nfs_context mounted on the export
 * (mount.c); after nfsc_start() it belongs to one service thread, the
 * only thread that ever touches it. Other threads hand it requests
 * through a mutex-protected queue and an eventfd; the thread issues them
 * (setting AUTH_SYS credentials first), services the socket, and runs
 * callbacks.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nfsc_i.h"
#include "worker.h"

/* Make rpc's AUTH_SYS credentials cr's before a call of cr's is queued.
 * Returns 0, or -errno if they cannot be built: then the call must not go
 * out at all, since rpc still carries the previous caller's identity. */
static int conn_set_auth(struct nfsc_conn *c, const struct nfsc_cred *cr)
{
	struct AUTH *auth;

	if (c->auth_set && c->auth_cred.uid == cr->uid &&
	    c->auth_cred.gid == cr->gid &&
	    c->auth_cred.ngroups == cr->ngroups &&
	    !memcmp(c->auth_cred.groups, cr->groups,
		    cr->ngroups * sizeof(cr->groups[0])))
		return 0;
	/* AUTH_SYS has room for 16 groups (RFC 5531); later libnfs refuse
	 * more, 4.0 would overrun. nfsc_req_new clamps: this cannot be. */
	if (cr->ngroups > NFSC_NGROUPS_MAX)
		return -EINVAL;
	auth = nfsc_inject_auth_error(c->n, cr->uid) ? NULL :
	       libnfs_authunix_create("cachegw", cr->uid, cr->gid,
				      cr->ngroups, (uint32_t *)cr->groups);
	/* Its only other failure is allocating. */
	if (!auth) {
		fprintf(stderr, "cachegw: cannot build AUTH_SYS credentials "
			"for uid %u: call refused\n", cr->uid);
		return -ENOMEM;
	}
	rpc_set_auth(c->rpc, auth);
	c->auth_cred = *cr;
	c->auth_set = true;
	return 0;
}

uint64_t nfsc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nfsc_conn_issue_queued(struct nfsc_conn *c, bool *stop)
{
	struct nfsc_req *r, *next;
	uint64_t v;
	int ret;

	if (read(c->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&c->lock);
	r = c->head;
	c->head = c->tail = NULL;
	*stop = c->stopping;
	pthread_mutex_unlock(&c->lock);
	for (; r; r = next) {
		next = r->next;
		r->next = NULL;
		if (*stop) {
			nfsc_complete(r, -ECANCELED);
			continue;
		}
		ret = conn_set_auth(c, &r->cred);
		if (!r->sent_ns)
			r->sent_ns = nfsc_now_ns();
		if (ret)
			nfsc_complete(r, ret);
		else if (r->issue(c->rpc, r) != 0)
			nfsc_complete(r, -EIO);
	}
}


static void *conn_thread(void *arg)
{
	struct nfsc_conn *c = arg;
	bool stop = false;

	if (!c->rpc && !nfsc_conn_mount_later(c))
		return NULL;
	while (!stop) {
		struct pollfd p[2] = {
			{ .fd = rpc_get_fd(c->rpc),
			  .events = (short)rpc_which_events(c->rpc) },
			{ .fd = c->efd, .events = POLLIN },
		};

		/* The timeout lets rpc_service() expire calls (timeo). */
		if (poll(p, 2, 100) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN)
			nfsc_conn_issue_queued(c, &stop);
		if (rpc_service(c->rpc, p[0].fd >= 0 ? p[0].revents : 0) < 0) {
			/* The socket is dead and will be reconnected by
			 * libnfs (autoreconnect); pending calls are resent
			 * or time out. Avoid spinning meanwhile. */
			poll(NULL, 0, 10);
		}
	}
	return NULL;
}

int nfsc_start(struct nfsc *n)
{
	unsigned i;
	int ret;

	for (i = 0; i < n->nconn; i++) {
		ret = pthread_create(&n->conns[i].thread, NULL, conn_thread,
				     &n->conns[i]);
		if (ret)
			return -ret;
		n->conns[i].started = true;
	}
	return nfsc_origin_start(n);
}

void nfsc_close(struct nfsc *n)
{
	unsigned i;

	if (!n)
		return;
	nfsc_origin_stop(n);	/* no probe is sent after this */
	for (i = 0; n->conns && i < n->nconn; i++) {
		struct nfsc_conn *c = &n->conns[i];
		uint64_t one = 1;

		if (c->started) {
			pthread_mutex_lock(&c->lock);
			c->stopping = true;
			pthread_mutex_unlock(&c->lock);
			if (write(c->efd, &one, sizeof(one)) < 0)
				perror("cachegw: eventfd write");
			pthread_join(c->thread, NULL);
		}
		/* Destroying the context cancels what is still in flight:
		 * its callbacks run now with RPC_STATUS_CANCEL. */
		if (c->nfs)
			nfs_destroy_context(c->nfs);
		if (c->efd >= 0)
			close(c->efd);
		pthread_mutex_destroy(&c->lock);
	}
	nfsc_origin_free(n);
	free(n->conns);
	free(n->url);
	free(n->server);
	free(n->export);
	free(n->inject.release_path);
	free(n);
}

struct nfsc_req *nfsc_req_new(struct nfsc *n, const struct nfsc_cred *cr,
			      const struct nfsc_fh *fh, nfsc_issue_fn issue,
			      nfsc_cb cb, void *priv)
{
	struct nfsc_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->n = n;
	r->issue = issue;
	r->cb = cb;
	r->priv = priv;
	if (cr) {
		r->cred = *cr;
		if (r->cred.ngroups > NFSC_NGROUPS_MAX)
			r->cred.ngroups = NFSC_NGROUPS_MAX;
	}
	if (fh)
		r->fh = *fh;
	return r;
}

int nfsc_submit(struct nfsc *n, int conn, struct nfsc_req *r)
{
	struct nfsc_conn *c;
	uint64_t one = 1;
	bool stopping;

	if (conn < 0)
		conn = (int)(atomic_fetch_add(&n->rr, 1) % n->nconn);
	c = &n->conns[(unsigned)conn % n->nconn];
	r->conn = c;
	pthread_mutex_lock(&c->lock);
	stopping = c->stopping;
	if (!stopping)
		QUEUE_PUSH(c->head, c->tail, r, next);
	pthread_mutex_unlock(&c->lock);
	if (stopping)
		return -ESHUTDOWN;
	if (write(c->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;	/* cannot happen with a valid eventfd */
	return 0;
}

/* Count r's end (or, status -ETIMEDOUT, a timeout) under its procedure;
 * r->proc is 0 (NULL, never sent by the gateway) until an issue function
 * put it on the wire. */
static void count_call(struct nfsc_req *r, int status)
{
	struct nfsc_proc_stat *s;
	uint64_t now;

	if (!r->proc || r->proc >= NFSC_NPROC)
		return;
	s = &r->n->procs[r->proc];
	if (status == -ETIMEDOUT) {
		__atomic_fetch_add(&s->timeouts, 1, __ATOMIC_RELAXED);
		return;
	}
	now = nfsc_now_ns();
	__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
	if (status)
		__atomic_fetch_add(&s->errors, 1, __ATOMIC_RELAXED);
	lat_hist_add(&s->lat, now > r->sent_ns ? now - r->sent_ns : 0);
}

void nfsc_complete(struct nfsc_req *r, int status)
{
	struct nfsc *n = r->n;

	count_call(r, status);
	if (status == -ETIMEDOUT) {
		r->tries++;
		if (!n->opts.soft || r->tries <= n->opts.retrans) {
			if (r->tries == 1 || r->tries % 10 == 0)
				fprintf(stderr, "cachegw: NFS server %s not "
					"responding, %s\n", n->server,
					n->opts.soft ? "retrying" :
					"still trying");
			if (nfsc_submit(n, (int)r->conn->idx, r) == 0)
				return;
			status = -ECANCELED;
		}
	}
	r->cb(status, r->priv);
	nfsc_req_free(r);
}

void nfsc_req_free(struct nfsc_req *r)
{
	free(r->target);
	free(r);
}

const struct nfsc_fh *nfsc_root(const struct nfsc *n) { return &n->root; }
const char *nfsc_server(const struct nfsc *n) { return n->server; }
const char *nfsc_export(const struct nfsc *n) { return n->export; }
uint32_t nfsc_rsize(const struct nfsc *n)
{
	return __atomic_load_n(&n->rsize, __ATOMIC_RELAXED);
}

uint32_t nfsc_wsize(const struct nfsc *n)
{
	return __atomic_load_n(&n->wsize, __ATOMIC_RELAXED);
}
unsigned nfsc_nconnect(const struct nfsc *n) { return n->nconn; }
uint64_t nfsc_read_bytes(const struct nfsc *n)
{
	return atomic_load(&((struct nfsc *)n)->read_bytes);
}

uint64_t nfsc_write_bytes(const struct nfsc *n)
{
	return atomic_load(&((struct nfsc *)n)->write_bytes);
}

const char *nfsc_proc_name(unsigned proc)
{
	static const char *const names[NFSC_NPROC] = {
		[NFS3_GETATTR] = "getattr", [NFS3_SETATTR] = "setattr",
		[NFS3_LOOKUP] = "lookup", [NFS3_ACCESS] = "access",
		[NFS3_READLINK] = "readlink", [NFS3_READ] = "read",
		[NFS3_WRITE] = "write", [NFS3_CREATE] = "create",
		[NFS3_MKDIR] = "mkdir", [NFS3_SYMLINK] = "symlink",
		[NFS3_MKNOD] = "mknod", [NFS3_REMOVE] = "remove",
		[NFS3_RMDIR] = "rmdir", [NFS3_RENAME] = "rename",
		[NFS3_LINK] = "link", [NFS3_READDIRPLUS] = "readdirplus",
		[NFS3_FSSTAT] = "fsstat", [NFS3_FSINFO] = "fsinfo",
		[NFS3_COMMIT] = "commit",
	};

	return proc < NFSC_NPROC ? names[proc] : NULL;
}

void nfsc_proc_stat(const struct nfsc *n, unsigned proc,
		    struct nfsc_proc_stat *out)
{
	const struct nfsc_proc_stat *s;
	unsigned i;

	memset(out, 0, sizeof(*out));
	if (proc >= NFSC_NPROC)
		return;
	s = &n->procs[proc];
	out->calls = __atomic_load_n(&s->calls, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&s->errors, __ATOMIC_RELAXED);
	out->timeouts = __atomic_load_n(&s->timeouts, __ATOMIC_RELAXED);
	out->lat.count = __atomic_load_n(&s->lat.count, __ATOMIC_RELAXED);
	out->lat.sum_ns = __atomic_load_n(&s->lat.sum_ns, __ATOMIC_RELAXED);
	for (i = 0; i < LAT_HIST_BUCKETS; i++)
		out->lat.bucket[i] =
			__atomic_load_n(&s->lat.bucket[i], __ATOMIC_RELAXED);
}
