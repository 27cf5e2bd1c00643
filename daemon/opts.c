/* opts.c - command line: `cachegw SOURCE MOUNTPOINT [-f] [-o OPT[,OPT...]]`.
 *
 * Option names follow nfs(5), cachefilesd.conf and FUSE where one exists.
 * Anything that is neither ours nor a mount option libfuse understands is
 * an error, so a typo never silently changes behaviour.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "cache.h"
#include "daemon.h"

enum {
	KEY_HELP, KEY_VERSION, KEY_FG, KEY_DEBUG, KEY_ACTIMEO, KEY_SIZE,
	KEY_BLOCK, KEY_WRITE, KEY_RA, KEY_PASS, KEY_SOFT, KEY_HARD, KEY_NOCTO, KEY_SUPERVISE, KEY_NOSUPERVISE,
	KEY_CTO, KEY_ALLOW_OTHER, KEY_RO, KEY_IGNORE, KEY_WINDOW, KEY_DIRTY,
	KEY_CWRITES, KEY_METRICS, KEY_WRITEBACK, KEY_NOWRITEBACK,
	KEY_FILLBEHIND,
};

#define OPT(t, f) { t, offsetof(struct gw_opts, f), 1 }
static const struct fuse_opt gw_optspec[] = {
	OPT("cache_dir=%s", cache_dir),
	OPT("nconnect=%u", nconnect),
	OPT("rsize=%u", rsize),
	OPT("wsize=%u", wsize),
	OPT("timeo=%u", timeo),
	OPT("retrans=%u", retrans),
	OPT("acregmin=%u", acregmin),
	OPT("acregmax=%u", acregmax),
	OPT("acdirmin=%u", acdirmin),
	OPT("acdirmax=%u", acdirmax),
	OPT("brun=%u", brun),
	OPT("bcull=%u", bcull),
	OPT("bstop=%u", bstop),
	OPT("max_threads=%u", max_threads),
	OPT("dir_max_entries=%u", dir_max_entries),
	OPT("reclaim_after=%lu", reclaim_after),
	OPT("logfile=%s", logfile),
	OPT("pidfile=%s", pidfile),
	OPT("drain_timeout=%u", drain_timeout),
	OPT("offline=%u", offline),
	FUSE_OPT_KEY("actimeo=", KEY_ACTIMEO),
	FUSE_OPT_KEY("cache_size=", KEY_SIZE),
	FUSE_OPT_KEY("cache_block=", KEY_BLOCK),
	FUSE_OPT_KEY("cache_write=", KEY_WRITE),
	FUSE_OPT_KEY("readahead=", KEY_RA),
	FUSE_OPT_KEY("write_window=", KEY_WINDOW),
	FUSE_OPT_KEY("dirty_max=", KEY_DIRTY),
	FUSE_OPT_KEY("cache_writes=", KEY_CWRITES),
	FUSE_OPT_KEY("fill_behind=", KEY_FILLBEHIND),
	FUSE_OPT_KEY("metrics=", KEY_METRICS),
	FUSE_OPT_KEY("soft", KEY_SOFT),
	FUSE_OPT_KEY("hard", KEY_HARD),
	FUSE_OPT_KEY("nocto", KEY_NOCTO),
	FUSE_OPT_KEY("supervise", KEY_SUPERVISE),
	FUSE_OPT_KEY("nosupervise", KEY_NOSUPERVISE),
	FUSE_OPT_KEY("cto", KEY_CTO),
	FUSE_OPT_KEY("writeback", KEY_WRITEBACK),
	FUSE_OPT_KEY("nowriteback", KEY_NOWRITEBACK),
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("rw", KEY_IGNORE),
	/* Passed to the kernel/libfuse as they are. */
	FUSE_OPT_KEY("default_permissions", KEY_IGNORE),
	FUSE_OPT_KEY("nosuid", KEY_PASS),
	FUSE_OPT_KEY("suid", KEY_PASS),
	FUSE_OPT_KEY("nodev", KEY_PASS),
	FUSE_OPT_KEY("dev", KEY_PASS),
	FUSE_OPT_KEY("noexec", KEY_PASS),
	FUSE_OPT_KEY("exec", KEY_PASS),
	FUSE_OPT_KEY("noatime", KEY_PASS),
	FUSE_OPT_KEY("atime", KEY_PASS),
	FUSE_OPT_KEY("relatime", KEY_PASS),
	FUSE_OPT_KEY("sync", KEY_PASS),
	FUSE_OPT_KEY("async", KEY_PASS),
	FUSE_OPT_KEY("dirsync", KEY_PASS),
	/* fstab words mount.fuse3 may leave in. */
	FUSE_OPT_KEY("defaults", KEY_IGNORE),
	FUSE_OPT_KEY("_netdev", KEY_IGNORE),
	FUSE_OPT_KEY("nofail", KEY_IGNORE),
	FUSE_OPT_KEY("auto", KEY_IGNORE),
	FUSE_OPT_KEY("noauto", KEY_IGNORE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_END
};

