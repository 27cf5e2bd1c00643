/* gw_intent_test: the keys of changes resent after a crash
 * (gateway/keep/intent.c) on their own: a change is matched only by the very
 * change the dead process sent: two RENAMEs of one name to different
 * destinations, two LINKs of different files to one name, two SYMLINKs
 * of one name to different targets, and names split differently are not
 * taken for each other; a key left by a dead process is used once; an
 * O_EXCL create's record keeps its random verifier and the handle made. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "gw_state.h"
#include "keep_i.h"

static struct gw_intent in(unsigned op, uint64_t dir, const char *name,
			   uint64_t obj, const char *name2)
{
	struct gw_intent i = {
		.op = op, .dir = dir, .name = name, .obj = obj, .name2 = name2,
		.pid = 4242, .uid = 1001,
	};

	return i;
}

int main(void)
{
	struct gw_intent a, b;
	struct gw_intent_rec rec;
	struct nfsc_fh fh = { .len = 4, .data = { 1, 2, 3, 4 } };
	struct nfsc_fh other = { .len = 4, .data = { 1, 2, 3, 5 } };
	uint8_t verf[8], verf2[8];
	static const uint8_t zero[8];
	unsigned slot;

	/* 1. What makes each change itself is in its key. */
	a = in(GW_I_RENAME, 7, "from", 7, "to-b");
	b = in(GW_I_RENAME, 7, "from", 7, "to-c");
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	b = in(GW_I_RENAME, 7, "from", 8, "to-b");	/* another directory */
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	a = in(GW_I_LINK, 7, "h", 100, NULL);
	b = in(GW_I_LINK, 7, "h", 101, NULL);
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	a = in(GW_I_SYMLINK, 7, "l", 0, "target-1");
	b = in(GW_I_SYMLINK, 7, "l", 0, "target-2");
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	a = in(GW_I_RENAME, 7, "ab", 7, "c");
	b = in(GW_I_RENAME, 7, "a", 7, "bc");
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	a = in(GW_I_CREATE, 7, "x", 0, NULL);
	b = in(GW_I_MKDIR, 7, "x", 0, NULL);
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	b = in(GW_I_CREATE, 7, "x", 0, NULL);
	b.uid = 1002;
	CHECK(gw_intent_key(&a) != gw_intent_key(&b));
	b = in(GW_I_CREATE, 7, "x", 0, NULL);
	CHECK_EQ(gw_intent_key(&a), gw_intent_key(&b));
	CHECK(gw_intent_key(&a) != 0);

	/* 2. Without the takeover state nothing is kept, but a verifier is
	 * still made. */
	memset(verf, 0, sizeof(verf));
	CHECK_EQ(gw_intent_begin(&a, verf), 0);
	CHECK(memcmp(verf, zero, 8) != 0);

	/* 3. A dead process's changes, taken by its successor. */
	gw_state = mmap(NULL, GW_STATE_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(gw_state != MAP_FAILED);
	a = in(GW_I_RENAME, 7, "from", 7, "to-b");
	CHECK(gw_intent_begin(&a, NULL) != 0);
	a = in(GW_I_CREATE, 7, "x", 0, NULL);
	slot = gw_intent_begin(&a, verf);
	CHECK(slot != 0);
	gw_intent_made(slot, &fh);
	a = in(GW_I_CREATE, 7, "y", 0, NULL);
	CHECK(gw_intent_begin(&a, verf2) != 0);
	CHECK(memcmp(verf, verf2, 8) != 0);		/* each its own */
	a = in(GW_I_MKDIR, 7, "answered", 0, NULL);
	gw_intent_end(gw_intent_begin(&a, NULL));	/* answered: gone */
	CHECK_EQ(gw_intent_takeover(), 3);

	b = in(GW_I_RENAME, 7, "from", 7, "to-c");
	CHECK(!gw_intent_was_done(&b, NULL));		/* another rename */
	b = in(GW_I_RENAME, 7, "from", 7, "to-b");
	CHECK(gw_intent_was_done(&b, NULL));
	CHECK(!gw_intent_was_done(&b, NULL));		/* once */
	CHECK(!gw_intent_was_done(&a, NULL));		/* answered */

	b = in(GW_I_CREATE, 7, "x", 0, NULL);
	CHECK(gw_intent_was_done(&b, &rec));
	CHECK(memcmp(rec.verf, verf, 8) == 0);
	CHECK_EQ(rec.made, gw_intent_fh_hash(&fh));
	CHECK(rec.made != gw_intent_fh_hash(&other));
	b = in(GW_I_CREATE, 7, "y", 0, NULL);
	CHECK(gw_intent_was_done(&b, &rec));
	CHECK(memcmp(rec.verf, verf2, 8) == 0);
	CHECK_EQ(rec.made, 0);				/* not heard */

	gw_intent_fini();
	munmap(gw_state, GW_STATE_SIZE);
	gw_state = NULL;
	return 0;
}
