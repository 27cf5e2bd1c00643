/* opts.c - command line: `cachegw SOURCE MOUNTPOINT [-f] [-o OPT[,OPT...]]`,
 * parsed against the options table (opts_table.c): its defaults first,
 * then each option by its row's kind and range.
 *
 * Option names follow nfs(5), cachefilesd.conf and FUSE where one exists.
 * Anything that is neither ours nor a mount option libfuse understands is
 * an error, so a typo never silently changes behaviour.
 */
#include <arpa/inet.h>
#include <assert.h>
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
#include "nfsc.h"

/* fuse_opt_parse fills templates at offsets from its data pointer: the
 * options must come first. */
struct parse_ctx {
	struct gw_opts o;
	int result;		/* 0 ok, 1 done (help), -1 error */
	int positional;
};

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

/* Set row r's field of o to v. */
static void row_store(struct gw_opts *o, const struct gw_opt_row *r, uint64_t v)
{
	char *field = (char *)o + r->off;

	if (r->size == sizeof(bool)) {
		bool b = v != 0;

		memcpy(field, &b, sizeof(b));
	} else if (r->size == sizeof(uint32_t)) {
		uint32_t x = (uint32_t)v;

		assert(v <= UINT32_MAX);
		memcpy(field, &x, sizeof(x));
	} else {
		assert(r->size == sizeof(uint64_t));
		memcpy(field, &v, sizeof(v));
	}
}

/* A decimal number, nothing else. */
static int parse_num(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* What a row of kind NUM or SIZE accepts, for the message refusing
 * something else. */
static void row_expected(const struct gw_opt_row *r, char *buf, size_t len)
{
	uint64_t top = r->size == sizeof(uint32_t) ? UINT32_MAX : UINT64_MAX;
	char lo[32], hi[32];

	if (r->kind == GW_OPT_NUM) {
		if (r->max < top)
			snprintf(buf, len, "expected %llu to %llu",
				 (unsigned long long)r->min,
				 (unsigned long long)r->max);
		else if (r->min)
			snprintf(buf, len, "expected at least %llu",
				 (unsigned long long)r->min);
		else
			snprintf(buf, len, "expected a number");
		return;
	}
	gw_fmt_size(r->min, lo, sizeof(lo));
	gw_fmt_size(r->max, hi, sizeof(hi));
	if (r->flags & GW_OPTF_POW2)
		snprintf(buf, len, "expected a power of two, %s to %s", lo, hi);
	else if (r->min && r->max < top)
		snprintf(buf, len, "expected %sbytes, %s to %s",
			 r->flags & GW_OPTF_OR_ZERO ? "0 or " : "", lo, hi);
	else if (r->max < top)
		snprintf(buf, len, "expected bytes up to %s", hi);
	else
		snprintf(buf, len, "expected bytes, e.g. 16G");
}

/* An option of row r (arg as given, val after its '='). */
static int row_proc(struct parse_ctx *p, const struct gw_opt_row *r,
		    const char *arg, const char *val)
{
	char why[128];
	uint64_t v;

	switch (r->kind) {
	case GW_OPT_NUM:
	case GW_OPT_SIZE:
		if ((r->kind == GW_OPT_NUM ? parse_num(val, &v) :
					  parse_size(val, &v)) ||
		    ((v < r->min || v > r->max) &&
		     !(v == 0 && (r->flags & GW_OPTF_OR_ZERO))) ||
		    ((r->flags & GW_OPTF_POW2) && (v & (v - 1)))) {
			row_expected(r, why, sizeof(why));
			return bad_value(p, arg, why);
		}
		row_store(&p->o, r, v);
		return 0;
	case GW_OPT_STR: {
		char **field = (char **)((char *)&p->o + r->off);
		char *copy = strdup(val);

		if (!copy)
			return bad_value(p, arg, "out of memory");
		free(*field);
		*field = copy;
		return 0;
	}
	case GW_OPT_CHOICE: {
		const char *w = r->words;
		size_t n = strlen(val);

		for (v = 0; w; v++) {
			size_t wl = strcspn(w, "|");

			if (wl == n && !strncmp(w, val, n)) {
				row_store(&p->o, r, v);
				return 0;
			}
			w = w[wl] ? w + wl + 1 : NULL;
		}
		/* "expected a, b or c" */
		snprintf(why, sizeof(why), "expected ");
		gw_opt_words(r->words, ", ", " or ", why + strlen(why),
			     sizeof(why) - strlen(why));
		return bad_value(p, arg, why);
	}
	case GW_OPT_FLAG:
		row_store(&p->o, r, strcmp(arg, r->name) ? 0 : 1);
		return 0;
	default:
		return 1;
	}
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
	case GW_OPTKEY_HELP:
		gw_usage("cachegw");
		p->result = 1;
		return -1;
	case GW_OPTKEY_VERSION:
		printf("cachegw %s\n", CACHEGW_VERSION);
		p->result = 1;
		return -1;
	case GW_OPTKEY_FG:
		o->foreground = true;
		return 0;
	case GW_OPTKEY_DEBUG:
		o->debug = o->foreground = true;
		return 0;
	case GW_OPTKEY_ACTIMEO:
		if (parse_size(val, &v) || v > 86400 * 365)
			return bad_value(p, arg, "expected seconds");
		o->acregmin = o->acregmax = o->acdirmin = o->acdirmax =
			(unsigned)v;
		return 0;
	case GW_OPTKEY_METRICS:
		if (parse_metrics(val, o))
			return bad_value(p, arg, "expected [ADDR:]PORT, e.g. "
					 "9100, 127.0.0.1:9100, 0.0.0.0:9100 "
					 "or [::1]:9100");
		return 0;
	case GW_OPTKEY_IGNORE:
		return 0;
	case GW_OPTKEY_PASS:
		return 1;	/* keep it for libfuse */
	}
	if (key >= GW_OPTKEY_ROW && key < GW_OPTKEY_ROW + (int)gw_opt_rows)
		return row_proc(p, &gw_opt_table[key - GW_OPTKEY_ROW], arg,
				val);
	return 1;
}

