/* nfsc_fake.h - a small NFSv3 origin inside a unit test, so that
 * nfsclient/ and the real libnfs under it meet replies the test wrote:
 * ONC RPC over TCP (RFC 5531, record marking) on 127.0.0.1, one ephemeral
 * port for MOUNT and NFS, served by one thread. It answers what a mount
 * needs by itself (NULL, MNT, EXPORT, FSINFO, GETATTR and ACCESS of the
 * root); every NFS call goes first to the test's handler, which writes
 * the result in XDR (RFC 1813), drops the call (no answer ever) or closes
 * the connection. Each call is logged: the connection it came on, its XID,
 * program, procedure and AUTH_SYS credentials. The handler runs with
 * f->lock held, so a test reads what the handler keeps under that lock. */
#ifndef CACHEGW_NFSC_FAKE_H
#define CACHEGW_NFSC_FAKE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "check.h"
#include "condwait.h"
#include "nfsc.h"

#define FAKE_PROG_MOUNT 100005
#define FAKE_PROG_NFS 100003
#define FAKE_MAXCONN 16
#define FAKE_LOG 4096

/* ---- XDR, written ---- */

struct xw {
	uint8_t *b;
	size_t len, cap;
};

static inline void xw_bytes(struct xw *w, const void *p, size_t len)
{
	size_t pad = (4 - len % 4) % 4;

	if (w->len + len + pad > w->cap) {
		w->cap = (w->len + len + pad) * 2 + 256;
		w->b = realloc(w->b, w->cap);
		CHECK(w->b);
	}
	if (len)
		memcpy(w->b + w->len, p, len);
	memset(w->b + w->len + len, 0, pad);
	w->len += len + pad;
}

static inline void xw_u32(struct xw *w, uint32_t v)
{
	uint32_t be = htonl(v);

	xw_bytes(w, &be, 4);
}

static inline void xw_u64(struct xw *w, uint64_t v)
{
	xw_u32(w, (uint32_t)(v >> 32));
	xw_u32(w, (uint32_t)v);
}

/* Variable-length opaque and string: length, then the bytes padded. */
static inline void xw_opaque(struct xw *w, const void *p, uint32_t len)
{
	xw_u32(w, len);
	xw_bytes(w, p, len);
}

static inline void xw_string(struct xw *w, const char *s)
{
	xw_opaque(w, s, (uint32_t)strlen(s));
}

static inline void xw_fh(struct xw *w, const struct nfsc_fh *fh)
{
	xw_opaque(w, fh->data, fh->len);
}

/* fattr3 as it goes on the wire, field for field. */
struct fake_fattr {
	uint32_t type, mode, nlink, uid, gid;
	uint64_t size, used;
	uint32_t rdev1, rdev2;
	uint64_t fsid, fileid;
	uint32_t atime[2], mtime[2], ctime[2];	/* seconds, nseconds */
};

static inline void xw_fattr3(struct xw *w, const struct fake_fattr *a)
{
	xw_u32(w, a->type);
	xw_u32(w, a->mode);
	xw_u32(w, a->nlink);
	xw_u32(w, a->uid);
	xw_u32(w, a->gid);
	xw_u64(w, a->size);
	xw_u64(w, a->used);
	xw_u32(w, a->rdev1);
	xw_u32(w, a->rdev2);
	xw_u64(w, a->fsid);
	xw_u64(w, a->fileid);
	xw_u32(w, a->atime[0]);
	xw_u32(w, a->atime[1]);
	xw_u32(w, a->mtime[0]);
	xw_u32(w, a->mtime[1]);
	xw_u32(w, a->ctime[0]);
	xw_u32(w, a->ctime[1]);
}

/* post_op_attr: NULL for none. */
static inline void xw_post_op(struct xw *w, const struct fake_fattr *a)
{
	xw_u32(w, a != NULL);
	if (a)
		xw_fattr3(w, a);
}

/* wcc_data: pre_op_attr (size, mtime, ctime of *pre; NULL for none),
 * then post_op_attr. */
