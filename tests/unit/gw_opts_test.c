/* gw_opts_test: the gateway's option parsing (daemon/opts.c, against the
 * table of daemon/opts_table.c) on its own: the defaults a user gets (the
 * numbers nfsclient/ and cache/ use for 0), what actimeo= and friends
 * set, choices and flags, sizes with suffixes, the caps that follow from
 * other options, and bad values refused with a message naming the option
 * (never taken silently, nor half read). */
#include <stdint.h>

#include "cache.h"
#include "check.h"
#include "daemon.h"

static char errbuf[4096];

/* Parse "cachegw nfs://h/e /mnt [-f] -o OPTS"; the return value, *o
 * filled. */
static int parse_fg(const char *opts, bool fg, struct gw_opts *o)
{
	char *argv[7] = { "cachegw", "nfs://127.0.0.1/export", "/mnt", NULL,
			  NULL, NULL, NULL };
	int argc = 3, ret;
	FILE *f;

	if (fg)
		argv[argc++] = "-f";
	if (opts) {
		argv[argc++] = "-o";
		argv[argc++] = (char *)opts;
	}
	memset(o, 0, sizeof(*o));
	f = freopen(t_path("stderr"), "w", stderr);
	CHECK(f);
	ret = gw_opts_parse(argc, argv, o);
	fflush(stderr);
	f = fopen(t_path("stderr"), "r");
	CHECK(f);
	errbuf[fread(errbuf, 1, sizeof(errbuf) - 1, f)] = 0;
	fclose(f);
	return ret;
}

static int parse(const char *opts, struct gw_opts *o)
{
	return parse_fg(opts, false, o);
}

static void refused(const char *opts, const char *says)
{
	struct gw_opts o;

	if (parse(opts, &o) != -1 || !strstr(errbuf, says)) {
		fprintf(stdout, "'%s': not refused with '%s' (said '%s')\n",
			opts, says, errbuf);
		exit(1);
	}
	gw_opts_free(&o);
}

