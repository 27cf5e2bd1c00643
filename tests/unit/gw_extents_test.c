/* gw_extents_test: the write path's bookkeeping (gateway/write/write_extents.c)
 * on its own: which extents a COMMIT's verifier shows lost (a changed
 * verifier, or WRITEs of one extent that gave two), the oldest of them
 * from which the resend runs (extents newer than the COMMIT are not
 * judged by it), unlisting a committed tail and its bytes, the verifier
 * and newest attributes of a range's WRITE replies (a piece that wrote
 * nothing vouches for nothing), a pre-op version that is neither the
 * one known nor another piece's result: someone else's change, and what a
 * writer's record says for a successor after a crash: the list's
 * verifier, MIXED once a second one joins it (in either order, or from
 * another record), lost when a COMMIT answers another. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gw_state.h"
#include "write_i.h"

static const uint8_t VA[8] = "verf-A!", VB[8] = "verf-B!";

static struct gw_extent ext(size_t len, const uint8_t *verf, bool mixed)
{
	struct gw_extent e;

	memset(&e, 0, sizeof(e));
	e.len = len;
	memcpy(e.verf, verf, 8);
	e.mixed = mixed;
	return e;
}

static struct nfsc_attr ver(long ctime, uint64_t size)
{
	struct nfsc_attr a;

	memset(&a, 0, sizeof(a));
	a.ctime.tv_sec = ctime;
	a.mtime.tv_sec = ctime;
	a.size = size;
	return a;
}

static struct nfsc_wcc wcc(const struct nfsc_attr *a)
{
	struct nfsc_wcc w = { a->size, a->mtime, a->ctime };

	return w;
}

int main(void)
{
	struct gw_extent e1 = ext(30, VA, false), e2 = ext(20, VA, false),
			 e3 = ext(10, VA, false), e4 = ext(5, VA, false);
	struct gw_extent *list, *v[4];
	struct nfsc_attr k = ver(100, 4096), p1 = ver(101, 8192),
			 p2 = ver(102, 12288), other = ver(150, 1);
	struct wchunk ch[2];
	struct wresult r;
	size_t bytes;

	/* Lost: another verifier, or two verifiers for one extent. */
	CHECK(!wr_extent_lost(&e1, VA));
	CHECK(wr_extent_lost(&e1, VB));
	e2.mixed = true;
	CHECK(wr_extent_lost(&e2, VA));
	e2.mixed = false;

	/* Newest first: e4 (written after the COMMIT began), e3 (the
	 * COMMIT's first), e2, e1. */
	v[0] = &e4; v[1] = &e3; v[2] = &e2; v[3] = &e1;
	CHECK(wr_extents_resend_from(v, 4, &e3, VA) == SIZE_MAX); /* none */
	memcpy(e1.verf, VB, 8);		/* the oldest was lost */
	CHECK_EQ(wr_extents_resend_from(v, 4, &e3, VA), 3);
	memcpy(e1.verf, VA, 8);
	e3.mixed = true;		/* the COMMIT's newest was */
	CHECK_EQ(wr_extents_resend_from(v, 4, &e3, VA), 1);
	e3.mixed = false;
	memcpy(e4.verf, VB, 8);		/* newer than the COMMIT: not its */
	CHECK(wr_extents_resend_from(v, 4, &e3, VA) == SIZE_MAX);
	memcpy(e2.verf, VB, 8);
	CHECK_EQ(wr_extents_resend_from(v, 4, &e3, VA), 2);

	/* Unlisting the committed tail: e3 and older go, e4 stays. */
	e4.next = &e3; e3.next = &e2; e2.next = &e1; e1.next = NULL;
	list = &e4;
	bytes = 65;
	wr_extents_cut(&list, &bytes, &e3);
	CHECK(list == &e4 && e4.next == NULL);
	CHECK_EQ(bytes, 5);
	wr_extents_cut(&list, &bytes, &e4);
	CHECK(list == NULL);
	CHECK_EQ(bytes, 0);

	/* A range's replies: the newest attributes, one verifier. */
	memset(&r, 0, sizeof(r));
	memset(ch, 0, sizeof(ch));
	ch[0].written = 4096;
	memcpy(ch[0].verf, VA, 8);
	ch[0].post.has_attr = true;
	ch[0].post.attr = p2;
	ch[1].written = 4096;
	memcpy(ch[1].verf, VA, 8);
	ch[1].post.has_attr = true;
	ch[1].post.attr = p1;
	wr_result_add(&r, &ch[0]);
	wr_result_add(&r, &ch[1]);
	CHECK(r.have_verf && !r.mixed && !memcmp(r.verf, VA, 8));
	CHECK(r.post.has_attr && r.post.attr.ctime.tv_sec == 102);
	ch[1].written = 0;		/* took nothing: vouches for nothing */
	memcpy(ch[1].verf, VB, 8);
	wr_result_add(&r, &ch[1]);
	CHECK(!r.mixed);
	ch[1].written = 1;
	wr_result_add(&r, &ch[1]);
	CHECK(r.mixed);

	/* Pre-op versions: the one known, another piece's result, none, or
	 * someone else's. */
	ch[0].post.has_pre = true;
	ch[0].post.pre = wcc(&k);
	ch[1].post.attr = p1;
	CHECK(!wr_wcc_foreign(&k, ch, 2, 0));
	ch[0].post.pre = wcc(&p1);	/* found piece 1's WRITE done */
	CHECK(!wr_wcc_foreign(&k, ch, 2, 0));
	ch[0].post.pre = wcc(&other);
	CHECK(wr_wcc_foreign(&k, ch, 2, 0));
	CHECK(!wr_wcc_foreign(NULL, ch, 2, 0));	/* nothing to judge by */
	ch[0].post.has_pre = false;
	CHECK(!wr_wcc_foreign(&k, ch, 2, 0));

	/* A writer's record: nothing listed, nothing lost. */
	{
		uint32_t fl = 0, fl2;
		uint64_t v = 0, va, vb, v2;

		memcpy(&va, VA, 8);
		memcpy(&vb, VB, 8);
		CHECK(!wr_unstable_lost(fl, v, VB));
		e1 = ext(0, VB, false);	/* 0 bytes: nothing to lose */
		wr_unstable_add_extent(&fl, &v, &e1);
		CHECK(fl == 0);
		e1 = ext(1, VA, false);
		wr_unstable_add_extent(&fl, &v, &e1);
		CHECK(fl == GW_UNSTABLE && v == va);
		CHECK(!wr_unstable_lost(fl, v, VA));
		CHECK(wr_unstable_lost(fl, v, VB));	/* A restarted */
		wr_unstable_add_extent(&fl, &v, &e1);	/* same verifier */
		CHECK(fl == GW_UNSTABLE);
		/* One listed under B after one under A: whichever the COMMIT
		 * answers, one is gone. */
		e2 = ext(1, VB, false);
		wr_unstable_add_extent(&fl, &v, &e2);
		CHECK(fl == (GW_UNSTABLE | GW_UNSTABLE_MIXED));
		CHECK(wr_unstable_lost(fl, v, VA) && wr_unstable_lost(fl, v, VB));
		/* B listed first (a WRITE answered before the restart, listed
		 * after one answered since): the same. */
		fl = 0;
		wr_unstable_add_extent(&fl, &v, &e2);
		wr_unstable_add_extent(&fl, &v, &e1);
		CHECK(wr_unstable_lost(fl, v, VA) && wr_unstable_lost(fl, v, VB));
		/* One WRITE's pieces under two verifiers. */
		fl = 0;
		e3 = ext(1, VB, true);
		wr_unstable_add_extent(&fl, &v, &e3);
		CHECK(wr_unstable_lost(fl, v, VB));
		/* Records merged by the successor: another record's verifier,
		 * or its MIXED, makes the file's MIXED; an empty one adds
		 * nothing. */
		fl = 0;
		wr_unstable_add(&fl, &v, 0, vb);
		CHECK(fl == 0);
		wr_unstable_add(&fl, &v, GW_UNSTABLE, va);
		wr_unstable_add(&fl, &v, 0, vb);
		CHECK(fl == GW_UNSTABLE && !wr_unstable_lost(fl, v, VA));
		fl2 = fl;
		v2 = v;
		wr_unstable_add(&fl2, &v2, GW_UNSTABLE, vb);
		CHECK(wr_unstable_lost(fl2, v2, VA) &&
		      wr_unstable_lost(fl2, v2, VB));
		wr_unstable_add(&fl, &v, GW_UNSTABLE | GW_UNSTABLE_MIXED, va);
		CHECK(wr_unstable_lost(fl, v, VA));
	}
	printf("gw_extents_test: ok\n");
	return 0;
}
