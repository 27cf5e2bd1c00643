/* nfsc_offline_test: the origin lost and back (nfsclient/origin.c, the
 * watcher's decisions driven with the test's own clock): a probe after a
 * second without an answer, at most one a second; lost after offline=
 * seconds of quiet, counted once however long it lasts; the idempotent
 * calls refused (-EHOSTDOWN, never queued) while lost, queued again from
 * the first answer after; a gateway started without its origin stays lost
 * until an answer; an answer stamped just after the watcher read the clock
 * is an answer, not 2^64 ns of quiet (which made a busy gateway lose its
 * origin for a moment); without offline= nothing is lost. */
#include "nfsc_helpers.h"

#define S 1000000000ull		/* ns */

static struct nfsc_cred cr;
static struct nfsc_fh fh = { .len = 4, .data = { 1, 2, 3, 4 } };

/* nfsc_submit_idem's answer for a GETATTR-like request on connection 0;
 * a queued one is taken off again. */
static int submit(struct nfsc *n, struct t_done *d)
{
	struct nfsc_req *r = nfsc_req_new(n, &cr, &fh, NULL, t_done_cb, d);
	int ret;

	CHECK(r);
	ret = nfsc_submit_idem(n, 0, r);
	if (!ret) {
		CHECK(t_pool_take(n, 0, NULL) == r);
		nfsc_req_free(r);
	}
	return ret;
}

static struct nfsc_origin_stat stat_of(struct nfsc *n)
{
	struct nfsc_origin_stat st;

	nfsc_origin_stat(n, &st);
	return st;
}

int main(void)
{
	const uint64_t t = 1000 * S;	/* the clock when the test starts */
	struct nfsc *n = t_pool_new(1);
	struct t_done d = { 0 };
	uint64_t last = t;

	/* 1. Probes: after a second of quiet, then once a second. */
	n->opts.offline = 3;
	CHECK(!nfsc_origin_probe_due(t + S / 2, last, 0));
	CHECK(nfsc_origin_probe_due(t + S, last, 0));
	CHECK(!nfsc_origin_probe_due(t + S + S / 2, last, t + S));
	CHECK(nfsc_origin_probe_due(t + 2 * S, last, t + S));

	/* 2. Lost at offline= seconds of quiet, once. */
	CHECK_EQ(nfsc_origin_look(n, t + 3 * S - 1, last), NFSC_ORIGIN_SAME);
	CHECK(!nfsc_origin_lost(n));
	CHECK_EQ(submit(n, &d), 0);
	CHECK_EQ(nfsc_origin_look(n, t + 3 * S, last), NFSC_ORIGIN_LOST);
	CHECK(nfsc_origin_lost(n));
	CHECK_EQ(stat_of(n).lost_total, 1);
	CHECK_EQ(nfsc_origin_look(n, t + 60 * S, last), NFSC_ORIGIN_SAME);
	CHECK_EQ(stat_of(n).lost_total, 1);
	CHECK(nfsc_origin_probe_due(t + 60 * S, last, t + 59 * S));

	/* 3. While lost, idempotent calls fail at once and are counted; the
	 * callback never runs (nfsc.h: not queued). */
	CHECK_EQ(submit(n, &d), -EHOSTDOWN);
	CHECK_EQ(submit(n, &d), -EHOSTDOWN);
	CHECK_EQ(d.runs, 0);
	CHECK_EQ(stat_of(n).refused, 2);
	CHECK(t_pool_take(n, 0, NULL) == NULL);

	/* 4. The last answer before the loss is no news; one after it is. */
	CHECK_EQ(nfsc_origin_look(n, t + 61 * S, last), NFSC_ORIGIN_SAME);
	last = t + 61 * S;
	CHECK_EQ(nfsc_origin_look(n, t + 61 * S + S / 10, last),
		 NFSC_ORIGIN_BACK);
	CHECK(!nfsc_origin_lost(n));
	CHECK_EQ(stat_of(n).back_total, 1);
	CHECK_EQ(submit(n, &d), 0);
	CHECK_EQ(stat_of(n).refused, 2);

	/* 5. And lost again, counted again. */
	CHECK_EQ(nfsc_origin_look(n, t + 64 * S - 1, last), NFSC_ORIGIN_SAME);
	CHECK_EQ(nfsc_origin_look(n, t + 64 * S, last), NFSC_ORIGIN_LOST);
	CHECK_EQ(stat_of(n).lost_total, 2);
	t_pool_free(n);

	/* 6. Started without the origin: lost from the start (counted), back
	 * at the first answer. */
	n = t_pool_new(1);
	n->opts.offline = 3;
	nfsc_origin_start_lost(n);
	CHECK(nfsc_origin_lost(n));
	CHECK_EQ(stat_of(n).lost_total, 1);
	CHECK_EQ(submit(n, &d), -EHOSTDOWN);
	{
		uint64_t now = nfsc_now_ns();

		CHECK_EQ(nfsc_origin_look(n, now + 100 * S, 0),
			 NFSC_ORIGIN_SAME);
		CHECK_EQ(nfsc_origin_look(n, now + 100 * S, now + 99 * S),
			 NFSC_ORIGIN_BACK);
	}
	CHECK_EQ(submit(n, &d), 0);
	CHECK_EQ(stat_of(n).lost_total, 1);
	t_pool_free(n);

	/* 7. A service thread stamps an answer between the watcher's clock
	 * read and its load of the stamp: the stamp is then a few ns after
	 * now. That is an answer, not quiet (2^64 ns of it, unsigned). */
	n = t_pool_new(1);
	n->opts.offline = 3;
	CHECK(!nfsc_origin_probe_due(t, t + 5, 0));
	CHECK_EQ(nfsc_origin_look(n, t, t + 5), NFSC_ORIGIN_SAME);
	CHECK(!nfsc_origin_lost(n));
	CHECK_EQ(stat_of(n).lost_total, 0);
	n->lost = 1;			/* and while lost, it is one */
	n->lost_since_ns = t - 10 * S;
	CHECK_EQ(nfsc_origin_look(n, t, t + 5), NFSC_ORIGIN_BACK);
	t_pool_free(n);

	/* 8. Without offline= the origin is never lost, whatever the flag
	 * says (the watcher does not run). */
	n = t_pool_new(1);
	n->lost = 1;
	CHECK(!nfsc_origin_lost(n));
	CHECK_EQ(submit(n, &d), 0);
	t_pool_free(n);

	CHECK_EQ(d.runs, 0);
	printf("nfsc_offline_test: ok\n");
	return 0;
}
