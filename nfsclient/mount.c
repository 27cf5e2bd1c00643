/* mount.c - the connections made: nfsc_open parses the URL, makes each
 * connection's libnfs context and eventfd, mounts the export on all of
 * them at once, reads the root's handle and the I/O sizes; when the
 * origin cannot be reached and a root handle is kept for it, it starts
 * without it, and each service thread mounts its connection once the
 * origin answers (nfsc_conn_mount_later).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "nfsc_i.h"
#include "worker.h"
#include "seterr.h"

/* libnfs 4.0 keeps struct nfs_fh private; nfs_get_fh() hands out a pointer
 * to this layout (include/libnfs-private.h). Checked against 4.0.0. */
struct nfsc_libnfs_fh {
	int len;
	char *val;
};

#define NFSC_MOUNT_TIMEOUT_MS 15000

/* libnfs reports mount failures as text; turn them into an errno and a
 * message that names the problem for the operator. */
static int classify_mount_error(const char *msg)
{
	if (strstr(msg, "NOENT") || strstr(msg, "No such") ||
	    strstr(msg, "ACCES") || strstr(msg, "mount failed") ||
	    strstr(msg, "MNT3ERR"))
		return -ENOENT;
	if (strstr(msg, "refused"))
		return -ECONNREFUSED;
	if (strstr(msg, "imeout") || strstr(msg, "timed out"))
		return -ETIMEDOUT;
	return -EHOSTUNREACH;
}

/* A fresh libnfs context for c with the URL's arguments (nfsport=, ...). */
static int conn_context(struct nfsc *n, struct nfsc_conn *c, char *err,
			size_t errlen)
{
	struct nfs_url *u;

	c->nfs = nfs_init_context();
	if (!c->nfs) {
		seterr(err, errlen, "out of memory creating an NFS context");
		return -ENOMEM;
	}
	u = nfs_parse_url_dir(c->nfs, n->url);
	if (!u) {
		seterr(err, errlen, "invalid URL '%s': %s", n->url,
		       nfs_get_error(c->nfs));
		return -EINVAL;
	}
	if (!u->server || !*u->server || !u->path || !*u->path) {
		seterr(err, errlen, "invalid URL '%s': expected "
		       "nfs://SERVER/EXPORT[?nfsport=N&mountport=N]", n->url);
		nfs_destroy_url(u);
		return -EINVAL;
	}
	if (!n->server) {
		n->server = strdup(u->server);
		n->export = strdup(u->path);
		if (!n->server || !n->export) {
			nfs_destroy_url(u);
			return -ENOMEM;
		}
	}
	nfs_destroy_url(u);
	nfs_set_version(c->nfs, NFS_V3);
	nfs_set_autoreconnect(c->nfs, -1);
	return 0;
}

/* Mount the export on c's context, waiting at most timeout_ms. */
static int conn_mount(struct nfsc *n, struct nfsc_conn *c, int timeout_ms,
		      char *err, size_t errlen)
{
	int ret;

	nfs_set_timeout(c->nfs, timeout_ms);
	ret = nfs_mount(c->nfs, n->server, n->export);
	if (ret != 0) {
		const char *msg = nfs_get_error(c->nfs);

		ret = classify_mount_error(msg ? msg : "");
		if (ret == -ENOENT)
			seterr(err, errlen, "cannot mount export '%s' from %s: %s",
			       n->export, n->server, msg);
		else
			seterr(err, errlen, "cannot connect to NFS server %s "
			       "(unreachable?): %s", n->server, msg);
		return ret;
	}
	/* From now on calls time out after timeo; hard mounts resend. */
	nfs_set_timeout(c->nfs, (int)n->opts.timeo * 100);
	c->rpc = nfs_get_rpc_context(c->nfs);
	return 0;
}

/* c's context and eventfd, not mounted yet (conns_mount). */
static int conn_init(struct nfsc *n, struct nfsc_conn *c, unsigned idx,
		     char *err, size_t errlen)
{
	int ret;

	c->n = n;
	c->idx = idx;
	c->efd = -1;
	pthread_mutex_init(&c->lock, NULL);
	ret = conn_context(n, c, err, errlen);
	if (ret)
		return ret;
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0) {
		ret = -errno;
		seterr(err, errlen, "eventfd: %s", strerror(errno));
		return ret;
	}
	return 0;
}

static int read_root_fh(struct nfsc *n, struct nfsc_fh *root, char *err,
			size_t errlen)
{
	struct nfs_context *nfs = n->conns[0].nfs;
	struct nfsfh *fh;
	const struct nfsc_libnfs_fh *lfh;
	int ret;

	ret = nfs_open(nfs, "/", O_RDONLY, &fh);
	if (ret) {
		seterr(err, errlen, "cannot open the root of export '%s': %s",
		       n->export, nfs_get_error(nfs));
		return -EIO;
	}
	lfh = (const struct nfsc_libnfs_fh *)nfs_get_fh(fh);
	if (!lfh || lfh->len <= 0 || lfh->len > NFSC_FH_MAX) {
		nfs_close(nfs, fh);
		seterr(err, errlen, "export '%s' gave a root file handle of "
		       "unexpected size", n->export);
		return -EPROTO;
	}
	root->len = (uint32_t)lfh->len;
	memcpy(root->data, lfh->val, root->len);
	nfs_close(nfs, fh);
	return 0;
}