/* fuse_opt_parse fills templates at offsets from its data pointer: the
 * options must come first. */
struct parse_ctx {
	struct gw_opts o;
	int result;		/* 0 ok, 1 done (help), -1 error */
	int positional;
};

void gw_usage(const char *prog)
{
	printf(
"usage: %s nfs://SERVER/EXPORT[?nfsport=N&mountport=N] MOUNTPOINT [-f] [-o OPTIONS]\n"
"\n"
"Mounts an NFS export through FUSE with a persistent, checksummed cache.\n"
"\n"
"  -f                   stay in the foreground (log to stderr)\n"
"  -d, -o debug         FUSE debug output (implies -f)\n"
"  -h, --help           this help;  -V, --version  the version\n"
"\n"
"Options (-o, comma separated):\n"
"  cache_dir=DIR        the cache directory (required)\n"
"  cache_size=BYTES     hard cap on cached bytes (K/M/G/T suffixes)\n"
"  cache_block=BYTES    block size of new caches, power of two 4K..4M [64K]\n"
"  cache_write=MODE     direct | dontcache | buffered | fadvise [direct]\n"
"  brun=%%,bcull=%%,bstop=%% free-space thresholds of the cache fs [10,7,3]\n"
"  readahead=BYTES      largest readahead window [8M]\n"
"  write_window=BYTES   bytes of WRITE in flight per mount [64M]\n"
"  dirty_max=BYTES      writeback: the mount's dirty pages, 0 = global limits [0]\n"
"  cache_writes=MODE    through (cache written data) | around (drop it)\n"
"  fill_behind=MODE     cache disk behind the origin: wait (readers slow to\n"
"                       the disk) | skip (what it cannot take is not cached)\n"
"  nconnect=N           connections to the origin [4]\n"
"  rsize=,wsize=BYTES   caps on READ/WRITE sizes [server's maximum]\n"
"  hard | soft          retry forever, or fail after retrans [hard]\n"
"  timeo=DS,retrans=N   deciseconds before a retry [600], retries [3]\n"
"  actimeo=S            sets acregmin, acregmax, acdirmin, acdirmax\n"
"  acregmin=S,acregmax=S,acdirmin=S,acdirmax=S  attribute cache [3,60,30,60]\n"
"  nocto                no attribute check on open\n"
"  writeback            kernel write-back cache: writes land in the page\n"
"                       cache, reach the origin at flush/fsync/close [off]\n"
"  allow_other          let other users use the mount\n"
"  ro                   read-only mount\n"
"  max_threads=N        FUSE worker threads [16]\n"
"  dir_max_entries=N    entries in one directory listing; a larger\n"
"                       directory fails to open with EFBIG [2097152]\n"
"  reclaim_after=N      after N new node-ids (and the table's size at the\n"
"                       last pass), drop those of files gone at the origin\n"
"                       [100000; 0: only on cachegw-inspect reclaim]\n"
"  pidfile=PATH         the main process's pid (the supervisor's with\n"
"                       supervise), rewritten by a takeover [none]\n"
"  logfile=PATH         log here (SIGHUP reopens it) [stderr; syslog when\n"
"                       in the background]\n"
"  drain_timeout=S      after SIGTERM: for open files, then for the last\n"
"                       commits; a handover's commits [30]\n"
"  supervise            a supervising process keeps the FUSE connection and\n"
"                       starts a successor when the serving one dies\n"
"                       [the default without -f]\n"
"  nosupervise          no supervisor [the default with -f]\n"
"  offline=S            origin silent S seconds: serve what the cache holds,\n"
"                       fail what it does not (EHOSTDOWN); start without\n"
"                       the origin from a warm cache [0: off]\n"
"  metrics=[ADDR:]PORT  serve Prometheus metrics on http://ADDR:PORT/metrics\n"
"                       [off; ADDR 127.0.0.1 unless given: 0.0.0.0, [::]]\n",
	       prog);
}

