/* fuzz_md_log: the input is cache_dir/md.log, what the gateway kept of
 * its files: records (nodes/md.c) and what they mean (gateway/keep/:
 * kept_md.c attributes, ACCESS answers, link targets; kept_names.c names,
 * whole listings and their readers). It is
 * opened as the gateway opens it at start (after a stop that was not
 * clean only the ACCESS answers stay: gw_md_unclean), then every reader
 * of keep/ runs on node-ids 1..40 as a restarted gateway would (online
 * and offline); then records are written as the gateway writes them,
 * md.log closed and reopened: what was written must be there, and the
 * close must have left it clean. The node-id table beside it holds
 * FZ_NODES handles (ids 2..), as the seeds' did (fuzz_seeds.c). */
#include <errno.h>

#include "fuzz.h"
#include "keep_i.h"
#include "nodes_i.h"

#define IDS 40

static struct gw gw;
static struct gw_opts opts;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Records as md.c writes them: u8 kind, u8 len, 30 bytes, len bytes,
 * sealed (nodes_seal, seeded with the generation) after the 32 + len. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 4 == 0)
		return size;
	for (size_t off = 64; off + 40 <= size;) {
		size_t len = data[off + 1];

		if (len > NODES_MD_BLOB_MAX || off + 40 + len > size)
			break;
		nodes_seal(data + off, 32 + len, FZ_MD_GEN);
		off += 40 + len;
	}
	return size;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	opts.acregmin = opts.acregmax = 3600;
	opts.acdirmin = opts.acdirmax = 3600;
	gw.o = &opts;
	FZ_CHECK(nodes_open(fz_dir(), false, &gw.nodes, err, sizeof(err)) == 0);
	for (unsigned i = 0; i < FZ_NODES; i++) {
		uint8_t h[32];
		uint64_t id;

		FZ_CHECK(nodes_add(gw.nodes, h, fz_handle(i, h), 1, &id,
				   NULL) >= 0);
		FZ_CHECK(id == i + 2);
	}
	return 0;
}

/* What a restarted gateway reads of node id: as a new inode, as a
 * directory to list (online and offline), its link target, kept names,
 * kept ACCESS answers. */
static void read_node(uint64_t id)
{
	static const char *const names[] = { "a", "b", "c", "fz", "." };
	struct gw_inode ino;
	struct nfsc_dirlist l;
	struct nfsc_attr a, ver;
	struct gw_access acc;
	struct timespec *at;
	struct nodes_md_rec r[8];
	char link[NODES_MD_BLOB_MAX + 1];
	uint64_t child;

	memset(&ino, 0, sizeof(ino));
	pthread_mutex_init(&ino.lock, NULL);
	ino.nodeid = id;
	gw_md_attach(&gw, &ino);
	FZ_CHECK(ino.access_next <= GW_ACCESS_SLOTS);
	FZ_CHECK(nodes_md_get(gw.md, id, r, 8) <= 8);
	FZ_CHECK(nodes_md_get_dents(gw.md, id, r, 4) <= 5);
	for (int offline = 0; offline < 2; offline++) {
		if (gw_md_listing(&gw, &ino, NULL, offline, &l, &at) == 0) {
			FZ_CHECK(l.n >= 2 && l.n <= l.cap && at);
			for (size_t i = 0; i < l.n; i++)
				FZ_CHECK(l.ents[i].name &&
					 l.ents[i].fh.len <= NFSC_FH_MAX &&
					 at[i].tv_nsec >= 0 &&
					 at[i].tv_nsec < 1000000000);
			nfsc_dirlist_free(&l);
			free(at);
		}
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			(void)gw_md_kept_child(&gw, &ino, names[i], offline,
					       &child);
	}
	if (gw_md_listing_version(&gw, &ino, &ver) &&
	    gw_md_listing(&gw, &ino, &ver, false, &l, &at) == 0) {
		nfsc_dirlist_free(&l);
		free(at);
	}
	(void)gw_md_listed_whole(&gw, &ino);
	if (gw_md_link_any(&gw, id, link, sizeof(link)) == 0)
		FZ_CHECK(strlen(link) < sizeof(link));
	(void)gw_md_attr_any(&gw, id, &a);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		(void)gw_md_dent_any(&gw, id, names[i], &child);
	(void)gw_md_access_any(&gw, id, 1000, 1000, 0, &acc);
	(void)gw_md_reader_any(&gw, id, 1000, 1000, 0, &acc);
	/* Freed: its attributes are kept again. */
	gw_md_keep_inode(&gw, &ino);
	pthread_mutex_destroy(&ino.lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nodes_md_stats ms;
	struct nodes_md_rec r;
	struct gw_inode dir;
	char err[256];

	unlink(fz_path("md.log.tmp"));
	fz_write("md.log", data, size);

	/* 1. Opened as at a start. */
	gw.md_epoch = gw_md_now_ns();
	if (nodes_md_open(fz_dir(), FZ_MD_GEN, &gw.md, err, sizeof(err)))
		return 0;
	nodes_md_stats(gw.md, &ms);
	if (!ms.clean)
		gw_md_unclean(&gw);	/* NULL if it cannot be rewritten */
	if (!gw.md)
		return 0;

	/* 2. Read. */
	for (uint64_t id = 1; id <= IDS; id++)
		read_node(id);

	/* 3. Written, closed, reopened. */
	memset(&dir, 0, sizeof(dir));
	pthread_mutex_init(&dir.lock, NULL);
	dir.nodeid = 2;
	gw_md_note_dent(&gw, &dir, "fz", 3);
	gw_md_note_link(&gw, 4, "fuzz-target");
	gw_md_forget(&gw, 5);
	FZ_CHECK(nodes_md_put(gw.md, IDS - 1, 1, 77, 1, "abc", 3) == 0);
	nodes_md_close(gw.md);
	gw.md = NULL;
	FZ_CHECK(nodes_md_open(fz_dir(), FZ_MD_GEN, &gw.md, err,
			       sizeof(err)) == 0);
	nodes_md_stats(gw.md, &ms);
	FZ_CHECK(ms.clean && !ms.dropped_bytes);
	FZ_CHECK(nodes_md_get_one(gw.md, IDS - 1, 1, 77, &r) == 0 &&
		 r.len == 3 && !memcmp(r.blob, "abc", 3));
	FZ_CHECK(gw_md_dent_any(&gw, 2, "fz", &r.key) == 0 && r.key == 3);
	FZ_CHECK(gw_md_link_any(&gw, 4, (char *)r.blob, sizeof(r.blob)) ==
		 0 && !strcmp((char *)r.blob, "fuzz-target"));
	FZ_CHECK(nodes_md_get(gw.md, 5, &r, 1) == 0);
	nodes_md_close(gw.md);
	gw.md = NULL;
	pthread_mutex_destroy(&dir.lock);
	return 0;
}