static inline void xw_wcc(struct xw *w, const struct fake_fattr *pre,
			  const struct fake_fattr *post)
{
	xw_u32(w, pre != NULL);
	if (pre) {
		xw_u64(w, pre->size);
		xw_u32(w, pre->mtime[0]);
		xw_u32(w, pre->mtime[1]);
		xw_u32(w, pre->ctime[0]);
		xw_u32(w, pre->ctime[1]);
	}
	xw_post_op(w, post);
}

/* ---- XDR, read (what a call carries) ---- */

struct xr {
	const uint8_t *p;
	size_t len, off;
	bool bad;			/* read past the end */
};

static inline uint32_t xr_u32(struct xr *r)
{
	uint32_t be;

	if (r->off + 4 > r->len) {
		r->bad = true;
		return 0;
	}
	memcpy(&be, r->p + r->off, 4);
	r->off += 4;
	return ntohl(be);
}

static inline uint64_t xr_u64(struct xr *r)
{
	uint64_t hi = xr_u32(r);

	return hi << 32 | xr_u32(r);
}

/* Fixed-length opaque of len bytes (padded) into out. */
static inline void xr_fixed(struct xr *r, void *out, size_t len)
{
	size_t padded = (len + 3) & ~(size_t)3;

	if (r->off + padded > r->len) {
		r->bad = true;
		memset(out, 0, len);
		return;
	}
	memcpy(out, r->p + r->off, len);
	r->off += padded;
}

/* Variable-length opaque into out (at most max bytes): its length. */
static inline uint32_t xr_opaque(struct xr *r, void *out, size_t max)
{
	uint32_t len = xr_u32(r);

	if (len > max || r->bad) {
		r->bad = true;
		return 0;
	}
	xr_fixed(r, out, len);
	return len;
}

static inline void xr_string(struct xr *r, char *out, size_t size)
{
	uint32_t len = xr_opaque(r, out, size - 1);

	out[len] = 0;
}

static inline void xr_fh(struct xr *r, struct nfsc_fh *fh)
{
	fh->len = xr_opaque(r, fh->data, NFSC_FH_MAX);
}

static inline bool fh_eq(const struct nfsc_fh *a, const struct nfsc_fh *b)
{
	return a->len == b->len && !memcmp(a->data, b->data, a->len);
}

/* ---- the origin ---- */

struct fake_call {
	unsigned conn;			/* connections accepted before */
	uint32_t xid, prog, vers, proc;
	uint32_t flavor;		/* 1: AUTH_SYS, then: */
	uint32_t uid, gid, ngroups, groups[16];
};

enum fake_act {
	FAKE_DEFAULT,			/* what the origin answers */
	FAKE_REPLY,			/* the handler wrote the result */
	FAKE_DROP,			/* no answer, ever */
	FAKE_CLOSE,			/* close the connection, no answer */
};

struct fake;
/* args: the call's arguments; res: the result to write (after the
 * accepted-reply header). Runs on the origin's thread, f->lock held. */
typedef enum fake_act (*fake_fn)(struct fake *f, const struct fake_call *c,
				 struct xr *args, struct xw *res);

struct fake_conn {
	int fd;
	unsigned id;
	uint8_t *in;			/* received, not yet a record */
	size_t inlen, incap;
	struct xw rec;			/* fragments of a record so far */
};

struct fake {
	/* Set before fake_start, read-only after. */
	struct nfsc_fh root;
	uint32_t mnt_status;		/* MNT's answer: 0, or MNT3ERR_* */
	uint32_t rtmax, wtmax;		/* FSINFO's */
	struct fake_fattr root_attr;
	/* Under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* at each call and close */
	fake_fn fn;
	void *priv;
	struct fake_call log[FAKE_LOG];
	unsigned nlog;
	unsigned accepted;
	unsigned closed;		/* connections closed by the origin */
	bool close_all, stop;
	/* The origin's thread. */
	int lfd, kick;
	uint16_t port;
	pthread_t t;
	struct fake_conn c[FAKE_MAXCONN];
	unsigned nc;
};

static inline void fake_conn_close(struct fake *f, unsigned i)
{
	close(f->c[i].fd);
	free(f->c[i].in);
	free(f->c[i].rec.b);
	f->c[i] = f->c[--f->nc];
	f->closed++;
}

/* What the origin answers by itself. */
static inline enum fake_act fake_default(struct fake *f,
					 const struct fake_call *c,
					 struct xr *a, struct xw *res)
{
	struct nfsc_fh fh;
	char path[1024];

