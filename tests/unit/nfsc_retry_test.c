/* nfsc_retry_test: the bookkeeping of calls in flight (nfsclient/pool.c,
 * the test playing the service thread): calls spread round-robin or on
 * the connection asked for; a timed-out call resent on its own connection,
 * for ever on a hard mount, retrans times on a soft one and then failed
 * with ETIMEDOUT (nfs(5)); a call whose connection stops meanwhile ends
 * with ECANCELED; every other status ends the call at once; each
 * callback runs exactly once; the per-procedure counters count an
 * answered call once however often it was resent, every timeout, and
 * only calls that were sent. */
#include "nfsc_helpers.h"

static struct nfsc_cred cr = { .uid = 1000, .gid = 1000 };
static struct nfsc_fh fh = { .len = 4, .data = { 9, 8, 7, 6 } };

/* A GETATTR as issue() leaves it: on the wire now. */
static struct nfsc_req *sent(struct nfsc *n, struct t_done *d)
{
	struct nfsc_req *r = nfsc_req_new(n, &cr, &fh, NULL, t_done_cb, d);

	CHECK(r);
	r->proc = NFS3_GETATTR;
	r->sent_ns = nfsc_now_ns();
	return r;
}

static struct nfsc_proc_stat getattr_stat(struct nfsc *n)
{
	struct nfsc_proc_stat st;

	nfsc_proc_stat(n, NFS3_GETATTR, &st);
	return st;
}

/* r timed out on connection c: it must be back there, alone, its
 * callback not run. */
static void timeout_resent(struct nfsc *n, struct nfsc_req *r, unsigned c,
			   const struct t_done *d)
{
	uint64_t kicks;
	unsigned i;

	nfsc_complete(r, -ETIMEDOUT);
	CHECK_EQ(d->runs, 0);
	CHECK(t_pool_take(n, c, &kicks) == r);
	CHECK(r->next == NULL);
	CHECK_EQ(kicks, 1);
	CHECK(r->conn == &n->conns[c]);
	for (i = 0; i < n->nconn; i++)
		CHECK(n->conns[i].head == NULL);
}

