/* nfsc_resend_test: calls in flight when the origin misbehaves, against
 * an origin inside the test (nfsc_fake.h) through the real libnfs: a
 * dropped connection is made again and exactly the calls that were not
 * answered are sent again (same XIDs), each answered once; a soft mount
 * sends a call retrans+1 times and fails it with ETIMEDOUT; a hard one
 * sends it until answered; closing the pool ends every call in flight
 * with ECANCELED, once; every call carries its caller's AUTH_SYS
 * credentials (16 groups at most), and a call whose credentials cannot be
 * built never reaches the wire nor changes what the next one carries. */
#include "config.h"
#include "nfsc_fake.h"

#define P_GETATTR 1
#define P_READ 6
#define NREAD 5

static struct fake f;

/* What the origin does, and saw; f.lock. */
static struct {
	int phase;		/* 0: answer reads at 0 and 1000 only */
	unsigned nread;
	struct { unsigned conn; uint32_t xid; uint64_t off; } read[64];
	unsigned late_seen;	/* GETATTRs of "late" */
	uint32_t silent_xid[64];
	unsigned nsilent;
} o;

static bool fh_is(const struct nfsc_fh *fh, const char *s)
{
	return fh->len == strlen(s) && !memcmp(fh->data, s, fh->len);
}

static struct nfsc_fh fh_of(const char *s)
{
	struct nfsc_fh fh = { .len = (uint32_t)strlen(s) };

	memcpy(fh.data, s, fh.len);
	return fh;
}

static enum fake_act origin(struct fake *of, const struct fake_call *c,
			    struct xr *a, struct xw *w)
{
	struct nfsc_fh fh;

	(void)of;
	xr_fh(a, &fh);
	if (c->proc == P_READ) {
		uint64_t off = xr_u64(a);
		uint32_t count = xr_u32(a), i;
		uint8_t buf[256];

		CHECK(o.nread < 64);
		o.read[o.nread].conn = c->conn;
		o.read[o.nread].xid = c->xid;
		o.read[o.nread++].off = off;
		if (o.phase == 0 && off != 0 && off != 1000)
			return FAKE_DROP;
		CHECK(count <= sizeof(buf));
		for (i = 0; i < count; i++)
			buf[i] = (uint8_t)(off / 1000 + i);
		xw_u32(w, 0);
		xw_post_op(w, NULL);
		xw_u32(w, count);
		xw_u32(w, 0);
		xw_opaque(w, buf, count);
		return FAKE_REPLY;
	}
	if (c->proc == P_GETATTR && fh_is(&fh, "silent")) {
		if (o.nsilent < 64)
			o.silent_xid[o.nsilent++] = c->xid;
		return FAKE_DROP;
	}
	if (c->proc == P_GETATTR && fh_is(&fh, "late")) {
		if (++o.late_seen <= 2)
			return FAKE_DROP;
		xw_u32(w, 0);
		xw_fattr3(w, &(struct fake_fattr){ .type = NFSC_REG,
						   .mode = 0644, .size = 42,
						   .fileid = 42 });
		return FAKE_REPLY;
	}
	if (c->proc == P_GETATTR && fh_is(&fh, "who")) {
		xw_u32(w, 0);
		xw_fattr3(w, &(struct fake_fattr){ .type = NFSC_REG,
						   .mode = 0644 });
		return FAKE_REPLY;
	}
	return FAKE_DEFAULT;
}

/* A call's end: how many times, with what; the waiter counts down. */
struct end {
	int runs;			/* atomic */
	int status;
	struct nfsc_waiter *w;
};

static void end_cb(int status, void *priv)
{
	struct end *e = priv;

	e->status = status;
	__atomic_add_fetch(&e->runs, 1, __ATOMIC_RELEASE);
	if (e->w)
		nfsc_waiter_done(status, e->w);
}

static struct nfsc_proc_stat stat_of(struct nfsc *n, unsigned proc)
{
	struct nfsc_proc_stat st;

	nfsc_proc_stat(n, proc, &st);
	return st;
}