	if (c->proc == 0)				/* NULL */
		return FAKE_REPLY;
	if (c->prog == FAKE_PROG_MOUNT) {
		switch (c->proc) {
		case 1:					/* MNT */
			xr_string(a, path, sizeof(path));
			xw_u32(res, f->mnt_status);
			if (!f->mnt_status) {
				xw_fh(res, &f->root);
				xw_u32(res, 1);		/* flavours: */
				xw_u32(res, 1);		/* AUTH_SYS */
			}
			return FAKE_REPLY;
		case 3:					/* UMNT */
			return FAKE_REPLY;
		case 5:					/* EXPORT */
			xw_u32(res, 0);			/* none */
			return FAKE_REPLY;
		}
		return FAKE_DROP;
	}
	switch (c->proc) {
	case 1:						/* GETATTR */
		xr_fh(a, &fh);
		if (!fh_eq(&fh, &f->root)) {
			xw_u32(res, 70);		/* STALE */
			return FAKE_REPLY;
		}
		xw_u32(res, 0);
		xw_fattr3(res, &f->root_attr);
		return FAKE_REPLY;
	case 4:						/* ACCESS */
		xr_fh(a, &fh);
		xw_u32(res, 0);
		xw_post_op(res, NULL);
		xw_u32(res, xr_u32(a));		/* all asked for */
		return FAKE_REPLY;
	case 19:					/* FSINFO */
		xw_u32(res, 0);
		xw_post_op(res, NULL);
		xw_u32(res, f->rtmax);
		xw_u32(res, f->rtmax);
		xw_u32(res, 4096);
		xw_u32(res, f->wtmax);
		xw_u32(res, f->wtmax);
		xw_u32(res, 4096);
		xw_u32(res, 65536);
		xw_u64(res, UINT64_MAX >> 1);
		xw_u32(res, 0);
		xw_u32(res, 1);
		xw_u32(res, 0x1b);
		return FAKE_REPLY;
	}
	return FAKE_DROP;
}

static inline void fake_send(int fd, const struct xw *w)
{
	size_t off = 0;

	while (off < w->len) {
		ssize_t k = send(fd, w->b + off, w->len - off, MSG_NOSIGNAL);

		if (k <= 0)
			return;		/* the client went away */
		off += (size_t)k;
	}
}

/* One whole call record from connection ci: false to close it. */
static inline bool fake_call_one(struct fake *f, unsigned ci,
				 const uint8_t *p, size_t len)
{
	struct xr a = { .p = p, .len = len };
	struct fake_call c = { .conn = f->c[ci].id };
	struct xw res = { 0 }, out = { 0 };
	enum fake_act act = FAKE_DEFAULT;
	uint32_t clen, vlen;
	uint8_t skip[400];
	size_t args_at;

	c.xid = xr_u32(&a);
	if (xr_u32(&a) != 0 || xr_u32(&a) != 2)	/* CALL, RPC version 2 */
		return false;
	c.prog = xr_u32(&a);
	c.vers = xr_u32(&a);
	c.proc = xr_u32(&a);
	c.flavor = xr_u32(&a);
	clen = xr_u32(&a);
	if (c.flavor == 1) {		/* AUTH_SYS (RFC 5531 9.2) */
		size_t end = a.off + clen;
		char machine[256];

		xr_u32(&a);			/* stamp */
		xr_string(&a, machine, sizeof(machine));
		c.uid = xr_u32(&a);
		c.gid = xr_u32(&a);
		c.ngroups = xr_u32(&a);
		for (uint32_t i = 0; i < c.ngroups && i < 16; i++)
			c.groups[i] = xr_u32(&a);
		a.off = end;
	} else {
		if (clen > sizeof(skip))
			return false;
		xr_fixed(&a, skip, clen);
	}
	xr_u32(&a);				/* verifier */
	vlen = xr_u32(&a);
	if (vlen > sizeof(skip) || a.bad)
		return false;
	xr_fixed(&a, skip, vlen);

	args_at = a.off;
	pthread_mutex_lock(&f->lock);
	if (f->nlog < FAKE_LOG)
		f->log[f->nlog++] = c;
	if (f->fn && c.prog == FAKE_PROG_NFS)
		act = f->fn(f, &c, &a, &res);
	if (act == FAKE_DEFAULT) {
		res.len = 0;
		a.off = args_at;
		a.bad = false;
		act = fake_default(f, &c, &a, &res);
	}
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);

	if (act == FAKE_REPLY) {
		xw_u32(&out, 0);		/* record marker, set below */
		xw_u32(&out, c.xid);
		xw_u32(&out, 1);		/* REPLY */
		xw_u32(&out, 0);		/* MSG_ACCEPTED */
		xw_u32(&out, 0);		/* verifier AUTH_NONE, */
		xw_u32(&out, 0);		/* empty */
		xw_u32(&out, 0);		/* SUCCESS */
		xw_bytes(&out, res.b, res.len);
		{
			uint32_t mark = htonl(0x80000000u |
					      (uint32_t)(out.len - 4));

			memcpy(out.b, &mark, 4);
		}
		fake_send(f->c[ci].fd, &out);
	}
	free(res.b);
	free(out.b);
	return act != FAKE_CLOSE;
}

