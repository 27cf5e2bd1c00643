/* top.c - `cachegw-inspect top`: a live gateway's rates, one line per
 * interval under a header, as iostat and nfsiostat print them. Rates are
 * differences of the gateway's counters (control socket `stats`) over the
 * time measured between the two reads. --once prints one line from two
 * reads an interval apart, for scripts.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inspect_i.h"

/* Counters sampled, by their `stats` names. */
enum {
	C_ORD, C_OWR, C_HIT, C_MISS, C_FILLB, C_FILLS, C_CULLS, C_USED,
	C_CALLS, C_CALLUS, C_LOOKUP, C_GETATTR,
	C_COUNT
};
static const char *const names[C_COUNT] = {
	"origin_read_bytes_total", "origin_write_bytes_total",
	"cache_hit_bytes_total", "cache_miss_bytes_total",
	"cache_fill_bytes_total", "cache_fills_total",
	"cache_culled_objects_total", "cache_used_bytes",
	"origin_calls_total", "origin_call_microseconds_total",
	"origin_lookup_calls_total", "origin_getattr_calls_total",
};

struct sample {
	double t;		/* CLOCK_MONOTONIC seconds */
	uint64_t v[C_COUNT];
	/* who serves (0: a gateway without takeover metrics) */
	uint64_t pid, generation, pause_us;
};

static int take(const char *dir, struct sample *s)
{
	struct timespec ts;
	char *reply;
	int ret = ctl_ask(dir, "stats", &reply), i;

	if (ret) {
		ctl_perror(dir, ret);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	for (i = 0; i < C_COUNT; i++) {
		if (!ctl_stat(reply, names[i], &s->v[i])) {
			fprintf(stderr, "%s: the gateway on %s reports no %s "
				"(an older cachegw?)\n", prog, dir, names[i]);
			free(reply);
			return -1;
		}
	}
	if (!ctl_stat(reply, "serving_pid", &s->pid) ||
	    !ctl_stat(reply, "takeover_generation", &s->generation) ||
	    !ctl_stat(reply, "takeover_pause_us", &s->pause_us))
		s->pid = s->generation = s->pause_us = 0;
	free(reply);
	return 0;
}

/* Who serves; a line when another process took over. */
static void serving(const struct sample *a, const struct sample *b)
{
	if (!b->pid)
		return;
	if (!a)
		printf("# serving: pid %llu, %llu takeovers since the mount, "
		       "the last paused clients %.1f ms\n",
		       (unsigned long long)b->pid,
		       (unsigned long long)b->generation,
		       (double)b->pause_us / 1000);
	else if (a->pid != b->pid || a->generation != b->generation)
		printf("# taken over: pid %llu -> %llu (takeover %llu), "
		       "clients paused %.1f ms; rates over this interval "
		       "count the new process only\n",
		       (unsigned long long)a->pid,
		       (unsigned long long)b->pid,
		       (unsigned long long)b->generation,
		       (double)b->pause_us / 1000);
}

static void header(void)
{
	printf("%-8s %9s %9s %9s %9s %9s %8s %8s %5s %10s %8s %8s %8s %7s\n",
	       "time", "orig_rdMB", "orig_wrMB", "hit_MB", "miss_MB",
	       "fill_MB", "fills", "culls", "hit%", "cached_MiB", "calls",
	       "lookups", "getattrs", "ms");
	printf("%-8s %9s %9s %9s %9s %9s %8s %8s %5s %10s %8s %8s %8s %7s\n",
	       "", "/s", "/s", "/s", "/s", "/s", "/s", "/s", "", "", "/s",
	       "/s", "/s", "/call");
}

static void line(const struct sample *a, const struct sample *b)
{
	double dt = b->t - a->t, r[C_COUNT];
	char when[16];
	time_t now = time(NULL);
	struct tm tm;
	int i;

	if (dt <= 0)
		dt = 1e-9;
	for (i = 0; i < C_COUNT; i++)	/* a restart makes counters drop */
		r[i] = b->v[i] >= a->v[i] ?
		       (double)(b->v[i] - a->v[i]) / dt : 0;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	printf("%-8s %9.2f %9.2f %9.2f %9.2f %9.2f %8.1f %8.1f ", when,
	       r[C_ORD] / 1e6, r[C_OWR] / 1e6, r[C_HIT] / 1e6,
	       r[C_MISS] / 1e6, r[C_FILLB] / 1e6, r[C_FILLS], r[C_CULLS]);
	if (r[C_HIT] + r[C_MISS] > 0)
		printf("%5.1f", 100 * r[C_HIT] / (r[C_HIT] + r[C_MISS]));
	else
		printf("%5s", "-");
	printf(" %10.1f %8.1f %8.1f %8.1f", (double)b->v[C_USED] / 1048576,
	       r[C_CALLS], r[C_LOOKUP], r[C_GETATTR]);
	/* Mean origin call time over the interval: time spent / calls. */
	if (r[C_CALLS] > 0)
		printf(" %7.2f\n", r[C_CALLUS] / r[C_CALLS] / 1000);
	else
		printf(" %7s\n", "-");
	fflush(stdout);
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s };

	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int usage_top(const char *msg)
{
	fprintf(stderr, "%s: %s\nusage: %s top --cache-dir DIR [--once] "
		"[--interval S]\n", prog, msg, prog);
	return EXIT_USAGE;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cache-dir", required_argument, NULL, 'd' },
		{ "once", no_argument, NULL, '1' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *dir = NULL;
	double interval = 1;
	bool once = false, tty = isatty(STDOUT_FILENO);
	struct sample a, b;
	unsigned lines = 0;
	char *end;
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+d:i:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': dir = optarg; break;
		case '1': once = true; break;
		case 'i':
			interval = strtod(optarg, &end);
			if (*end || !(interval >= 0.1 && interval <= 3600))
				return usage_top("--interval wants 0.1 to "
						 "3600 seconds");
			break;
		case 'h':
			printf("usage: %s top --cache-dir DIR [--once] "
			       "[--interval S]\n", prog);
			return 0;
		default:
			return usage_top("unexpected option");
		}
	}
	if (!dir)
		return usage_top("--cache-dir DIR is required");
	if (optind < argc)
		return usage_top("top takes no arguments");
	if (take(dir, &a))
		return 1;
	header();
	serving(NULL, &a);
	for (;;) {
		sleep_s(interval);
		if (take(dir, &b))
			return 1;
		/* Like vmstat: the header again now and then on a screen. */
		if (tty && lines && lines % 20 == 0)
			header();
		serving(&a, &b);
		line(&a, &b);
		lines++;
		if (once)
			return 0;
		a = b;
	}
}
