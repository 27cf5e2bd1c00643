/* opts_table.c - every option the gateway accepts, one row each: its name,
 * kind, field of struct gw_opts, default, range and --help line; and
 * --help printed from it. opts.c parses the command line against it;
 * test 51 (tests/lib/optcheck.py) holds its names, and the defaults
 * --help prints, against cachegw(8). nfsclient/ and cache/ get their
 * values through their opts structs; the numbers of their own defaults
 * (NFSC_*_DEFAULT, CACHE_*_DEFAULT) are the ones the rows use.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "daemon.h"
#include "nfsc.h"

/* Rows are written with these (test 51 reads them by name and kind):
 *   NUM(name, field, default, min, max, ARG, help): a decimal number
 *   SIZE(name, field, default, min, max, GW_OPTF_*, help): bytes
 *   NUMW, SIZEW: the same with the default in words (before help)
 *   STR(name, field, ARG, default in words, help)
 *   CHOICE(name, field, default's index, "a|b|c", help)
 *   FLAG(name, field, default, negation or NULL, help)
 *   FLAGW: the same with the default in words (before help)
 *   KEY(name, GW_OPTKEY_*, ARG, default in words, help): opts.c's own
 *   WORD(name, GW_OPTKEY_*): a word with no value and no help line */
#define F(f) offsetof(struct gw_opts, f), sizeof(((struct gw_opts *)0)->f)
#define SECTION(title) { .name = title, .kind = GW_OPT_SECTION }
#define NUM(n, f, d, lo, hi, a, h) \
	{ n, GW_OPT_NUM, F(f), d, lo, hi, 0, NULL, 0, a, NULL, h }
#define NUMW(n, f, d, lo, hi, a, w, h) \
	{ n, GW_OPT_NUM, F(f), d, lo, hi, 0, NULL, 0, a, w, h }
#define SIZE(n, f, d, lo, hi, fl, h) \
	{ n, GW_OPT_SIZE, F(f), d, lo, hi, fl, NULL, 0, "BYTES", NULL, h }
#define SIZEW(n, f, d, lo, hi, fl, w, h) \
	{ n, GW_OPT_SIZE, F(f), d, lo, hi, fl, NULL, 0, "BYTES", w, h }
#define STR(n, f, a, w, h) \
	{ n, GW_OPT_STR, F(f), 0, 0, 0, 0, NULL, 0, a, w, h }
#define CHOICE(n, f, d, words, h) \
	{ n, GW_OPT_CHOICE, F(f), d, 0, 0, 0, words, 0, "MODE", NULL, h }
#define FLAG(n, f, d, neg, h) \
	{ n, GW_OPT_FLAG, F(f), d, 0, 1, 0, neg, 0, NULL, NULL, h }
#define FLAGW(n, f, d, neg, w, h) \
	{ n, GW_OPT_FLAG, F(f), d, 0, 1, 0, neg, 0, NULL, w, h }
#define KEY(n, k, a, w, h) \
	{ n, GW_OPT_KEY, 0, 0, 0, 0, 0, 0, NULL, k, a, w, h }
#define WORD(n, k) \
	{ n, GW_OPT_KEY, 0, 0, 0, 0, 0, 0, NULL, k, NULL, NULL, NULL }

_Static_assert(CACHE_WRITE_DIRECT == 0 && CACHE_WRITE_DONTCACHE == 1 &&
	       CACHE_WRITE_BUFFERED == 2 && CACHE_WRITE_FADVISE == 3,
	       "cache_write's words are in the order of cache_write_mode");

