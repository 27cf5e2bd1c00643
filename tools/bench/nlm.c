/* cachegw-bench-nlm — the lock figures of `cachegw-bench locks`: N
 * uncontended lock/unlock pairs of one byte range, one after the other,
 * either through a mount (fcntl F_SETLK, what a user's process does) or
 * as a direct NLM v4 client of the origin (libnfs's raw LOCK and UNLOCK,
 * one call on the wire at a time, no thread between: the baseline).
 *
 *   cachegw-bench-nlm fcntl PATH N
 *   cachegw-bench-nlm nlm nfs://HOST/EXPORT?nlmport=P[&nfsport=..] FILE N
 *   cachegw-bench-nlm whole nfs://HOST/EXPORT?nlmport=P[&nfsport=..] FILE
 *
 * FILE is a name in the export's root. WARM (5) pairs go first, not
 * counted: the first lock of a client costs more (the origin's NSM
 * monitoring of a new client, the gateway's NLM connection). Prints one
 * line:
 *   pairs=N secs=S pairs_per_s=R lock_us_median=M lock_us_p99=P
 *   unlock_us_median=U
 * Exit status 0, or 1 with a message on the first error (a lock refused
 * included: nothing else may hold the range).
 *
 * whole: one write lock of the whole FILE, without waiting, let go at
 * once, as a direct client of the origin (test 107: nothing is left
 * there): prints "granted", exit 0, or "denied", exit 3. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nfsc.h"
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nlm.h>

#define WARM 5

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of v[0..n) (sorted here), nearest rank. */
static double quantile(double *v, size_t n, double q)
{
	size_t i;

	qsort(v, n, sizeof(*v), cmp_double);
	i = (size_t)(q * (double)n + 0.999999);
	if (i < 1)
		i = 1;
	if (i > n)
		i = n;
	return v[i - 1];
}

static void report(size_t n, double secs, double *lock_us, double *unlock_us)
{
	double lm = quantile(lock_us, n, 0.5), lp = quantile(lock_us, n, 0.99);

	printf("pairs=%zu secs=%.3f pairs_per_s=%.0f lock_us_median=%.1f "
	       "lock_us_p99=%.1f unlock_us_median=%.1f\n", n, secs,
	       (double)n / secs, lm, lp, quantile(unlock_us, n, 0.5));
}