/* "64M" -> bytes. Returns 0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || (mul > 1 && v > UINT64_MAX / mul))
		return -EINVAL;
	*out = v * mul;
	return 0;
}

/* metrics=: "PORT", ":PORT" (both loopback), "ADDR:PORT" with ADDR a
 * numeric IPv4 address, "localhost" or "[IPv6]". Only an address the admin
 * names is bound: a bare port never listens beyond this machine. */
static int parse_metrics(const char *s, struct gw_opts *o)
{
	const char *colon = strrchr(s, ':'), *port = colon ? colon + 1 : s;
	char host[INET6_ADDRSTRLEN + 2];
	size_t hlen = colon ? (size_t)(colon - s) : 0;
	unsigned long pn;
	char *end;

	if (!*port || strspn(port, "0123456789") != strlen(port))
		return -EINVAL;
	errno = 0;
	pn = strtoul(port, &end, 10);
	if (errno || pn < 1 || pn > 65535 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = 0;
	memset(&o->metrics_addr, 0, sizeof(o->metrics_addr));
	if (hlen > 2 && host[0] == '[' && host[hlen - 1] == ']') {
		struct sockaddr_in6 *a6 = (void *)&o->metrics_addr;

		host[hlen - 1] = 0;
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)pn);
		o->metrics_len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (void *)&o->metrics_addr;

		if (!hlen || !strcmp(host, "localhost"))
			strcpy(host, "127.0.0.1");
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -EINVAL;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)pn);
		o->metrics_len = sizeof(*a4);
	}
	return 0;
}