const struct gw_opt_row gw_opt_table[] = {
	SECTION("Cache"),
	STR("cache_dir", cache_dir, "DIR", NULL,
	    "the cache directory (required)"),
	SIZEW("cache_size", cache_size, 0, 0, UINT64_MAX, 0, "no cap",
	      "hard cap on the bytes the cache allocates"),
	SIZE("cache_block", cache_block, CACHE_BLOCK_DEFAULT, CACHE_BLOCK_MIN,
	     CACHE_BLOCK_MAX, GW_OPTF_POW2,
	     "block size of a new cache, a power of two"),
	CHOICE("cache_write", cache_write, CACHE_WRITE_DIRECT,
	       "direct|dontcache|buffered|fadvise",
	       "how fills are written to the cache"),
	CHOICE("cache_writes", cache_writes_around, 0, "through|around",
	       "data written through the mount: cached too, or its cached "
	       "blocks dropped"),
	CHOICE("fill_behind", fill_skip, 0, "wait|skip",
	       "a cache disk slower than the origin: readers wait for it, or "
	       "what it cannot take is not cached"),
	NUM("brun", brun, CACHE_BRUN_DEFAULT, 0, 100, "%",
	    "free space on the cache fs that culling brings back"),
	NUM("bcull", bcull, CACHE_BCULL_DEFAULT, 0, 100, "%",
	    "free space below which culling starts"),
	NUM("bstop", bstop, CACHE_BSTOP_DEFAULT, 0, 100, "%",
	    "free space below which nothing more is cached"),

	SECTION("Origin"),
	NUM("nconnect", nconnect, NFSC_NCONNECT_DEFAULT, 1, NFSC_NCONNECT_MAX,
	    "N", "TCP connections to the origin"),
	NUMW("rsize", rsize, 0, 0, UINT32_MAX, "BYTES", "the server's maximum",
	     "cap on the size of one READ"),
	NUMW("wsize", wsize, 0, 0, UINT32_MAX, "BYTES", "the server's maximum",
	     "cap on the size of one WRITE"),
	FLAG("soft", soft, 0, "hard",
	     "fail a call after retrans retries, or retry forever"),
	NUM("timeo", timeo, NFSC_TIMEO_DEFAULT, 0, UINT32_MAX, "DS",
	    "deciseconds before a retry"),
	NUM("retrans", retrans, NFSC_RETRANS_DEFAULT, 0, UINT32_MAX, "N",
	    "retries of a call on a soft mount"),
	KEY("actimeo", GW_OPTKEY_ACTIMEO, "S", NULL,
	    "sets acregmin, acregmax, acdirmin and acdirmax"),
	NUM("acregmin", acregmin, 3, 0, UINT32_MAX, "S",
	    "seconds a file's attributes are cached, at least"),
	NUM("acregmax", acregmax, 60, 0, UINT32_MAX, "S",
	    "seconds a file's attributes are cached, at most"),
	NUM("acdirmin", acdirmin, 30, 0, UINT32_MAX, "S",
	    "seconds a directory's attributes are cached, at least"),
	NUM("acdirmax", acdirmax, 60, 0, UINT32_MAX, "S",
	    "seconds a directory's attributes are cached, at most"),
	FLAG("nocto", nocto, 0, "cto",
	     "no attribute check on open, or one"),
	CHOICE("lookupcache", lookupcache, 1, "all|positive|pos|none",
	       "all answers a LOOKUP of a name not in a directory whose "
	       "every name the gateway knows (it made it, every change since "
	       "its own) without the origin, while the directory's "
	       "attributes are cached (a name another client made there "
	       "meanwhile is missing until then, also if never looked up); "
	       "positive (the default), pos or none always ask"),
	CHOICE("local_lock", local_lock, 0, "none|all|flock|posix",
	       "locks kept in this host's kernel (as nfs(5)): none (fcntl and "
	       "flock locks taken at the origin), all, flock or posix"),
	NUM("offline", offline, 0, 0, 86400, "S",
	    "origin silent S seconds: serve what the cache holds, fail what "
	    "it does not (EHOSTDOWN); start without the origin from a warm "
	    "cache (0: off)"),
	/* Neither word given: -1 in the field (an int), and gw_opts_parse
	 * decides by -f. */
	FLAGW("supervise", supervise, UINT32_MAX, "nosupervise",
	      "supervise; nosupervise with -f",
	      "a supervising process keeps the FUSE connection and starts a "
	      "successor when the serving one dies (needs Linux >= 6.9), or "
	      "none"),

	SECTION("Reads and writes"),
	SIZE("readahead", readahead, 8u << 20, 0, 1ull << 30, 0,
	     "largest readahead window"),
	SIZE("write_window", write_window, 64u << 20, 4096, 1ull << 34, 0,
	     "bytes of WRITE in flight per mount"),
	SIZE("dirty_max", dirty_max, 0, 1u << 20, 1ull << 40, GW_OPTF_OR_ZERO,
	     "writeback: the mount's dirty pages (0: the global limits)"),
	FLAG("writeback", writeback, 0, "nowriteback",
	     "kernel write-back cache (writes land in the page cache, reach "
	     "the origin at flush, fsync or close), or write through"),
	NUM("max_threads", max_threads, 16, 1, 1024, "N",
	    "FUSE worker threads"),
	NUM("dir_max_entries", dir_max_entries, 2097152, 1, UINT32_MAX, "N",
	    "entries in one directory listing; a larger directory fails to "
	    "open with EFBIG"),
	NUM("walk_ahead", walk_ahead, 8, 0, 64, "N",
	    "a walk that opens the subdirectories of a directory in the "
	    "order of its listing has the next N listed ahead of it (0: "
	    "off)"),
	NUM("reclaim_after", reclaim_after, 100000, 0, UINT64_MAX, "N",
	    "after N new node-ids (and the table's size at the last pass), "
	    "drop those of files gone at the origin (0: only on "
	    "cachegw-inspect reclaim)"),

	SECTION("Mount"),
	FLAG("allow_other", allow_other, 0, NULL,
	     "let other users use the mount"),
	FLAG("ro", ro, 0, NULL, "read-only mount"),
	WORD("rw", GW_OPTKEY_IGNORE),
	/* Passed to the kernel/libfuse as they are. */
	WORD("default_permissions", GW_OPTKEY_IGNORE),
	WORD("nosuid", GW_OPTKEY_PASS),
	WORD("suid", GW_OPTKEY_PASS),
	WORD("nodev", GW_OPTKEY_PASS),
	WORD("dev", GW_OPTKEY_PASS),
	WORD("noexec", GW_OPTKEY_PASS),
	WORD("exec", GW_OPTKEY_PASS),
	WORD("noatime", GW_OPTKEY_PASS),
	WORD("atime", GW_OPTKEY_PASS),
	WORD("relatime", GW_OPTKEY_PASS),
	WORD("sync", GW_OPTKEY_PASS),
	WORD("async", GW_OPTKEY_PASS),
	WORD("dirsync", GW_OPTKEY_PASS),
	/* fstab words mount.fuse3 may leave in. */
	WORD("defaults", GW_OPTKEY_IGNORE),
	WORD("_netdev", GW_OPTKEY_IGNORE),
	WORD("nofail", GW_OPTKEY_IGNORE),
	WORD("auto", GW_OPTKEY_IGNORE),
	WORD("noauto", GW_OPTKEY_IGNORE),

	SECTION("Fleet"),
	STR("fleet", fleet, "CONNINFO", "none",
	    "share node-ids with the other gateways of this export through "
	    "this PostgreSQL store (libpq connection string or URI)"),
	STR("fleet_member", fleet_member, "NAME", "the host name",
	    "this gateway's name in the fleet store"),

	SECTION("Logs and metrics"),
	STR("logfile", logfile, "PATH", "syslog; stderr with -f",
	    "log here (SIGHUP reopens it)"),
	STR("pidfile", pidfile, "PATH", "none",
	    "the main process's pid (the supervisor's with supervise), "
	    "rewritten by a takeover"),
	NUM("drain_timeout", drain_timeout, 30, 1, 86400, "S",
	    "after SIGTERM: seconds for open files, then for the last "
	    "commits; seconds for a handover's commits"),
	KEY("metrics", GW_OPTKEY_METRICS, "[ADDR:]PORT", "off",
	    "serve Prometheus metrics on http://ADDR:PORT/metrics (ADDR "
	    "127.0.0.1 unless given: 0.0.0.0, [::])"),

	/* The command line (printed by gw_usage's head). */
	WORD("debug", GW_OPTKEY_DEBUG),
	WORD("-h", GW_OPTKEY_HELP),
	WORD("--help", GW_OPTKEY_HELP),
	WORD("-V", GW_OPTKEY_VERSION),
	WORD("--version", GW_OPTKEY_VERSION),
	WORD("-f", GW_OPTKEY_FG),
	WORD("-d", GW_OPTKEY_DEBUG),
};