/* 1. A connection dropped with 3 of 5 READs unanswered. */
static void reconnect(void)
{
	struct nfsc *n = fake_open(&f, &(struct nfsc_opts){ .nconnect = 1 });
	struct nfsc_cred cr = { .uid = 1000, .gid = 1000 };
	struct nfsc_fh fh = fh_of("data");
	struct nfsc_waiter answered, dropped;
	struct end e[NREAD] = { 0 };
	uint8_t buf[NREAD][100];
	uint32_t got[NREAD];
	bool eof[NREAD];
	uint32_t lost_xid[NREAD];
	unsigned i, j, nlost = 0, first_conn;

	nfsc_waiter_init(&answered);
	nfsc_waiter_init(&dropped);
	for (i = 0; i < NREAD; i++) {
		e[i].w = i < 2 ? &answered : &dropped;
		nfsc_waiter_add(e[i].w);
		CHECK_EQ(nfsc_read_async(n, 0, &cr, &fh, i * 1000, 100,
					 buf[i], &got[i], &eof[i], NULL, NULL,
					 end_cb, &e[i]), 0);
	}
	CHECK_EQ(nfsc_waiter_wait(&answered), 0);
	fake_wait_calls(&f, P_READ, NREAD);

	pthread_mutex_lock(&f.lock);
	CHECK_EQ(o.nread, NREAD);
	first_conn = o.read[0].conn;
	for (i = 0; i < NREAD; i++) {
		CHECK_EQ(o.read[i].conn, first_conn);
		if (o.read[i].off != 0 && o.read[i].off != 1000)
			lost_xid[nlost++] = o.read[i].xid;
	}
	o.phase = 1;
	pthread_mutex_unlock(&f.lock);
	CHECK_EQ(nlost, 3);

	fake_close_conns(&f);		/* as an origin restart would */
	CHECK_EQ(nfsc_waiter_wait(&dropped), 0);

	/* Sent again: exactly the three, with their XIDs, on one new
	 * connection; the two answered ones not again. */
	pthread_mutex_lock(&f.lock);
	CHECK_EQ(o.nread, NREAD + 3);
	for (i = NREAD; i < o.nread; i++) {
		bool found = false;

		CHECK(o.read[i].conn != first_conn);
		CHECK_EQ(o.read[i].conn, o.read[NREAD].conn);
		for (j = 0; j < nlost; j++)
			if (lost_xid[j] == o.read[i].xid) {
				found = true;
				lost_xid[j] = 0;
			}
		CHECK(found);
	}
	pthread_mutex_unlock(&f.lock);

	/* Each call ended once, with the origin's bytes. */
	for (i = 0; i < NREAD; i++) {
		CHECK_EQ(__atomic_load_n(&e[i].runs, __ATOMIC_ACQUIRE), 1);
		CHECK_EQ(e[i].status, 0);
		CHECK_EQ(got[i], 100);
		for (j = 0; j < 100; j++)
			CHECK_EQ(buf[i][j], (uint8_t)(i + j));
	}
	CHECK_EQ(stat_of(n, P_READ).calls, NREAD);
	CHECK_EQ(stat_of(n, P_READ).timeouts, 0);
	nfsc_close(n);
}

/* 2. Soft, timeo=1 (0.1 s), retrans=2: sent 3 times, then ETIMEDOUT. */
static void soft(void)
{
	struct nfsc *n = fake_open(&f, &(struct nfsc_opts){
		.nconnect = 1, .soft = true, .timeo = 1, .retrans = 2 });
	struct nfsc_cred cr = { 0 };
	struct nfsc_fh fh = fh_of("silent");
	struct nfsc_attr a;
	unsigned i;

	pthread_mutex_lock(&f.lock);
	o.nsilent = 0;
	pthread_mutex_unlock(&f.lock);
	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), -ETIMEDOUT);
	CHECK_EQ(stat_of(n, P_GETATTR).timeouts, 3);
	pthread_mutex_lock(&f.lock);
	CHECK_EQ(o.nsilent, 3);
	for (i = 1; i < 3; i++)		/* each a new call (a new XID) */
		CHECK(o.silent_xid[i] != o.silent_xid[0] &&
		      o.silent_xid[i] != o.silent_xid[i - 1]);
	pthread_mutex_unlock(&f.lock);
	nfsc_close(n);
}

/* 3. Hard, timeo=1: sent until answered (the third time here). */
static void hard(void)
{
	struct nfsc *n = fake_open(&f, &(struct nfsc_opts){
		.nconnect = 1, .timeo = 1, .retrans = 1 });
	struct nfsc_cred cr = { 0 };
	struct nfsc_fh fh = fh_of("late");
	struct nfsc_attr a;
	unsigned sent;

	CHECK_EQ(nfsc_getattr(n, &cr, &fh, &a), 0);
	CHECK_EQ(a.fileid, 42);
	pthread_mutex_lock(&f.lock);
	sent = o.late_seen;
	pthread_mutex_unlock(&f.lock);
	/* (a slow machine may time out the answered one too) */
	CHECK(sent >= 3);
	CHECK_EQ(stat_of(n, P_GETATTR).timeouts, sent - 1);
	nfsc_close(n);
}

