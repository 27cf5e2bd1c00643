/* cachegw-inspect - look at, check and trim a cachegw cache directory.
 *
 * Offline subcommands (ls, show, verify, evict) read the cache through
 * cache/'s API; ls/show/verify work beside a live gateway (read-only),
 * verify --repair and evict refuse while one holds the cache. stats talks
 * to a live gateway over DIR/control.sock (so does reclaim); warm reads files through a
 * live mount into its cache, top shows a live gateway's rates.
 *
 * Exit status: 0 ok, 1 failure (or damage found by verify), 2 usage error
 * or the cache is held by a live gateway.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "inspect_i.h"

#define EXIT_DAMAGED 1

const char *prog = "cachegw-inspect";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s COMMAND --cache-dir DIR [ARGS]\n"
		"  ls      --cache-dir DIR                  list objects\n"
		"  show    --cache-dir DIR OBJECT           one object's metadata\n"
		"  verify  --cache-dir DIR [--repair] [OBJECT]\n"
		"                                           check every block checksum;\n"
		"                                           exit 1 if any is damaged\n"
		"  evict   --cache-dir DIR (OBJECT|--all)   remove objects (gateway stopped)\n"
		"  stats   --cache-dir DIR [--prometheus]   live statistics of a gateway\n"
		"  warm    --cache-dir DIR [--dry-run] [-j N] PATH...\n"
		"                                           read files or trees under the\n"
		"                                           gateway's mount into its cache\n"
		"  top     --cache-dir DIR [--once] [--interval S]\n"
		"                                           a live gateway's rates\n"
		"  reclaim --cache-dir DIR                  a live gateway drops the\n"
		"                                           node-ids of files gone at\n"
		"                                           the origin, now\n"
		"  fleet   --cache-dir DIR                  a live fleet gateway's\n"
		"                                           store and members\n"
		"OBJECT is the 16-hex-digit name shown by ls.\n", prog);
}

static int usage_err(const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog, msg);
	usage(stderr);
	return EXIT_USAGE;
}

struct args {
	const char *dir;
	const char *object;
	int repair, all, prometheus;
};

/* Options of every subcommand; each one rejects what it does not take. */
static int parse(int argc, char **argv, struct args *a, const char *allowed)
{
	static const struct option opts[] = {
		{ "cache-dir", required_argument, NULL, 'd' },
		{ "repair", no_argument, NULL, 'r' },
		{ "all", no_argument, NULL, 'a' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+d:h", opts, NULL)) != -1) {
		if (ch == 'h') {
			usage(stdout);
			exit(0);
		}
		if (ch == '?' || !strchr(allowed, ch))
			return usage_err("unexpected option");
		switch (ch) {
		case 'd': a->dir = optarg; break;
		case 'r': a->repair = 1; break;
		case 'a': a->all = 1; break;
		case 'p': a->prometheus = 1; break;
		}
	}
	if (!a->dir)
		return usage_err("--cache-dir DIR is required");
	if (optind < argc)
		a->object = argv[optind++];
	if (optind < argc)
		return usage_err("too many arguments");
	return 0;
}

/* Open the cache; a held lock is exit 2 with the library's message. */
static int open_cache(const char *dir, enum cache_open_mode mode,
		      struct cache **c)
{
	struct cache_opts o = { .dir = dir, .mode = mode };
	char err[512];
	int ret = cache_open(&o, c, err, sizeof(err));

	if (ret == -EBUSY) {
		fprintf(stderr, "%s: %s; stop it first\n", prog, err);
		return EXIT_USAGE;
	}
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return 1;
	}
	return 0;
}

/* Keys and blobs are opaque: printable as text when they are, else hex. */
static void print_bytes(const uint8_t *b, size_t len)
{
	bool text = len > 0;

	for (size_t i = 0; i < len; i++)
		text &= b[i] >= 0x20 && b[i] < 0x7f;
	if (text) {
		printf("%.*s", (int)len, (const char *)b);
		return;
	}
	printf("0x");
	for (size_t i = 0; i < len; i++)
		printf("%02x", b[i]);
}

static void fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = ns / 1000000000u;
	struct tm tm;

	if (!ns) {
		snprintf(buf, len, "-");
		return;
	}
	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
}

static int ls_one(const struct cache_obj_info *i, void *arg)
{
	char when[32];

	(void)arg;
	if (i->damaged) {
		printf("%-16s %12s %12s %13s %10" PRIu64 " %-19s (damaged metadata)\n",
		       i->name, "-", "-", "-", i->alloc_bytes, "-");
		return 0;
	}
	fmt_time(i->last_use_ns, when, sizeof(when));
	printf("%-16s %12" PRIu64 " %12" PRIu64 " %6" PRIu64 "/%-6" PRIu64
	       " %10" PRIu64 " %-19s ", i->name, i->size, i->cached_bytes,
	       i->blocks_present, i->blocks_total, i->alloc_bytes, when);
	print_bytes(i->key, i->keylen);
	printf("\n");
	return 0;
}

static int cmd_ls(struct args *a)
{
	struct cache *c;
	struct cache_stats st;
	int ret;

	if (a->object)
		return usage_err("ls takes no OBJECT");
	ret = open_cache(a->dir, CACHE_OPEN_INSPECT, &c);
	if (ret)
		return ret;
	printf("%-16s %12s %12s %13s %10s %-19s %s\n", "OBJECT", "SIZE",
	       "CACHED", "BLOCKS", "ALLOCATED", "LAST_USE", "KEY");
	ret = cache_iterate(c, ls_one, NULL);
	cache_get_stats(c, &st);
	printf("# %" PRIu64 " objects, %" PRIu64 " bytes allocated, block size %u\n",
	       st.objects, st.used_bytes, cache_block_size(c));
	cache_close(c);
	if (ret) {
		fprintf(stderr, "%s: %s\n", prog, strerror(-ret));
		return 1;
	}
	return 0;
}