/* The connections' mounts, made at once: each is a few round trips (the
 * mount protocol, then NFS), and with a far origin one after the other
 * cost every start (and every takeover) that many times over. Connection 0
 * reads the root's handle as soon as it is mounted. The contexts are made
 * before, one after the other: libnfs seeds each one's XIDs from an
 * unlocked static and the clock, and contexts made at the same moment
 * would send the same XIDs on different connections. */
struct conn_start {
	struct nfsc *n;
	int ret;
	bool root_failed;	/* conn 0: mounted, the root unreadable */
	char err[512];
};

static void conn_start(void *arg, size_t i)
{
	struct conn_start *s = (struct conn_start *)arg + i;
	struct nfsc *n = s->n;

	s->ret = conn_mount(n, &n->conns[i], NFSC_MOUNT_TIMEOUT_MS, s->err,
			    sizeof(s->err));
	if (!s->ret && i == 0) {
		s->ret = read_root_fh(n, &n->root, s->err, sizeof(s->err));
		s->root_failed = s->ret != 0;
	}
}

/* Mount every connection (each made, unmounted). 0; or connection 0's
 * failure, its message in err (*ret0 is it, *root_err set if the mount
 * worked and the root's handle could not be read); or, connection 0
 * mounted, another's failure (*ret0 0). */
static int conns_mount(struct nfsc *n, int *ret0, bool *root_err, char *err,
		       size_t errlen)
{
	struct conn_start *s = calloc(n->nconn, sizeof(*s));
	unsigned i;
	int ret = 0;

	*ret0 = 0;
	*root_err = false;
	if (!s) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < n->nconn; i++)
		s[i].n = n;
	worker_parallel(n->nconn, n->nconn, conn_start, s);
	for (i = 0; i < n->nconn && !ret; i++) {
		ret = s[i].ret;
		if (ret)
			seterr(err, errlen, "%s", s[i].err);
	}
	*ret0 = s[0].ret;
	*root_err = s[0].root_failed;
	free(s);
	return ret;
}

/* rsize and wsize from FSINFO as nfs_mount() read it on c (rtmax/wtmax are
 * the server's limits), or the defaults without it; capped by the options. */
static void set_io_sizes(struct nfsc *n, struct nfsc_conn *c)
{
	uint64_t rmax = c ? nfs_get_readmax(c->nfs) : 1u << 20;
	uint64_t wmax = c ? nfs_get_writemax(c->nfs) : 1u << 20;
	uint32_t rs = (uint32_t)(rmax ? rmax : 65536);
	uint32_t ws = (uint32_t)(wmax ? wmax : 65536);

	/* An rtmax of 1 would turn one fetch into millions of READs: sizes
	 * below the floor are raised to it (a server that then answers
	 * short is read in more rounds, as any short READ is). */
	if (rs < NFSC_IO_MIN || ws < NFSC_IO_MIN) {
		fprintf(stderr, "cachegw: origin's FSINFO rtmax %u, wtmax %u: "
			"raised to at least %u\n", rs, ws, NFSC_IO_MIN);
		if (rs < NFSC_IO_MIN)
			rs = NFSC_IO_MIN;
		if (ws < NFSC_IO_MIN)
			ws = NFSC_IO_MIN;
	}
	if (n->opts.rsize && n->opts.rsize < rs)
		rs = n->opts.rsize;
	if (n->opts.wsize && n->opts.wsize < ws)
		ws = n->opts.wsize;
	__atomic_store_n(&n->rsize, rs, __ATOMIC_RELAXED);
	__atomic_store_n(&n->wsize, ws, __ATOMIC_RELAXED);
}

/* The origin cannot be reached now: given a root handle kept for this
 * export (offline=, or a successor), start without it (each connection is
 * made by its thread once the origin answers). */
static bool may_start_lost(struct nfsc *n, const struct nfsc_opts *opts,
			   int ret)
{
	char where[NFSC_NAME_MAX * 2 + 8];

	if (!opts->known_root || !opts->known_where ||
	    (ret != -ECONNREFUSED && ret != -EHOSTUNREACH &&
	     ret != -ETIMEDOUT) || !n->server)
		return false;
	snprintf(where, sizeof(where), "%s:%s", n->server, n->export);
	return strcmp(where, opts->known_where) == 0;
}

