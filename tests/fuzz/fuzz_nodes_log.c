/* fuzz_nodes_log: the input is cache_dir/nodes.log, the node-id table
 * (nodes/log.c). It is opened read-only (what cachegw-inspect does) and
 * writable (what the gateway does at start: a torn tail cut, damage
 * skipped, the file compacted), every entry is walked, found by its handle
 * and got by its id; then an entry is added, moved and removed, and the
 * table reopened: what was added must still be there under its id, and
 * the entries the writable open kept must all come back. */
#include <errno.h>

#include "fuzz.h"
#include "nodes_i.h"

#define WALK 64

/* Walk every entry: each must resolve both ways to itself. Returns the
 * number of entries. */
static uint64_t walk(struct nodes *t)
{
	struct nodes_ent e[WALK];
	uint64_t cursor = 0, n = 0;
	size_t got;

	while ((got = nodes_list(t, &cursor, e, WALK))) {
		for (size_t i = 0; i < got; i++) {
			uint8_t h[NODES_HANDLE_MAX];
			size_t hlen = sizeof(h);
			uint64_t id, parent;
			uint32_t gen;

			FZ_CHECK(e[i].hlen >= 1 && e[i].hlen <= NODES_HANDLE_MAX);
			FZ_CHECK(nodes_get(t, e[i].id, h, &hlen, &parent,
					   &gen) == 0);
			FZ_CHECK(hlen == e[i].hlen &&
				 !memcmp(h, e[i].h, hlen));
			FZ_CHECK(nodes_find(t, e[i].h, e[i].hlen, &id,
					    NULL) == 0 && id == e[i].id);
			n++;
		}
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As log.c seals them: the header's XXH3-64 of its first 56 bytes, each
 * record's (26 + hlen bytes) of its first 18 + hlen, seeded with the
 * header's generation. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	uint32_t gen;

	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 4 == 0 || size < NODES_HDR_SIZE)
		return size;
	put64(data + 56, XXH3_64bits(data, 56));
	gen = get32(data + 12);
	for (size_t off = NODES_HDR_SIZE; off + REC_FIXED <= size;) {
		size_t hlen = data[off + 1];

		if (hlen > NODES_HANDLE_MAX || off + REC_FIXED + hlen > size)
			break;
		nodes_seal(data + off, 18 + hlen, gen);
		off += REC_FIXED + hlen;
	}
	return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t fresh[] = "a handle no input holds";
	struct nodes_stats st;
	struct nodes *t;
	char err[256];
	uint64_t id, id2, n;

	unlink(fz_path("nodes.log.tmp"));
	fz_write(NODES_FILE, data, size);

	/* 1. Read-only, as cachegw-inspect opens it. */
	if (nodes_open(fz_dir(), true, &t, err, sizeof(err)) == 0) {
		walk(t);
		nodes_stats(t, &st);
		FZ_CHECK(st.entries == walk(t));
		nodes_close(t);
	}

	/* 2. Writable, as the gateway opens it, and used. */
	if (nodes_open(fz_dir(), false, &t, err, sizeof(err)))
		return 0;
	n = walk(t);
	nodes_stats(t, &st);
	FZ_CHECK(st.entries == n);
	FZ_CHECK(st.next_id >= 2);
	if (nodes_room(t) == 0 &&
	    nodes_add(t, fresh, sizeof(fresh), 1, &id, NULL) == 1) {
		/* A new id is one never handed out: above every entry. */
		struct nodes_ent e[WALK];
		uint64_t cursor = 0;
		size_t got;

		while ((got = nodes_list(t, &cursor, e, WALK)))
			for (size_t i = 0; i < got; i++)
				FZ_CHECK(e[i].id <= id);
		FZ_CHECK(nodes_set_parent(t, id, 7) == 0);
		/* Another one in and out (unless the input has it). */
		if (nodes_add(t, "x", 1, id, &id2, NULL) == 1)
			FZ_CHECK(nodes_remove(t, id2) == 0);
		n = walk(t);
	} else {
		id = 0;
	}
	FZ_CHECK(nodes_sync(t) == 0);
	nodes_close(t);

	/* 3. Reopened: everything that was there, and what was added. */
	FZ_CHECK(nodes_open(fz_dir(), true, &t, err, sizeof(err)) == 0);
	FZ_CHECK(walk(t) == n);
	if (id) {
		uint64_t parent = 0, got_id = 0;
		uint8_t h[NODES_HANDLE_MAX];
		size_t hlen = sizeof(h);

		FZ_CHECK(nodes_find(t, fresh, sizeof(fresh), &got_id,
				    NULL) == 0 && got_id == id);
		FZ_CHECK(nodes_get(t, id, h, &hlen, &parent, NULL) == 0 &&
			 parent == 7);
	}
	nodes_close(t);
	return 0;
}