const size_t gw_opt_rows = sizeof(gw_opt_table) / sizeof(gw_opt_table[0]);

void gw_fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char unit[] = "KMGT";
	int u = -1;

	while (u < 3 && v && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, unit[u]);
}

/* The default of row r as --help prints it; "" if it has none. */
static void fmt_default(const struct gw_opt_row *r, char *buf, size_t len)
{
	*buf = 0;
	if (r->defword) {
		snprintf(buf, len, "%s", r->defword);
		return;
	}
	switch (r->kind) {
	case GW_OPT_NUM:
		snprintf(buf, len, "%llu", (unsigned long long)r->def);
		break;
	case GW_OPT_SIZE:
		gw_fmt_size(r->def, buf, len);
		break;
	case GW_OPT_CHOICE: {
		const char *w = r->words;

		for (uint64_t i = 0; i < r->def && w; i++) {
			w = strchr(w, '|');
			w = w ? w + 1 : NULL;
		}
		if (w)
			snprintf(buf, len, "%.*s", (int)strcspn(w, "|"), w);
		break;
	}
	case GW_OPT_FLAG:
		if (r->words)
			snprintf(buf, len, "%s", r->def ? r->name : r->words);
		break;
	default:
		break;
	}
}

/* Print text from column col on, wrapped at 79 columns with later lines
 * indented to indent; a "[...]" is never cut. */