/* o's defaults from the table, and spec: one fuse_opt per name of it
 * ("name=" for an option with a value, "name" for a word; a flag with a
 * negation has two), its templates in templ, ended by FUSE_OPT_END. */
static void spec_from_table(struct gw_opts *o, struct fuse_opt *spec,
			    char (*templ)[32])
{
	size_t n = 0;

	for (size_t i = 0; i < gw_opt_rows; i++) {
		const struct gw_opt_row *r = &gw_opt_table[i];
		bool value = r->kind != GW_OPT_FLAG &&
			     (r->kind != GW_OPT_KEY || r->arg);
		int key = r->kind == GW_OPT_KEY ? r->key :
						  GW_OPTKEY_ROW + (int)i;

		if (r->kind == GW_OPT_SECTION)
			continue;
		if (r->kind != GW_OPT_STR && r->kind != GW_OPT_KEY)
			row_store(o, r, r->def);
		snprintf(templ[n], sizeof(templ[n]), "%s%s", r->name,
			 value ? "=" : "");
		spec[n] = (struct fuse_opt)FUSE_OPT_KEY(templ[n], key);
		n++;
		if (r->kind == GW_OPT_FLAG && r->words) {
			snprintf(templ[n], sizeof(templ[n]), "%s", r->words);
			spec[n] = (struct fuse_opt)FUSE_OPT_KEY(templ[n], key);
			n++;
		}
	}
	spec[n] = (struct fuse_opt)FUSE_OPT_END;
}

int gw_opts_parse(int argc, char **argv, struct gw_opts *out)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_opt *spec = calloc(2 * gw_opt_rows + 1, sizeof(*spec));
	char (*templ)[32] = calloc(2 * gw_opt_rows, sizeof(*templ));
	struct parse_ctx pc;
	struct gw_opts *o = &pc.o;
	int ret;

	memset(&pc, 0, sizeof(pc));
	if (!spec || !templ) {
		free(spec);
		free(templ);
		fprintf(stderr, "cachegw: out of memory\n");
		*out = *o;
		return -1;
	}
	spec_from_table(o, spec, templ);
	ret = fuse_opt_parse(&args, &pc, spec, opt_proc);
	free(spec);
	free(templ);
	if (ret != 0 || pc.result) {
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
	if (o->dirty_max && !o->writeback) {
		fprintf(stderr, "cachegw: invalid option 'dirty_max': it limits "
			"the kernel's write-back cache; add -o writeback\n");
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
	free(o->fleet);
	free(o->fleet_member);
	free(o->mountpoint_real);
}