static int bad_value(struct parse_ctx *p, const char *arg, const char *why)
{
	fprintf(stderr, "cachegw: invalid option '%s': %s\n", arg, why);
	p->result = -1;
	return -1;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_ctx *p = data;
	struct gw_opts *o = &p->o;
	const char *val = strchr(arg, '=');
	uint64_t v;

	(void)outargs;
	val = val ? val + 1 : "";
	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (p->positional == 0)
			o->source = strdup(arg);
		else if (p->positional == 1)
			o->mountpoint = strdup(arg);
		else {
			fprintf(stderr, "cachegw: unexpected argument '%s' "
				"(usage: cachegw SOURCE MOUNTPOINT [-o OPTIONS])\n",
				arg);
			p->result = -1;
			return -1;
		}
		p->positional++;
		return 0;
	case FUSE_OPT_KEY_OPT:
		if (arg[0] == '-')
			fprintf(stderr, "cachegw: unknown option '%s' (see "
				"cachegw --help)\n", arg);
		else
			fprintf(stderr, "cachegw: unknown option '-o %s' (see "
				"cachegw --help)\n", arg);
		p->result = -1;
		return -1;
	case KEY_HELP:
		gw_usage("cachegw");
		p->result = 1;
		return -1;
	case KEY_VERSION:
		printf("cachegw %s\n", CACHEGW_VERSION);
		p->result = 1;
		return -1;
	case KEY_FG:
		o->foreground = true;
		return 0;
	case KEY_DEBUG:
		o->debug = o->foreground = true;
		return 0;
	case KEY_ACTIMEO:
		if (parse_size(val, &v) || v > 86400 * 365)
			return bad_value(p, arg, "expected seconds");
		o->acregmin = o->acregmax = o->acdirmin = o->acdirmax =
			(unsigned)v;
		return 0;
	case KEY_SIZE:
		if (parse_size(val, &v))
			return bad_value(p, arg, "expected bytes, e.g. 16G");
		o->cache_size = v;
		return 0;
	case KEY_BLOCK:
		if (parse_size(val, &v) || v < CACHE_BLOCK_MIN ||
		    v > CACHE_BLOCK_MAX || (v & (v - 1)))
			return bad_value(p, arg,
					 "expected a power of two, 4K to 4M");
		o->cache_block = (uint32_t)v;
		return 0;
	case KEY_WRITE:
		if (!strcmp(val, "direct"))
			o->cache_write = CACHE_WRITE_DIRECT;
		else if (!strcmp(val, "dontcache"))
			o->cache_write = CACHE_WRITE_DONTCACHE;
		else if (!strcmp(val, "buffered"))
			o->cache_write = CACHE_WRITE_BUFFERED;
		else if (!strcmp(val, "fadvise"))
			o->cache_write = CACHE_WRITE_FADVISE;
		else
			return bad_value(p, arg, "expected direct, dontcache, "
					 "buffered or fadvise");
		return 0;
	case KEY_RA:
		if (parse_size(val, &v) || v > (1ull << 30))
			return bad_value(p, arg, "expected bytes up to 1G");
		o->readahead = v;
		return 0;
	case KEY_WINDOW:
		if (parse_size(val, &v) || v < 4096 || v > (1ull << 34))
			return bad_value(p, arg, "expected bytes, 4K to 16G");
		o->write_window = v;
		return 0;
	case KEY_DIRTY:
		if (parse_size(val, &v) || (v && v < (1u << 20)) ||
		    v > (1ull << 40))
			return bad_value(p, arg, "expected 0 or bytes, 1M to 1T");
		o->dirty_max = v;
		return 0;
	case KEY_CWRITES:
		if (!strcmp(val, "through"))
			o->cache_writes_around = false;
		else if (!strcmp(val, "around"))
			o->cache_writes_around = true;
		else
			return bad_value(p, arg, "expected through or around");
		return 0;
	case KEY_FILLBEHIND:
		if (!strcmp(val, "wait"))
			o->fill_skip = false;
		else if (!strcmp(val, "skip"))
			o->fill_skip = true;
		else
			return bad_value(p, arg, "expected wait or skip");
		return 0;
	case KEY_METRICS:
		if (parse_metrics(val, o))
			return bad_value(p, arg, "expected [ADDR:]PORT, e.g. "
					 "9100, 127.0.0.1:9100, 0.0.0.0:9100 "
					 "or [::1]:9100");
		return 0;
	case KEY_SOFT:
		o->soft = true;
		return 0;
	case KEY_HARD:
		o->soft = false;
		return 0;
	case KEY_NOCTO:
		o->nocto = true;
		return 0;
	case KEY_SUPERVISE:
		o->supervise = 1;
		return 0;
	case KEY_NOSUPERVISE:
		o->supervise = 0;
		return 0;
	case KEY_CTO:
		o->nocto = false;
		return 0;
	case KEY_WRITEBACK:
		o->writeback = true;
		return 0;
	case KEY_NOWRITEBACK:
		o->writeback = false;
		return 0;
	case KEY_ALLOW_OTHER:
		o->allow_other = true;
		return 0;
	case KEY_RO:
		o->ro = true;
		return 0;
	case KEY_IGNORE:
		return 0;
	case KEY_PASS:
		return 1;	/* keep it for libfuse */
	}
	return 1;
}