static void print_wrapped(const char *text, int col, int indent)
{
	while (*text) {
		const char *close = *text == '[' ? strchr(text, ']') : NULL;
		size_t w = close ? (size_t)(close - text) +
				   strcspn(close, " ") : strcspn(text, " ");

		if (col > indent && col + 1 + (int)w > 79) {
			printf("\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			putchar(' ');
			col++;
		}
		printf("%.*s", (int)w, text);
		col += (int)w;
		text += w;
		text += strspn(text, " ");
	}
	putchar('\n');
}

void gw_opt_words(const char *words, const char *sep, const char *last,
		  char *buf, size_t len)
{
	size_t k = 0;

	*buf = 0;
	for (const char *w = words; w && k < len;) {
		size_t wl = strcspn(w, "|");
		const char *next = w[wl] ? w + wl + 1 : NULL;

		k += (size_t)snprintf(buf + k, len - k, "%s%.*s",
				      w == words ? "" : next ? sep : last,
				      (int)wl, w);
		w = next;
	}
}

/* Row r's entry of --help: its tag ("name=ARG", "flag | negation") and
 * its text (the help line, a choice's words, the default). */
static void row_entry(const struct gw_opt_row *r, char *tag, size_t tlen,
		      char *text, size_t len)
{
	char def[64];
	size_t n;

	if (r->kind == GW_OPT_FLAG)
		snprintf(tag, tlen, "%s%s%s", r->name, r->words ? " | " : "",
			 r->words ? r->words : "");
	else
		snprintf(tag, tlen, "%s=%s", r->name, r->arg);
	n = (size_t)snprintf(text, len, "%s%s", r->help,
			     r->kind == GW_OPT_CHOICE ? ": " : "");
	if (r->kind == GW_OPT_CHOICE && n < len)
		gw_opt_words(r->words, " | ", " | ", text + n, len - n);
	fmt_default(r, def, sizeof(def));
	n = strlen(text);
	if (*def)
		snprintf(text + n, len - n, " [%s]", def);
}

void gw_usage(const char *prog)
{
	printf(
"usage: %s nfs://SERVER/EXPORT[?nfsport=N&mountport=N] MOUNTPOINT [-f] [-o OPTIONS]\n"
"\n"
"Mounts an NFS export through FUSE with a persistent, checksummed cache.\n"
"\n"
"  -f                       stay in the foreground (log to stderr)\n"
"  -d, -o debug             FUSE debug output (implies -f)\n"
"  -h, --help               this help;  -V, --version  the version\n"
"\n"
"Options (-o, comma separated; defaults in brackets; all in cachegw(8)):\n",
	       prog);
	for (size_t i = 0; i < gw_opt_rows; i++) {
		const struct gw_opt_row *r = &gw_opt_table[i];
		char tag[64], text[512];

		if (r->kind == GW_OPT_SECTION) {
			printf("\n%s:\n", r->name);
			continue;
		}
		if (!r->help)
			continue;
		row_entry(r, tag, sizeof(tag), text, sizeof(text));
		/* The text from column 27, under a tag too long for that. */
		if (strlen(tag) > 23)
			printf("  %s\n%27s", tag, "");
		else
			printf("  %-25s", tag);
		print_wrapped(text, 27, 27);
	}
}