static int cmd_show(struct args *a)
{
	struct cache_obj_info i;
	struct cache *c;
	char when[32];
	int ret;

	if (!a->object)
		return usage_err("show needs an OBJECT");
	ret = open_cache(a->dir, CACHE_OPEN_INSPECT, &c);
	if (ret)
		return ret;
	ret = cache_obj_info(c, a->object, &i);
	cache_close(c);
	if (ret) {
		fprintf(stderr, "%s: object %s: %s\n", prog, a->object,
			ret == -ENOENT ? "no such object" : strerror(-ret));
		return 1;
	}
	printf("object:         %s\n", i.name);
	if (i.damaged) {
		printf("metadata:       DAMAGED (dropped on next use; verify --repair removes it)\n");
		printf("allocated:      %" PRIu64 "\n", i.alloc_bytes);
		return 1;
	}
	printf("key:            ");
	print_bytes(i.key, i.keylen);
	printf("\ncoherency:      ");
	print_bytes(i.coh, i.cohlen);
	fmt_time(i.last_use_ns, when, sizeof(when));
	printf("\nsize:           %" PRIu64 "\n", i.size);
	printf("block size:     %u\n", i.block_size);
	printf("blocks present: %" PRIu64 " of %" PRIu64 "\n", i.blocks_present,
	       i.blocks_total);
	printf("cached bytes:   %" PRIu64 "\n", i.cached_bytes);
	printf("allocated:      %" PRIu64 "\n", i.alloc_bytes);
	printf("last use:       %s\n", when);
	return 0;
}

static int cmd_verify(struct args *a)
{
	struct cache *c;
	uint64_t bad = 0;
	int ret;

	ret = open_cache(a->dir, a->repair ? CACHE_OPEN_MODIFY : CACHE_OPEN_INSPECT,
			 &c);
	if (ret)
		return ret;
	ret = cache_verify(c, a->object, a->repair, &bad);
	cache_close(c);
	if (ret) {
		fprintf(stderr, "%s: verify: %s\n", prog,
			ret == -ENOENT ? "no such object" : strerror(-ret));
		return 1;
	}
	printf("%" PRIu64 " damaged block(s)%s\n", bad,
	       bad && a->repair ? " dropped" : "");
	return bad ? EXIT_DAMAGED : 0;
}

static int cmd_evict(struct args *a)
{
	struct cache *c;
	int ret;

	if (!a->all == !a->object)
		return usage_err("evict needs an OBJECT or --all");
	ret = open_cache(a->dir, CACHE_OPEN_MODIFY, &c);
	if (ret)
		return ret;
	ret = cache_evict(c, a->all ? NULL : a->object);
	cache_close(c);
	if (ret) {
		fprintf(stderr, "%s: evict: %s\n", prog,
			ret == -ENOENT ? "no such object" : strerror(-ret));
		return 1;
	}
	return 0;
}

/* ---- stats: the gateway's counters, as it prints them ---- */
static int cmd_stats(struct args *a)
{
	char *reply;
	int ret;

	if (a->object)
		return usage_err("stats takes no OBJECT");
	ret = ctl_ask(a->dir, a->prometheus ? "prometheus" : "stats", &reply);
	if (ret) {
		ctl_perror(a->dir, ret);
		return 1;
	}
	fputs(reply, stdout);
	free(reply);
	return 0;
}

/* ---- reclaim, fleet: a live gateway's answer to one command ---- */
static int ask_live(struct args *a, const char *cmd)
{
	char *reply;
	int ret;

	if (a->object) {
		fprintf(stderr, "%s: %s takes no OBJECT\n", prog, cmd);
		usage(stderr);
		return EXIT_USAGE;
	}
	ret = ctl_ask(a->dir, cmd, &reply);
	if (ret) {
		ctl_perror(a->dir, ret);
		return 1;
	}
	fputs(reply, stdout);
	ret = !strncmp(reply, "error:", 6);
	free(reply);
	return ret;
}

/* One reclaim pass over the node-id table. */
static int cmd_reclaim(struct args *a)
{
	return ask_live(a, "reclaim");
}

/* The fleet store's health and the export's members. */
static int cmd_fleet(struct args *a)
{
	return ask_live(a, "fleet");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		const char *opts;
		int (*fn)(struct args *a);
	} cmds[] = {
		{ "ls", "d", cmd_ls },
		{ "show", "d", cmd_show },
		{ "verify", "dr", cmd_verify },
		{ "evict", "da", cmd_evict },
		{ "stats", "dp", cmd_stats },
		{ "reclaim", "d", cmd_reclaim },
		{ "fleet", "d", cmd_fleet },
	};
	struct args a = { 0 };

	if (argc < 2)
		return usage_err("missing COMMAND");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	/* These take lists of paths and options of their own. */
	if (!strcmp(argv[1], "warm"))
		return cmd_warm(argc - 1, argv + 1);
	if (!strcmp(argv[1], "top"))
		return cmd_top(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		int ret;

		if (strcmp(argv[1], cmds[i].name))
			continue;
		ret = parse(argc - 1, argv + 1, &a, cmds[i].opts);
		if (ret)
			return ret;
		return cmds[i].fn(&a);
	}
	return usage_err("unknown COMMAND");
}