static int run_fcntl(const char *path, size_t n, double *lk, double *ul)
{
	struct flock fl = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	double t0, t1, t2, start = 0;
	size_t i;
	int fd = open(path, O_RDWR);

	if (fd < 0) {
		fprintf(stderr, "bench-nlm: open %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	for (i = 0; i < n + WARM; i++) {
		if (i == WARM)
			start = now_us();
		fl.l_type = F_WRLCK;
		t0 = now_us();
		if (fcntl(fd, F_SETLK, &fl) < 0) {
			fprintf(stderr, "bench-nlm: lock %s: %s\n", path,
				strerror(errno));
			close(fd);
			return 1;
		}
		t1 = now_us();
		fl.l_type = F_UNLCK;
		if (fcntl(fd, F_SETLK, &fl) < 0) {
			fprintf(stderr, "bench-nlm: unlock %s: %s\n", path,
				strerror(errno));
			close(fd);
			return 1;
		}
		t2 = now_us();
		if (i >= WARM) {
			lk[i - WARM] = t1 - t0;
			ul[i - WARM] = t2 - t1;
		}
	}
	report(n, (now_us() - start) / 1e6, lk, ul);
	close(fd);
	return 0;
}

/* ---- the direct client: one raw call at a time ---- */

struct call {
	bool done;
	int status;		/* RPC status */
	int nlm;		/* NLM status (LOCK, UNLOCK) */
	char *err;
};

static void on_connect(struct rpc_context *rpc, int status, void *data,
		       void *priv)
{
	struct call *c = priv;

	(void)rpc;
	c->done = true;
	c->status = status;
	if (status != RPC_STATUS_SUCCESS && data)
		c->err = strdup(data);
}

static void on_lock(struct rpc_context *rpc, int status, void *data,
		    void *priv)
{
	struct call *c = priv;

	(void)rpc;
	c->done = true;
	c->status = status;
	if (status == RPC_STATUS_SUCCESS)
		c->nlm = (int)((NLM4_LOCKres *)data)->status;
	else if (data)
		c->err = strdup(data);
}

static void on_unlock(struct rpc_context *rpc, int status, void *data,
		      void *priv)
{
	struct call *c = priv;

	(void)rpc;
	c->done = true;
	c->status = status;
	if (status == RPC_STATUS_SUCCESS)
		c->nlm = (int)((NLM4_UNLOCKres *)data)->status;
	else if (data)
		c->err = strdup(data);
}

/* Serve rpc until c is done (10 s at most). */
static int wait_call(struct rpc_context *rpc, struct call *c)
{
	double end = now_us() + 10e6;

	while (!c->done) {
		struct pollfd p = { .fd = rpc_get_fd(rpc),
				    .events = (short)rpc_which_events(rpc) };

		if (now_us() > end)
			return -ETIMEDOUT;
		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			return -errno;
		if (rpc_service(rpc, p.revents) < 0)
			return -EIO;
	}
	return c->status == RPC_STATUS_SUCCESS ? 0 : -EIO;
}

static int url_nlmport(const char *url)
{
	const char *q = strstr(url, "nlmport=");

	return q ? atoi(q + 8) : 0;
}

/* whole: n 0, the whole file once, no figures. */
static int run_nlm(const char *url, const char *name, size_t n, double *lk,
		   double *ul)
{
	bool whole = n == 0;
	size_t warm = whole ? 0 : WARM;
	struct nfsc_opts opts = { .nconnect = 1 };
	struct nfsc_cred cr = { 0 };
	struct nfsc_fh fh;
	struct nfsc *nc = NULL;
	struct rpc_context *rpc = NULL;
	struct call c = { 0 };
	char err[256], host[64], caller[128];
	char oh[] = "cachegw-bench-nlm";
	double t0, t1, t2, start = 0;
	int port = url_nlmport(url), rc = 1;
	struct nfsc_attr attr;
	struct nlm4_lock l;
	bool has_attr;
	size_t i;

	if (port <= 0) {
		fprintf(stderr, "bench-nlm: the URL has no nlmport=\n");
		return 1;
	}
	if (nfsc_open(url, &opts, &nc, err, sizeof(err))) {
		fprintf(stderr, "bench-nlm: %s\n", err);
		return 1;
	}
	if (nfsc_start(nc) ||
	    nfsc_lookup(nc, &cr, nfsc_root(nc), name, &fh, &attr, &has_attr)) {
		fprintf(stderr, "bench-nlm: cannot look %s up\n", name);
		goto out;
	}
	rpc = rpc_init_context();
	if (!rpc ||
	    rpc_connect_port_async(rpc, nfsc_server(nc), port, NLM_PROGRAM,
				   NLM_V4, on_connect, &c) ||
	    wait_call(rpc, &c)) {
		fprintf(stderr, "bench-nlm: cannot connect to NLM at port "
			"%d: %s\n", port, c.err ? c.err : "no answer");
		goto out;
	}
	if (gethostname(host, sizeof(host)))
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = 0;
	snprintf(caller, sizeof(caller), "%s.bench-nlm-%d", host,
		 (int)getpid());
	l = (struct nlm4_lock){
		.caller_name = caller,
		.fh = { .data = { .data_len = fh.len,
				  .data_val = (char *)fh.data } },
		.oh = oh, .svid = (unsigned)getpid(), .l_offset = 0,
		.l_len = whole ? 0 : 1,
	};
	for (i = 0; i < (whole ? 1 : n + warm); i++) {
		NLM4_LOCKargs la = { .block = 0, .exclusive = 1, .lock = l };
		NLM4_UNLOCKargs ua = { .lock = l };

		if (i == warm)
			start = now_us();
		c = (struct call){ 0 };
		t0 = now_us();
		if (rpc_nlm4_lock_async(rpc, on_lock, &la, &c) ||
		    wait_call(rpc, &c) ||
		    (c.nlm != NLM4_GRANTED && !(whole && c.nlm == NLM4_DENIED))) {
			fprintf(stderr, "bench-nlm: LOCK: %s (NLM status %d)\n",
				c.err ? c.err : "", c.nlm);
			goto out;
		}
		t1 = now_us();
		if (whole && c.nlm == NLM4_DENIED) {
			printf("denied\n");
			rc = 3;
			goto out;
		}
		c = (struct call){ 0 };
		if (rpc_nlm4_unlock_async(rpc, on_unlock, &ua, &c) ||
		    wait_call(rpc, &c) || c.nlm != NLM4_GRANTED) {
			fprintf(stderr, "bench-nlm: UNLOCK: %s (NLM status "
				"%d)\n", c.err ? c.err : "", c.nlm);
			goto out;
		}
		t2 = now_us();
		if (!whole && i >= warm) {
			lk[i - warm] = t1 - t0;
			ul[i - warm] = t2 - t1;
		}
	}
	if (whole)
		printf("granted\n");
	else
		report(n, (now_us() - start) / 1e6, lk, ul);
	rc = 0;
out:
	free(c.err);
	if (rpc)
		rpc_destroy_context(rpc);
	nfsc_close(nc);
	return rc;
}

int main(int argc, char **argv)
{
	double *lk, *ul;
	long n;
	int rc;

	if (argc == 4 && !strcmp(argv[1], "whole"))
		return run_nlm(argv[2], argv[3], 0, NULL, NULL);
	if (argc < 4 || (strcmp(argv[1], "fcntl") && strcmp(argv[1], "nlm")) ||
	    (!strcmp(argv[1], "nlm") && argc != 5) ||
	    (!strcmp(argv[1], "fcntl") && argc != 4)) {
		fprintf(stderr, "usage: cachegw-bench-nlm fcntl PATH N\n"
			"       cachegw-bench-nlm nlm nfs://HOST/EXPORT?nlmport=P "
			"FILE N\n"
			"       cachegw-bench-nlm whole nfs://HOST/EXPORT?nlmport=P "
			"FILE\n");
		return 2;
	}
	n = atol(argv[argc - 1]);
	if (n < 1 || n > 10000000) {
		fprintf(stderr, "bench-nlm: bad N %s\n", argv[argc - 1]);
		return 2;
	}
	lk = calloc((size_t)n, sizeof(*lk));
	ul = calloc((size_t)n, sizeof(*ul));
	if (!lk || !ul) {
		fprintf(stderr, "bench-nlm: out of memory\n");
		return 1;
	}
	if (!strcmp(argv[1], "fcntl"))
		rc = run_fcntl(argv[2], (size_t)n, lk, ul);
	else
		rc = run_nlm(argv[2], argv[3], (size_t)n, lk, ul);
	free(lk);
	free(ul);
	return rc;
}