int nfsc_open(const char *url, const struct nfsc_opts *opts, struct nfsc **out,
	      char *err, size_t errlen)
{
	bool root_err = false;
	struct nfsc *n;
	unsigned i;
	int ret, ret0;

	if (strncmp(url, "nfs://", 6) != 0) {
		seterr(err, errlen, "invalid URL '%s': expected "
		       "nfs://SERVER/EXPORT[?nfsport=N&mountport=N]", url);
		return -EINVAL;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->opts = *opts;
	nfsc_origin_init(n);
	n->opts.known_root = NULL;	/* the caller's memory */
	n->opts.known_where = NULL;
	n->url = strdup(url);
	if (!n->url) {
		nfsc_close(n);
		return -ENOMEM;
	}
	nfsc_inject_from_env(n);
	if (!n->opts.nconnect)
		n->opts.nconnect = NFSC_NCONNECT_DEFAULT;
	if (n->opts.nconnect > NFSC_NCONNECT_MAX)
		n->opts.nconnect = NFSC_NCONNECT_MAX;
	if (!n->opts.timeo)
		n->opts.timeo = NFSC_TIMEO_DEFAULT;
	if (!n->opts.retrans)
		n->opts.retrans = NFSC_RETRANS_DEFAULT;
	n->nconn = n->opts.nconnect;
	n->conns = calloc(n->nconn, sizeof(*n->conns));
	if (!n->conns) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (i = 0; i < n->nconn; i++)
		n->conns[i].efd = -1;	/* for nfsc_close: not made yet */
	/* Contexts (the URL parsed; n->server, n->export) and eventfds, no
	 * I/O; then the mounts, at once. */
	for (i = 0; i < n->nconn; i++) {
		ret = conn_init(n, &n->conns[i], i, err, errlen);
		if (ret)
			goto out_free;
	}
	ret = conns_mount(n, &ret0, &root_err, err, errlen);
	if (ret && ret == ret0 && !root_err && may_start_lost(n, opts, ret)) {
		/* Connection 0 could not reach the origin: every connection
		 * is made by its thread once it answers
		 * (nfsc_conn_mount_later). */
		if (n->opts.offline)
			fprintf(stderr, "cachegw: %s: starting without the "
				"origin (offline=%u), from what the cache "
				"holds\n", err, n->opts.offline);
		else
			fprintf(stderr, "cachegw: %s: starting without the "
				"origin; calls to it wait until it answers\n",
				err);
		for (i = 0; i < n->nconn; i++)
			n->conns[i].rpc = NULL;
		n->started_lost = true;
		ret = 0;
	}
	if (ret)
		goto out_free;
	if (n->started_lost) {
		n->root = *opts->known_root;
		set_io_sizes(n, NULL);
		nfsc_origin_start_lost(n);
	} else {
		set_io_sizes(n, &n->conns[0]);
	}
	*out = n;
	return 0;

out_free:
	nfsc_close(n);
	return ret;
}

/* Started without the origin: mount c when the origin answers, every
 * 2 s until then. Calls queued meanwhile wait (the idempotent ones were
 * refused at once: the origin is lost); a stop cancels them. Returns
 * false if the gateway stops first. */
bool nfsc_conn_mount_later(struct nfsc_conn *c)
{
	struct nfsc *n = c->n;
	uint64_t next_try = 0;
	char err[256];
	bool stop;

	for (;;) {
		struct pollfd p = { .fd = c->efd, .events = POLLIN };
		uint64_t v, now = nfsc_now_ns();

		pthread_mutex_lock(&c->lock);
		stop = c->stopping;
		pthread_mutex_unlock(&c->lock);
		if (stop) {
			nfsc_conn_issue_queued(c, &stop);	/* cancels them */
			return false;
		}
		if (now >= next_try) {
			/* A context whose mount failed is made afresh. */
			if (c->nfs)
				nfs_destroy_context(c->nfs);
			c->nfs = NULL;
			if (conn_context(n, c, err, sizeof(err)) == 0 &&
			    conn_mount(n, c, 5000, err, sizeof(err)) == 0)
				break;
			now = nfsc_now_ns();
			next_try = now + 2000000000u;
		}
		/* Woken early by a queued call or a stop: look at stopping;
		 * the next try is still 2 s after the last. */
		if (poll(&p, 1, (int)((next_try - now) / 1000000u) + 1) > 0 &&
		    read(c->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return false;
	}
	if (c->idx == 0) {
		struct nfsc_fh root;

		set_io_sizes(n, c);
		if (read_root_fh(n, &root, err, sizeof(err)) == 0 &&
		    (root.len != n->root.len ||
		     memcmp(root.data, n->root.data, root.len)))
			fprintf(stderr, "cachegw: the export's root file "
				"handle is not the one kept in the cache "
				"(the export was remade?): calls on it will "
				"fail as stale; restart the gateway\n");
	}
	fprintf(stderr, "cachegw: connection %u to %s made\n", c->idx,
		n->server);
	nfsc_conn_issue_queued(c, &stop);	/* what waited, now */
	return !stop;
}