/* Records in connection ci's input: false to close it. */
static inline bool fake_conn_input(struct fake *f, unsigned ci)
{
	struct fake_conn *k = &f->c[ci];
	size_t off = 0;
	bool ok = true;

	while (ok && k->inlen - off >= 4) {
		uint32_t mark, flen;

		memcpy(&mark, k->in + off, 4);
		mark = ntohl(mark);
		flen = mark & 0x7fffffffu;
		if (k->inlen - off - 4 < flen)
			break;
		/* A fragment: kept until the last of its record. */
		if (k->rec.len + flen > k->rec.cap) {
			k->rec.cap = k->rec.len + flen + 256;
			k->rec.b = realloc(k->rec.b, k->rec.cap);
			CHECK(k->rec.b);
		}
		memcpy(k->rec.b + k->rec.len, k->in + off + 4, flen);
		k->rec.len += flen;
		off += 4 + flen;
		if (mark & 0x80000000u) {
			ok = fake_call_one(f, ci, k->rec.b, k->rec.len);
			k->rec.len = 0;
		}
	}
	memmove(k->in, k->in + off, k->inlen - off);
	k->inlen -= off;
	return ok;
}

static inline void *fake_thread(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		struct pollfd p[2 + FAKE_MAXCONN];
		unsigned i, n = f->nc;
		bool stop, close_all;

		p[0] = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = f->kick, .events = POLLIN };
		for (i = 0; i < n; i++)
			p[2 + i] = (struct pollfd){ .fd = f->c[i].fd,
						    .events = POLLIN };
		if (poll(p, 2 + n, -1) < 0)
			continue;
		if (p[1].revents & POLLIN) {
			uint64_t v;

			if (read(f->kick, &v, sizeof(v)) < 0)
				v = 0;
		}
		pthread_mutex_lock(&f->lock);
		stop = f->stop;
		close_all = f->close_all;
		pthread_mutex_unlock(&f->lock);
		if (stop || close_all) {
			pthread_mutex_lock(&f->lock);
			while (f->nc)
				fake_conn_close(f, 0);
			f->close_all = false;
			pthread_cond_broadcast(&f->cond);
			pthread_mutex_unlock(&f->lock);
			if (stop)
				return NULL;
			continue;
		}
		/* Connections from the last end down: closing one moves
		 * the last into its slot. */
		for (i = n; i-- > 0;) {
			struct fake_conn *k = &f->c[i];
			ssize_t got;

			if (!(p[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (k->incap - k->inlen < 65536) {
				k->incap = k->incap * 2 + 65536;
				k->in = realloc(k->in, k->incap);
				CHECK(k->in);
			}
			got = recv(k->fd, k->in + k->inlen,
				   k->incap - k->inlen, 0);
			if (got > 0)
				k->inlen += (size_t)got;
			if (got <= 0 || !fake_conn_input(f, i)) {
				pthread_mutex_lock(&f->lock);
				fake_conn_close(f, i);
				pthread_cond_broadcast(&f->cond);
				pthread_mutex_unlock(&f->lock);
			}
		}
		if (p[0].revents & POLLIN) {
			int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0 && f->nc == FAKE_MAXCONN) {
				close(fd);
			} else if (fd >= 0) {
				pthread_mutex_lock(&f->lock);
				f->c[f->nc++] = (struct fake_conn){
					.fd = fd, .id = f->accepted++ };
				pthread_mutex_unlock(&f->lock);
			}
		}
	}
}