int gw_opts_parse(int argc, char **argv, struct gw_opts *out)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct parse_ctx pc;
	struct gw_opts *o = &pc.o;

	memset(&pc, 0, sizeof(pc));
	o->acregmin = 3;
	o->acregmax = 60;
	o->acdirmin = 30;
	o->acdirmax = 60;
	o->readahead = 8u << 20;
	o->brun = 10;
	o->bcull = 7;
	o->bstop = 3;
	o->max_threads = 16;
	o->dir_max_entries = 2097152;
	o->reclaim_after = 100000;
	o->write_window = 64u << 20;
	o->drain_timeout = 30;
	o->supervise = -1;
	if (fuse_opt_parse(&args, &pc, gw_optspec, opt_proc) != 0 ||
	    pc.result) {
		fuse_opt_free_args(&args);
		*out = *o;
		return pc.result > 0 ? 1 : -1;
	}
	o->fuse_args = args;
	*out = *o;
	o = out;
	if (!o->source || !o->mountpoint) {
		fprintf(stderr, "cachegw: missing %s (usage: cachegw "
			"nfs://SERVER/EXPORT MOUNTPOINT [-o OPTIONS])\n",
			o->source ? "MOUNTPOINT" : "SOURCE and MOUNTPOINT");
		return -1;
	}
	/* Readahead fills are reserved in the cache before they are written:
	 * a window near cache_size would make a reader cull its own blocks. */
	if (o->cache_size && o->readahead > o->cache_size / 8)
		o->readahead = o->cache_size / 8 > 4096 ? o->cache_size / 8 :
							   4096;
	/* A daemon is supervised unless told not to: its crash then costs
	 * clients a pause, not the mount (cachegw(8) UPGRADE AND CRASH).
	 * In the foreground (a test, a debugger, a unit of Type=simple)
	 * the process started is the one that serves. */
	if (o->supervise < 0)
		o->supervise = !o->foreground;
	if (o->acregmin > o->acregmax)
		o->acregmax = o->acregmin;
	if (o->acdirmin > o->acdirmax)
		o->acdirmax = o->acdirmin;
	if (o->max_threads < 1 || o->max_threads > 1024) {
		fprintf(stderr, "cachegw: invalid option 'max_threads': "
			"expected 1 to 1024\n");
		return -1;
	}
	if (o->dir_max_entries < 1) {
		fprintf(stderr, "cachegw: invalid option 'dir_max_entries=0': "
			"expected at least 1\n");
		return -1;
	}
	if (o->drain_timeout < 1 || o->drain_timeout > 86400) {
		fprintf(stderr, "cachegw: invalid option 'drain_timeout=%u': "
			"expected 1 to 86400 seconds\n", o->drain_timeout);
		return -1;
	}
	if (o->offline > 86400) {
		fprintf(stderr, "cachegw: invalid option 'offline=%u': "
			"expected 1 to 86400 seconds, or 0 (off)\n",
			o->offline);
		return -1;
	}
	if (o->dirty_max && !o->writeback) {
		fprintf(stderr, "cachegw: invalid option 'dirty_max': it limits "
			"the kernel's write-back cache; add -o writeback\n");
		return -1;
	}
	if (o->nconnect > 64) {
		fprintf(stderr, "cachegw: invalid option 'nconnect=%u': "
			"expected 1 to 64\n", o->nconnect);
		return -1;
	}
	if (!(o->brun > o->bcull && o->bcull > o->bstop && o->brun < 100)) {
		fprintf(stderr, "cachegw: invalid options brun=%u, bcull=%u, "
			"bstop=%u: need 100 > brun > bcull > bstop\n",
			o->brun, o->bcull, o->bstop);
		return -1;
	}
	return 0;
}

void gw_opts_free(struct gw_opts *o)
{
	fuse_opt_free_args(&o->fuse_args);
	free(o->source);
	free(o->mountpoint);
	free(o->cache_dir);
	free(o->logfile);
	free(o->pidfile);
	free(o->mountpoint_real);
}
