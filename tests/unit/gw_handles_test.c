/* gw_handles_test: the open-handle table (gateway/keep/handles.c) on its own:
 * what the kernel holds is an identifier that resolves to its handle
 * while it is listed, never to another handle after it was given back
 * (a freed slot is reused with a new generation), 0 and foreign values
 * resolve to nothing, and the handles never released are released, each
 * once, at exit; a successor adopts ids and never hands them out again. */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "keep_i.h"

static int released;

static void rel(struct gw *gw, struct gw_handle *h)
{
	(void)gw;
	(void)h;
	released++;
}

int main(void)
{
	static struct gw_handle h[3000];
	struct gw_handle extra;
	uint64_t old;

	for (int i = 0; i < 3000; i++) {
		CHECK_EQ(gw_handle_add(&h[i], rel), 0);
		CHECK(h[i].id != 0);
	}
	for (int i = 0; i < 3000; i++)
		CHECK(gw_handle_get(h[i].id) == &h[i]);
	CHECK(gw_handle_get(0) == NULL);
	CHECK(gw_handle_get(UINT64_MAX) == NULL);
	CHECK(gw_handle_get(h[5].id + (1ull << 32)) == NULL);	/* other gen */

	/* Given back: its id resolves to nothing, even once its slot is
	 * taken again by another handle. */
	old = h[1500].id;
	gw_handle_del(&h[1500]);
	CHECK(gw_handle_get(old) == NULL);
	CHECK_EQ(gw_handle_add(&extra, rel), 0);
	CHECK_EQ((uint32_t)extra.id, (uint32_t)old);	/* the same slot */
	CHECK(extra.id != old);
	CHECK(gw_handle_get(old) == NULL);
	CHECK(gw_handle_get(extra.id) == &extra);
	gw_handle_del(&extra);
	gw_handle_del(&extra);	/* twice: nothing */

	/* At exit: every handle still listed, once. */
	CHECK_EQ(gw_handles_count(), 2999);
	CHECK_EQ(gw_handles_release(NULL), 2999);
	CHECK_EQ(released, 2999);
	CHECK_EQ(gw_handles_count(), 0);
	CHECK(gw_handle_get(h[0].id) == NULL);
	gw_handles_fini();

	/* A successor (gw_state.h): the ids a dead process gave the kernel
	 * resolve to the handles adopted under them; the slots between are
	 * free again, and a new handle never gets an id the kernel has. */
	{
		static struct gw_handle a[3], n[8];
		uint64_t ids[3] = { 7ull << 32 | 3, 9ull << 32 | 1,
				    2ull << 32 | 2000 };

		for (int i = 0; i < 3; i++)
			CHECK_EQ(gw_handle_adopt(&a[i], rel, ids[i]), 0);
		CHECK_EQ(gw_handle_adopt(&extra, rel, ids[0]), -EEXIST);
		CHECK_EQ(gw_handle_adopt(&extra, rel, 5ull << 32), -EINVAL);
		CHECK_EQ(gw_handles_adopted(), 0);
		for (int i = 0; i < 3; i++)
			CHECK(gw_handle_get(ids[i]) == &a[i]);
		for (int i = 0; i < 8; i++) {
			CHECK_EQ(gw_handle_add(&n[i], rel), 0);
			CHECK((uint32_t)n[i].id < 2000);	/* freed ones */
			CHECK((n[i].id >> 32) > 9);		/* newer */
			for (int j = 0; j < 3; j++)
				CHECK(n[i].id != ids[j] &&
				      (uint32_t)n[i].id != (uint32_t)ids[j]);
		}
		CHECK_EQ(gw_handles_count(), 11);
		released = 0;
		CHECK_EQ(gw_handles_release(NULL), 11);
		CHECK_EQ(released, 11);
		gw_handles_fini();
	}
	printf("gw_handles_test: ok\n");
	return 0;
}