int main(void)
{
	struct nfsc *n = t_pool_new(3);
	struct t_done d = { 0 };
	struct nfsc_proc_stat st;
	struct nfsc_req *r;
	uint64_t kicks;
	unsigned i;

	/* 1. Round-robin over the connections; a connection asked for is
	 * taken modulo nconnect; each call wakes its thread. */
	for (i = 0; i < 6; i++)
		CHECK_EQ(nfsc_submit(n, -1, sent(n, &d)), 0);
	CHECK_EQ(nfsc_submit(n, 5, sent(n, &d)), 0);
	for (i = 0; i < 3; i++) {
		struct nfsc_req *next;

		r = t_pool_take(n, i, &kicks);
		CHECK_EQ(t_req_count(r), i == 2 ? 3 : 2);
		CHECK_EQ(kicks, i == 2 ? 3 : 2);
		for (; r; r = next) {
			next = r->next;
			CHECK(r->conn == &n->conns[i]);
			nfsc_req_free(r);
		}
	}
	t_pool_free(n);
	CHECK_EQ(d.runs, 0);

	/* 2. Hard (the default): resent on its connection after every
	 * timeout, however many; done when answered. */
	n = t_pool_new(3);
	r = sent(n, &d);
	CHECK_EQ(nfsc_submit(n, 1, r), 0);
	CHECK(t_pool_take(n, 1, NULL) == r);
	for (i = 0; i < 25; i++)
		timeout_resent(n, r, 1, &d);
	st = getattr_stat(n);
	CHECK_EQ(st.timeouts, 25);
	CHECK_EQ(st.calls, 0);
	nfsc_complete(r, 0);
	CHECK_EQ(d.runs, 1);
	CHECK_EQ(d.status, 0);
	st = getattr_stat(n);
	CHECK_EQ(st.calls, 1);
	CHECK_EQ(st.errors, 0);
	CHECK_EQ(st.timeouts, 25);
	CHECK_EQ(st.lat.count, 1);

	/* 3. A status other than a timeout ends the call, hard or not. */
	d = (struct t_done){ 0 };
	r = sent(n, &d);
	CHECK_EQ(nfsc_submit(n, 0, r), 0);
	CHECK(t_pool_take(n, 0, NULL) == r);
	nfsc_complete(r, -ESTALE);
	CHECK_EQ(d.runs, 1);
	CHECK_EQ(d.status, -ESTALE);
	CHECK(t_pool_take(n, 0, NULL) == NULL);
	CHECK_EQ(getattr_stat(n).errors, 1);

	/* 4. A timeout while the connection stops: not resent, the call
	 * ends with ECANCELED; a new call is refused with ESHUTDOWN (and the
	 * request freed: ASan's leak check). */
	d = (struct t_done){ 0 };
	r = sent(n, &d);
	CHECK_EQ(nfsc_submit(n, 2, r), 0);
	CHECK(t_pool_take(n, 2, NULL) == r);
	n->conns[2].stopping = true;
	nfsc_complete(r, -ETIMEDOUT);
	CHECK_EQ(d.runs, 1);
	CHECK_EQ(d.status, -ECANCELED);
	CHECK(t_pool_take(n, 2, NULL) == NULL);
	CHECK_EQ(nfsc_submit_or_free(n, 2, sent(n, &d)), -ESHUTDOWN);
	CHECK_EQ(d.runs, 1);

	/* 5. A call that never reached the wire (proc 0: the thread stopped
	 * first, or its credentials could not be made) is not counted. */
	st = getattr_stat(n);
	d = (struct t_done){ 0 };
	r = nfsc_req_new(n, &cr, &fh, NULL, t_done_cb, &d);
	CHECK(r);
	nfsc_complete(r, -ECANCELED);
	CHECK_EQ(d.runs, 1);
	CHECK_EQ(getattr_stat(n).calls, st.calls);
	CHECK_EQ(getattr_stat(n).errors, st.errors);
	t_pool_free(n);

	/* 6. Soft, retrans=2: two resends, the third timeout fails the call
	 * with ETIMEDOUT; three timeouts counted, and no answered call
	 * (nfsc.h: calls are those answered). */
	n = t_pool_new(2);
	n->opts.soft = true;
	n->opts.retrans = 2;
	d = (struct t_done){ 0 };
	r = sent(n, &d);
	CHECK_EQ(nfsc_submit(n, 1, r), 0);
	CHECK(t_pool_take(n, 1, NULL) == r);
	timeout_resent(n, r, 1, &d);
	timeout_resent(n, r, 1, &d);
	nfsc_complete(r, -ETIMEDOUT);
	CHECK_EQ(d.runs, 1);
	CHECK_EQ(d.status, -ETIMEDOUT);
	CHECK(t_pool_take(n, 1, NULL) == NULL);
	st = getattr_stat(n);
	CHECK_EQ(st.timeouts, 3);
	CHECK_EQ(st.calls, 0);
	CHECK_EQ(st.errors, 0);

	/* 7. Soft: an answer after a timeout is an answer. */
	d = (struct t_done){ 0 };
	r = sent(n, &d);
	CHECK_EQ(nfsc_submit(n, 0, r), 0);
	CHECK(t_pool_take(n, 0, NULL) == r);
	timeout_resent(n, r, 0, &d);
	nfsc_complete(r, 0);
	CHECK_EQ(d.runs, 1);
	CHECK_EQ(d.status, 0);
	st = getattr_stat(n);
	CHECK_EQ(st.timeouts, 4);
	CHECK_EQ(st.calls, 1);
	CHECK_EQ(st.errors, 0);
	t_pool_free(n);

	/* 8. A request carries at most the 16 groups AUTH_SYS has room
	 * for, and its object's handle. */
	n = t_pool_new(1);
	{
		struct nfsc_cred many = { .uid = 5, .gid = 6, .ngroups = 40 };

		r = nfsc_req_new(n, &many, &fh, NULL, t_done_cb, &d);
		CHECK(r);
		CHECK_EQ(r->cred.ngroups, NFSC_NGROUPS_MAX);
		CHECK_EQ(r->cred.uid, 5);
		CHECK_EQ(r->fh.len, 4);
		CHECK(!memcmp(r->fh.data, fh.data, 4));
		nfsc_req_free(r);
	}
	t_pool_free(n);

	printf("nfsc_retry_test: ok\n");
	return 0;
}
