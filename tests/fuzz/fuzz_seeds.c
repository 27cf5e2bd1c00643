/* fuzz_seeds: writes the seed corpus of the fuzz targets, small valid
 * files made by the real writers (nodes/, cache/, the gateway's
 * keep/kept_md.c, keep/kept_names.c, keep/silly.c, inode/handlekey.c and
 * daemon/origin_root.c), and the
 * damaged ones kept as regressions, into OUTDIR/<target>/:
 *
 *   fuzz_seeds OUTDIR        (tests/fuzz/corpus is committed)
 *
 * The node-id table's generation and an object's salt are random, so two
 * runs differ in those bytes; each seed is as good as any other.
 */
#include <endian.h>
#include <errno.h>
#include <time.h>

#include <xxhash.h>

#include "fuzz.h"
#include "cache.h"
#include "daemon.h"
#include "keep_i.h"

static const char *out_root;

/* Copy dir/name (of the scratch directory) to OUTDIR/target/seed; keep
 * only its first len bytes when len is not SIZE_MAX. */
static void keep(const char *name, const char *target, const char *seed,
		 size_t len)
{
	static uint8_t buf[1u << 20];
	char path[1024];
	ssize_t n = fz_read(name, buf, sizeof(buf));
	FILE *f;

	FZ_CHECK(n >= 0);
	if (len != SIZE_MAX && len < (size_t)n)
		n = (ssize_t)len;
	snprintf(path, sizeof(path), "%s/%s", out_root, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", out_root, target, seed);
	f = fopen(path, "w");
	FZ_CHECK(f && fwrite(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	printf("%s: %zd bytes\n", path, n);
}

static void clear(void)
{
	fz_cleanup();
	fz_dir_buf[0] = 0;
}

/* ---- nodes.log ---- */

static void nodes_seeds(void)
{
	struct nodes *t;
	char err[256];
	uint64_t id, first = 0;

	FZ_CHECK(nodes_open(fz_dir(), false, &t, err, sizeof(err)) == 0);
	nodes_close(t);
	keep(NODES_FILE, "fuzz_nodes_log", "empty", SIZE_MAX);

	FZ_CHECK(nodes_open(fz_dir(), false, &t, err, sizeof(err)) == 0);
	for (unsigned i = 0; i < 8; i++) {
		uint8_t h[NODES_HANDLE_MAX];
		size_t len = i == 7 ? NODES_HANDLE_MAX : fz_handle(i, h);

		if (i == 7)
			memset(h, 0xab, len);
		FZ_CHECK(nodes_add(t, h, len, first ? first : 1, &id,
				   NULL) == 1);
		if (!first)
			first = id;
	}
	FZ_CHECK(nodes_set_parent(t, first + 3, first + 1) == 0);
	FZ_CHECK(nodes_remove(t, first + 5) == 0);
	nodes_close(t);
	keep(NODES_FILE, "fuzz_nodes_log", "entries", SIZE_MAX);
	/* A crash in the middle of an append: a torn last record. */
	{
		struct stat st;

		FZ_CHECK(stat(fz_path(NODES_FILE), &st) == 0);
		keep(NODES_FILE, "fuzz_nodes_log", "torn",
		     (size_t)st.st_size - 9);
	}
	clear();
}

/* ---- md.log ---- */

static struct gw gw;
static struct gw_opts opts;

static struct nfsc_attr attr_of(enum nfsc_type type, uint64_t fileid)
{
	struct nfsc_attr a = {
		.type = type, .mode = type == NFSC_DIR ? 0755 : 0644,
		.nlink = 1, .uid = 1000, .gid = 1000, .size = 4096,
		.fileid = fileid,
	};

	clock_gettime(CLOCK_REALTIME, &a.mtime);
	a.ctime = a.mtime;
	a.atime = a.mtime;
	return a;
}

static void md_open(void)
{
	char err[256];

	FZ_CHECK(nodes_md_open(fz_dir(), FZ_MD_GEN, &gw.md, err,
			       sizeof(err)) == 0);
}

/* An empty directory (nodeid 6) listed whole, then its count of names
 * damaged: the regression seed of an n of 0xFFFFFFFF (kept_names.c). */
static void md_listing_damaged(uint32_t n, const char *seed)
{
	struct nodes_md_rec r;

	md_open();
	FZ_CHECK(nodes_md_get_one(gw.md, 6, 3, 0, &r) == 0);	/* MD_LISTED */
	memcpy(r.blob + 32, &n, 4);			/* its n */
	FZ_CHECK(nodes_md_put(gw.md, 6, 3, 0, r.fetched_ns, r.blob,
			      r.len) == 0);
	nodes_md_close(gw.md);
	keep("md.log", "fuzz_md_log", seed, SIZE_MAX);
}

static void md_seeds(void)
{
	struct nfsc_dirent ents[5];
	struct nfsc_dirlist l = { .ents = ents, .n = 5, .cap = 5 };
	struct nfsc_attr ver = attr_of(NFSC_DIR, 2);
	struct gw_inode dir, empty, file;
	struct gw_access acc = {
		.valid = true, .uid = 1000, .gid = 1000, .asked = 0x3f,
		.granted = 0x1f, .stamped = true, .mode = 0644, .fuid = 1000,
		.fgid = 1000,
	};
	struct nodes_stats ns;
	char err[256];
	ssize_t unclean;
	static uint8_t before[1u << 20];

	opts.acregmin = opts.acregmax = 3600;
	opts.acdirmin = opts.acdirmax = 3600;
	gw.o = &opts;
	FZ_CHECK(nodes_open(fz_dir(), false, &gw.nodes, err, sizeof(err)) == 0);
	nodes_stats(gw.nodes, &ns);
	for (unsigned i = 0; i < FZ_NODES; i++) {
		uint8_t h[32];
		uint64_t id;

		FZ_CHECK(nodes_add(gw.nodes, h, fz_handle(i, h), 1, &id,
				   NULL) == 1 && id == i + 2);
	}
	md_open();
	memset(&dir, 0, sizeof(dir));
	memset(&empty, 0, sizeof(empty));
	memset(&file, 0, sizeof(file));
	pthread_mutex_init(&dir.lock, NULL);
	pthread_mutex_init(&empty.lock, NULL);
	pthread_mutex_init(&file.lock, NULL);
	dir.nodeid = 2;
	empty.nodeid = 6;
	file.nodeid = 8;

	/* Directory 2 listed whole: ".", "..", a, b, c (ids 3, 4, 5). */
	memset(ents, 0, sizeof(ents));
	ents[0].name = (char *)".";
	ents[0].fileid = 2;
	ents[1].name = (char *)"..";
	ents[1].fileid = 1;
	for (unsigned i = 0; i < 3; i++) {
		static char names[3][2] = { "a", "b", "c" };

		ents[2 + i].name = names[i];
		ents[2 + i].has_fh = ents[2 + i].has_attr = true;
		ents[2 + i].fh.len = (uint32_t)fz_handle(i + 1,
							 ents[2 + i].fh.data);
		ents[2 + i].attr = attr_of(i == 2 ? NFSC_LNK : NFSC_REG,
					   100 + i);
		ents[2 + i].fileid = 100 + i;
	}
	gw_md_note_listing(&gw, &dir, &ver, &l);
	/* Directory 6 listed whole and empty. */
	l.n = 2;
	ents[0].fileid = 6;
	gw_md_note_listing(&gw, &empty, &ver, &l);
	/* An ACCESS answer, a link's target, an inode's attributes when it
	 * is freed, a name, a node forgotten. */
	acc.ctime = ents[2].attr.ctime;
	gw_md_note_access(&gw, 3, &acc);
	gw_md_note_link(&gw, 5, "a/link/target");
	file.attr = attr_of(NFSC_REG, 108);
	file.attr_valid = true;
	clock_gettime(CLOCK_MONOTONIC, &file.attr_at);
	gw_md_keep_inode(&gw, &file);
	gw_md_note_dent(&gw, &dir, "fz", 9);
	gw_md_unname(&gw, &dir, "gone");
	gw_md_note_link(&gw, 10, "x");
	gw_md_forget(&gw, 10);
	/* Before the close: what a crash leaves (no clean mark). */
	unclean = fz_read("md.log", before, sizeof(before));
	FZ_CHECK(unclean > 0);
	nodes_md_close(gw.md);
	keep("md.log", "fuzz_md_log", "records", SIZE_MAX);
	fz_write("md.log.unclean", before, (size_t)unclean);
	keep("md.log.unclean", "fuzz_md_log", "unclean", SIZE_MAX);

	md_listing_damaged(0xFFFFFFFFu, "listed_n_ffffffff");
	md_listing_damaged(65537, "listed_n_too_big");
	/* Attributes with an mtime no NFSv3 origin gives: the regression
	 * seed of the attribute timeout's signed overflow (UBSan). */
	md_open();
	file.nodeid = 11;
	file.attr.mtime.tv_sec = INT64_MIN;
	gw_md_keep_inode(&gw, &file);
	nodes_md_close(gw.md);
	keep("md.log", "fuzz_md_log", "attr_mtime_int64_min", SIZE_MAX);

	nodes_close(gw.nodes);
	pthread_mutex_destroy(&dir.lock);
	pthread_mutex_destroy(&empty.lock);
	pthread_mutex_destroy(&file.lock);
	clear();
}

/* ---- cache.conf and an object's metadata ---- */

static void cache_seeds(void)
{
	struct cache_opts o = {
		.dir = fz_dir(),
		.mode = CACHE_OPEN_OWNER,
		.block_size = FZ_OBJ_BS,
		.write_mode = CACHE_WRITE_BUFFERED,
	};
	char err[512], name[CACHE_NAME_LEN + 1], meta[64];
	struct cache_obj *obj;
	struct cache *c;
	uint8_t *data = malloc(FZ_OBJ_SIZE);

	FZ_CHECK(data);
	for (uint64_t i = 0; i < FZ_OBJ_SIZE; i++)
		data[i] = fz_obj_byte(i);
	FZ_CHECK(cache_open(&o, &c, err, sizeof(err)) == 0);
	keep("cache.conf", "fuzz_cache_conf", "made", SIZE_MAX);
	FZ_CHECK(cache_obj_name(FZ_OBJ_KEY, strlen(FZ_OBJ_KEY), name,
				sizeof(name)) == 0);
	snprintf(meta, sizeof(meta), "objects/%.2s/%s.meta", name, name);

	/* Got, nothing cached yet: a header only. */
	FZ_CHECK(cache_obj_get(c, FZ_OBJ_KEY, strlen(FZ_OBJ_KEY), "coh1", 4,
			       FZ_OBJ_SIZE, &obj) == 0);
	cache_obj_put(obj);
	keep(meta, "fuzz_cache_meta", "header", SIZE_MAX);
	/* Blocks 0, 2 and the short last one (3) cached; 1 absent. */
	FZ_CHECK(cache_obj_get(c, FZ_OBJ_KEY, strlen(FZ_OBJ_KEY), "coh1", 4,
			       FZ_OBJ_SIZE, &obj) == 0);
	FZ_CHECK(cache_fill(obj, data, FZ_OBJ_BS, 0) == 0);
	FZ_CHECK(cache_fill(obj, data + 2 * FZ_OBJ_BS,
			    FZ_OBJ_SIZE - 2 * FZ_OBJ_BS, 2 * FZ_OBJ_BS) == 0);
	cache_drain(c);
	cache_obj_put(obj);
	keep(meta, "fuzz_cache_meta", "partial", SIZE_MAX);
	/* All of it. */
	FZ_CHECK(cache_obj_get(c, FZ_OBJ_KEY, strlen(FZ_OBJ_KEY), "coh1", 4,
			       FZ_OBJ_SIZE, &obj) == 0);
	FZ_CHECK(cache_fill(obj, data + FZ_OBJ_BS, FZ_OBJ_BS,
			    FZ_OBJ_BS) == 0);
	cache_drain(c);
	{
		ssize_t n = cache_read(obj, data, FZ_OBJ_SIZE, 0);

		FZ_CHECK(n == FZ_OBJ_SIZE);
	}
	cache_obj_put(obj);
	keep(meta, "fuzz_cache_meta", "full", SIZE_MAX);
	cache_close(c);
	free(data);
	clear();

	/* Another block size. */
	o.dir = fz_dir();
	o.block_size = 4096;
	FZ_CHECK(cache_open(&o, &c, err, sizeof(err)) == 0);
	cache_close(c);
	keep("cache.conf", "fuzz_cache_conf", "made_4k", SIZE_MAX);
	clear();
}

/* ---- the gateway's small files ---- */

static void small_seeds(void)
{
	static const char silly[] =
		"cachegw-silly-names 1\n"
		"1000 1000 0100070102000000 .cachegw-silly.00000000000004d2.1\n"
		"0 0 01000701020000000a0b0c0d .cachegw-silly.00000000000004d3.2a\n";
	struct nfsc_fh fh = { .len = 28 };
	struct gw g = { 0 };

	for (uint32_t i = 0; i < fh.len; i++)
		fh.data[i] = (uint8_t)(i * 37 + 1);
	FZ_CHECK(gw_origin_root_save(fz_dir(), "127.0.0.1",
				     "/srv/export", &fh) == 0);
	keep("origin-root", "fuzz_origin_root", "made", SIZE_MAX);

	/* Written by the real writer: a successor's start rewrites what it
	 * loaded. */
	fz_write("silly-names", silly, sizeof(silly) - 1);
	FZ_CHECK(gw_silly_start(&g, fz_dir(), true) == 0);
	gw_silly_stop(&g);
	keep("silly-names", "fuzz_silly_names", "made", SIZE_MAX);

	FZ_CHECK(gw_handle_key_load(&g, fz_dir(), 1000) == 0);
	keep("handle-key", "fuzz_handle_key", "made", SIZE_MAX);
	/* The older format a start rewrites (CGWHKEY1: magic, seed,
	 * cutover, XXH3-64 of the 24 bytes before, little-endian), as test
	 * 76's tests/reexport/handlekey_v1 writes it. */
	{
		uint8_t b[32];
		uint64_t v;

		memcpy(b, "CGWHKEY1", 8);
		v = htole64(0x0123456789abcdefull);
		memcpy(b + 8, &v, 8);
		v = htole64(500);
		memcpy(b + 16, &v, 8);
		v = htole64(XXH3_64bits(b, 24));
		memcpy(b + 24, &v, 8);
		fz_write("handle-key", b, sizeof(b));
		keep("handle-key", "fuzz_handle_key", "v1", SIZE_MAX);
	}
	clear();
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	out_root = argv[1];
	mkdir(out_root, 0755);
	nodes_seeds();
	md_seeds();
	cache_seeds();
	small_seeds();
	return 0;
}