int main(void)
{
	struct gw_opts o;

	/* The defaults. */
	CHECK_EQ(parse("cache_dir=/c", &o), 0);
	CHECK(!strcmp(o.cache_dir, "/c"));
	CHECK_EQ(o.acregmin, 3);
	CHECK_EQ(o.acregmax, 60);
	CHECK_EQ(o.acdirmin, 30);
	CHECK_EQ(o.acdirmax, 60);
	CHECK_EQ(o.readahead, 8u << 20);
	CHECK_EQ(o.max_threads, 16);
	CHECK_EQ(o.dir_max_entries, 2097152);
	CHECK_EQ(o.walk_ahead, 8);
	CHECK_EQ(o.reclaim_after, 100000);
	CHECK_EQ(o.drain_timeout, 30);
	CHECK_EQ(o.write_window, 64u << 20);
	CHECK(!o.nocto && !o.soft && !o.writeback && !o.ro);
	CHECK_EQ(o.cache_size, 0);
	/* What nfsclient/ and cache/ would take for 0: the same numbers. */
	CHECK_EQ(o.nconnect, NFSC_NCONNECT_DEFAULT);
	CHECK_EQ(o.timeo, NFSC_TIMEO_DEFAULT);
	CHECK_EQ(o.retrans, NFSC_RETRANS_DEFAULT);
	CHECK_EQ(o.cache_block, CACHE_BLOCK_DEFAULT);
	CHECK_EQ(o.cache_write, CACHE_WRITE_DIRECT);
	CHECK_EQ(o.brun, CACHE_BRUN_DEFAULT);
	CHECK_EQ(o.bcull, CACHE_BCULL_DEFAULT);
	CHECK_EQ(o.bstop, CACHE_BSTOP_DEFAULT);
	CHECK(!o.cache_writes_around && !o.fill_skip);
	/* A daemon is supervised unless told not to; in the foreground
	 * only when told to. */
	CHECK_EQ(o.supervise, 1);
	gw_opts_free(&o);
	CHECK_EQ(parse_fg("cache_dir=/c", true, &o), 0);
	CHECK_EQ(o.supervise, 0);
	gw_opts_free(&o);
	CHECK_EQ(parse_fg("cache_dir=/c,supervise", true, &o), 0);
	CHECK_EQ(o.supervise, 1);
	gw_opts_free(&o);
	CHECK_EQ(parse("cache_dir=/c,nosupervise", &o), 0);
	CHECK_EQ(o.supervise, 0);
	gw_opts_free(&o);

	/* Words of a choice, and flags with their negations. */
	CHECK_EQ(parse("cache_dir=/c,cache_write=fadvise,cache_writes=around,"
		       "fill_behind=skip,soft,hard,supervise", &o), 0);
	CHECK_EQ(o.cache_write, CACHE_WRITE_FADVISE);
	CHECK(o.cache_writes_around && o.fill_skip && !o.soft && o.supervise);
	gw_opts_free(&o);

	/* actimeo= sets all four; a min above its max raises the max. */
	CHECK_EQ(parse("cache_dir=/c,actimeo=600,nocto,soft", &o), 0);
	CHECK_EQ(o.acregmin, 600);
	CHECK_EQ(o.acregmax, 600);
	CHECK_EQ(o.acdirmin, 600);
	CHECK_EQ(o.acdirmax, 600);
	CHECK(o.nocto && o.soft);
	gw_opts_free(&o);
	CHECK_EQ(parse("cache_dir=/c,acregmin=90", &o), 0);
	CHECK_EQ(o.acregmax, 90);
	gw_opts_free(&o);
	/* The later of two contrary flags wins. */
	CHECK_EQ(parse("cache_dir=/c,nocto,cto,writeback,nowriteback", &o), 0);
	CHECK(!o.nocto && !o.writeback);
	gw_opts_free(&o);

	/* Sizes: suffixes; readahead kept to an eighth of a small cap. */
	CHECK_EQ(parse("cache_dir=/c,cache_size=1G,write_window=512K", &o), 0);
	CHECK_EQ(o.cache_size, 1ull << 30);
	CHECK_EQ(o.write_window, 512u << 10);
	CHECK_EQ(o.readahead, 8u << 20);
	gw_opts_free(&o);
	CHECK_EQ(parse("cache_dir=/c,cache_size=16M", &o), 0);
	CHECK_EQ(o.readahead, 2u << 20);
	gw_opts_free(&o);

	/* -h prints the help (1: done, nothing to mount). */
	{
		char *argv[] = { "cachegw", "-h", NULL };

		memset(&o, 0, sizeof(o));
		CHECK_EQ(gw_opts_parse(2, argv, &o), 1);
		gw_opts_free(&o);
	}

	/* Refused, saying which option and why. */
	refused("cache_dir=/c,max_threads=0", "max_threads");
	refused("cache_dir=/c,max_threads=5000", "max_threads");
	refused("cache_dir=/c,drain_timeout=0", "drain_timeout");
	refused("cache_dir=/c,dir_max_entries=0", "dir_max_entries");
	refused("cache_dir=/c,walk_ahead=65", "walk_ahead");
	refused("cache_dir=/c,cache_size=lots", "cache_size");
	refused("cache_dir=/c,no_such_option=1", "no_such_option");
	/* A number is a number: no trailing letters, no sign. */
	refused("cache_dir=/c,nconnect=5abc", "nconnect=5abc");
	refused("cache_dir=/c,rsize=-1", "rsize=-1");
	refused("cache_dir=/c,nconnect=65", "expected 1 to 64");
	refused("cache_dir=/c,cache_block=12K", "power of two");
	refused("cache_dir=/c,cache_write=fast",
		"expected direct, dontcache, buffered or fadvise");
	refused("cache_dir=/c,writeback,dirty_max=4k", "expected 0 or bytes");
	{
		char *argv[] = { "cachegw", "nfs://h/e", NULL };

		memset(&o, 0, sizeof(o));
		CHECK_EQ(gw_opts_parse(2, argv, &o), -1);
		gw_opts_free(&o);
	}
	printf("gw_opts_test: ok\n");
	return 0;
}