/* 4. Closing the pool with calls in flight. */
static void cancel(void)
{
	struct nfsc *n = fake_open(&f, &(struct nfsc_opts){ .nconnect = 2 });
	struct nfsc_cred cr = { 0 };
	struct nfsc_fh fh = fh_of("silent");
	struct nfsc_attr a[3];
	struct end e[3] = { 0 };
	unsigned i, before = fake_count(&f, FAKE_PROG_NFS, P_GETATTR);

	for (i = 0; i < 3; i++)
		CHECK_EQ(nfsc_getattr_async(n, -1, &cr, &fh, &a[i], end_cb,
					    &e[i]), 0);
	fake_wait_calls(&f, P_GETATTR, before + 3);
	nfsc_close(n);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(__atomic_load_n(&e[i].runs, __ATOMIC_ACQUIRE), 1);
		CHECK_EQ(e[i].status, -ECANCELED);
	}
}

/* The credentials of the last logged GETATTR. f.lock held. */
static const struct fake_call *last_getattr(void)
{
	unsigned i = f.nlog;

	while (i-- > 0)
		if (f.log[i].prog == FAKE_PROG_NFS &&
		    f.log[i].proc == P_GETATTR)
			return &f.log[i];
	CHECK(!"a GETATTR was logged");
	return NULL;
}

static void who(struct nfsc *n, const struct nfsc_cred *cr, int want,
		struct fake_call *seen)
{
	struct nfsc_fh fh = fh_of("who");
	struct nfsc_attr a;

	CHECK_EQ(nfsc_getattr(n, cr, &fh, &a), want);
	pthread_mutex_lock(&f.lock);
	*seen = *last_getattr();
	pthread_mutex_unlock(&f.lock);
}

/* 5. Each call as its caller. */
static void credentials(void)
{
	struct nfsc_cred a = { .uid = 1000, .gid = 100, .ngroups = 2,
			       .groups = { 5, 6 } };
	struct nfsc_cred b = { .uid = 2000, .gid = 200, .ngroups = 20 };
	struct nfsc_cred bad = { .uid = 3000, .gid = 300 };
	struct fake_call seen;
	struct nfsc *n;
	unsigned i;

	for (i = 0; i < NFSC_NGROUPS_MAX; i++)
		b.groups[i] = 100 + i;
	setenv("CACHEGW_INJECT_AUTH_ERROR", "3000", 1);
	n = fake_open(&f, &(struct nfsc_opts){ .nconnect = 1 });
	unsetenv("CACHEGW_INJECT_AUTH_ERROR");

	who(n, &a, 0, &seen);
	CHECK_EQ(seen.flavor, 1);
	CHECK_EQ(seen.uid, 1000);
	CHECK_EQ(seen.gid, 100);
	CHECK_EQ(seen.ngroups, 2);
	CHECK(seen.groups[0] == 5 && seen.groups[1] == 6);
	who(n, &b, 0, &seen);
	CHECK_EQ(seen.uid, 2000);
	CHECK_EQ(seen.gid, 200);
	CHECK_EQ(seen.ngroups, NFSC_NGROUPS_MAX);
	for (i = 0; i < NFSC_NGROUPS_MAX; i++)
		CHECK_EQ(seen.groups[i], 100 + i);
	/* Same uid and gid, other groups: the groups sent are the new. */
	b.ngroups = 1;
	who(n, &b, 0, &seen);
	CHECK_EQ(seen.ngroups, 1);
	who(n, &a, 0, &seen);
	CHECK_EQ(seen.uid, 1000);
	CHECK_EQ(seen.ngroups, 2);

	if (CACHEGW_FAULT_INJECTION) {
		unsigned before = fake_count(&f, FAKE_PROG_NFS, P_GETATTR);

		/* Credentials that cannot be built: the call is refused
		 * (ENOMEM) before the wire, and the next caller's call
		 * still carries its own. */
		who(n, &bad, -ENOMEM, &seen);
		CHECK_EQ(fake_count(&f, FAKE_PROG_NFS, P_GETATTR), before);
		who(n, &b, 0, &seen);
		CHECK_EQ(seen.uid, 2000);
		who(n, &bad, -ENOMEM, &seen);
		who(n, &b, 0, &seen);
		CHECK_EQ(seen.uid, 2000);
		CHECK_EQ(fake_count(&f, FAKE_PROG_NFS, P_GETATTR),
			 before + 2);
	}
	nfsc_close(n);
}

int main(void)
{
	f.fn = origin;
	fake_start(&f);
	reconnect();
	soft();
	hard();
	cancel();
	credentials();
	fake_stop(&f);
	printf("nfsc_resend_test: ok\n");
	return 0;
}