/* Start the origin (on f->port if set, else an ephemeral one) with its
 * export's root handle and attributes. */
static inline void fake_start(struct fake *f)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(f->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int one = 1;

	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	if (!f->root.len) {
		f->root.len = 8;
		memcpy(f->root.data, "rootfh01", 8);
	}
	if (!f->rtmax)
		f->rtmax = 65536;
	if (!f->wtmax)
		f->wtmax = 65536;
	if (!f->root_attr.type) {
		f->root_attr.type = NFSC_DIR;
		f->root_attr.mode = 0755;
		f->root_attr.nlink = 2;
		f->root_attr.fileid = 1;
	}
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(f->lfd >= 0);
	CHECK_EQ(setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one,
			    sizeof(one)), 0);
	CHECK_EQ(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(listen(f->lfd, 64), 0);
	CHECK_EQ(getsockname(f->lfd, (struct sockaddr *)&sa, &sl), 0);
	f->port = ntohs(sa.sin_port);
	f->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(f->kick >= 0);
	CHECK_EQ(pthread_create(&f->t, NULL, fake_thread, f), 0);
}

static inline void fake_kick(struct fake *f)
{
	uint64_t one = 1;

	CHECK_EQ(write(f->kick, &one, sizeof(one)), sizeof(one));
}

static inline void fake_stop(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	fake_kick(f);
	pthread_join(f->t, NULL);
	close(f->lfd);
	close(f->kick);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}

/* Close every connection the origin has (as a restart would), and wait
 * until it has. */
static inline void fake_close_conns(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->close_all = true;
	pthread_mutex_unlock(&f->lock);
	fake_kick(f);
	pthread_mutex_lock(&f->lock);
	while (f->close_all)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

/* A port on 127.0.0.1 that nobody listens on (taken, then let go). */
static inline uint16_t fake_closed_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* The URL of the export, as the gateway's command line would name it. */
static inline const char *fake_url(const struct fake *f, const char *export)
{
	static char url[256];

	snprintf(url, sizeof(url),
		 "nfs://127.0.0.1%s?nfsport=%u&mountport=%u", export,
		 (unsigned)f->port, (unsigned)f->port);
	return url;
}

/* Calls of prog/proc logged so far. f->lock held. */
static inline unsigned fake_count_locked(const struct fake *f,
					uint32_t prog, uint32_t proc)
{
	unsigned i, k = 0;

	for (i = 0; i < f->nlog; i++)
		if (f->log[i].prog == prog && f->log[i].proc == proc)
			k++;
	return k;
}

static inline unsigned fake_count(struct fake *f, uint32_t prog, uint32_t proc)
{
	unsigned k;

	pthread_mutex_lock(&f->lock);
	k = fake_count_locked(f, prog, proc);
	pthread_mutex_unlock(&f->lock);
	return k;
}

/* Wait (20 s at most) until want NFS calls of proc have come. */
static inline void fake_wait_calls(struct fake *f, uint32_t proc, unsigned want)
{
	time_t end = time(NULL) + 20;

	pthread_mutex_lock(&f->lock);
	while (fake_count_locked(f, FAKE_PROG_NFS, proc) < want &&
	       time(NULL) < end)
		cond_wait_ms(&f->cond, &f->lock, 100);
	CHECK(fake_count_locked(f, FAKE_PROG_NFS, proc) >= want);
	pthread_mutex_unlock(&f->lock);
}

/* nfsc_open + nfsc_start on the origin's export. */
static inline struct nfsc *fake_open(struct fake *f, const struct nfsc_opts *o)
{
	struct nfsc *n = NULL;
	char err[512] = "";
	int ret = nfsc_open(fake_url(f, "/export"), o, &n, err, sizeof(err));

	if (ret) {
		fprintf(stderr, "nfsc_open: %d: %s\n", ret, err);
		exit(1);
	}
	CHECK_EQ(nfsc_start(n), 0);
	return n;
}

#endif
