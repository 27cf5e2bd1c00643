/* bench_nodes: build a node-id table of N entries (32-byte handles), then
 * time reopening it: load seconds, peak RSS, bytes per entry, adds/s.
 *
 * usage: bench_nodes [-n ENTRIES] [-d DIR] [-k]   (-k keeps DIR)
 *        bench_nodes -L -d DIR [-n ENTRIES]       (load an existing table)
 *
 * The load is timed in a freshly exec'd process (-L), so that its peak RSS
 * is the load's alone, not the build's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nodes.h"

#define HLEN 32

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_kib(const char *field)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = strtol(line + strlen(field), NULL, 10);
	fclose(f);
	return v;
}

static void mk_handle(uint64_t i, uint8_t *h)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull + 0x1234;

	for (int k = 0; k < HLEN; k += 8) {
		x ^= x >> 31;
		x *= 0xBF58476D1CE4E5B9ull;
		memcpy(h + k, &x, 8);
	}
	memcpy(h, &i, 8);	/* unique */
}

static int rm_table(const char *dir)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, NODES_FILE);
	if (unlink(p) && errno != ENOENT)
		return -errno;
	return rmdir(dir) ? -errno : 0;
}

static int load_main(const char *dir, uint64_t n)
{
	struct nodes *t;
	struct nodes_stats st;
	struct rusage ru;
	char err[256] = "";
	uint8_t h[HLEN];
	double t0, load_s, find_s;
	long rss_before;
	char path[4096];
	uint64_t id;
	int fd, ret;

	/* 1. Load, as a restarted gateway would, from a cold page cache
	 * (this file's pages only: the machine is shared). */
	snprintf(path, sizeof(path), "%s/%s", dir, NODES_FILE);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	rss_before = rss_kib("VmRSS:");
	t0 = now();
	ret = nodes_open(dir, false, &t, err, sizeof(err));
	load_s = now() - t0;
	if (ret) {
		fprintf(stderr, "reopen: %s\n", err);
		return 1;
	}
	nodes_stats(t, &st);

	/* 2. Lookups by handle. */
	t0 = now();
	for (uint64_t i = 0; i < n; i++) {
		mk_handle(i, h);
		if (nodes_find(t, h, HLEN, &id, NULL)) {
			fprintf(stderr, "entry %llu lost\n",
				(unsigned long long)i);
			return 1;
		}
	}
	find_s = now() - t0;
	getrusage(RUSAGE_SELF, &ru);

	printf("%-28s %14llu\n", "entries", (unsigned long long)st.entries);
	printf("%-28s %14d\n", "handle bytes", HLEN);
	printf("%-28s %14.3f\n", "load (open) s", load_s);
	printf("%-28s %14.0f\n", "finds/s", n / find_s);
	printf("%-28s %14llu\n", "file bytes",
	       (unsigned long long)st.file_bytes);
	printf("%-28s %14.1f\n", "bytes/entry on disk",
	       st.entries ? (double)st.file_bytes / st.entries : 0);
	printf("%-28s %14.1f\n", "RSS after load MiB",
	       rss_kib("VmRSS:") / 1024.0);
	printf("%-28s %14.1f\n", "RSS added by load MiB",
	       (rss_kib("VmRSS:") - rss_before) / 1024.0);
	printf("%-28s %14.1f\n", "peak RSS (ru_maxrss) MiB",
	       ru.ru_maxrss / 1024.0);
	nodes_close(t);
	return 0;
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/bench-nodes-XXXXXX", err[256] = "";
	const char *dir = NULL;
	uint64_t n = 1000000, id;
	struct nodes *t;
	uint8_t h[HLEN];
	double t0, add_s;
	char nbuf[32];
	int opt, ret, status, keep = 0, load_only = 0;
	pid_t pid;

	while ((opt = getopt(argc, argv, "n:d:kL")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			dir = optarg;
			break;
		case 'k':
			keep = 1;
			break;
		case 'L':
			load_only = 1;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n ENTRIES] [-d DIR] [-k]\n",
				argv[0]);
			return 2;
		}
	}
	if (load_only) {
		if (!dir) {
			fprintf(stderr, "-L needs -d DIR\n");
			return 2;
		}
		return load_main(dir, n);
	}
	if (!dir) {
		dir = mkdtemp(tmpl);
		if (!dir) {
			perror("mkdtemp");
			return 1;
		}
	}

	/* 1. Build. */
	ret = nodes_open(dir, false, &t, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "open: %s\n", err);
		return 1;
	}
	t0 = now();
	for (uint64_t i = 0; i < n; i++) {
		mk_handle(i, h);
		ret = nodes_add(t, h, HLEN, 1, &id, NULL);
		if (ret < 0) {
			fprintf(stderr, "add: %s\n", strerror(-ret));
			return 1;
		}
	}
	add_s = now() - t0;
	nodes_close(t);

	/* 2. Load, as a restarted gateway would, in a new process. */
	ret = 0;
	printf("%-28s %14.0f\n", "adds/s", n / add_s);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (!pid) {
		snprintf(nbuf, sizeof(nbuf), "%llu", (unsigned long long)n);
		execl("/proc/self/exe", argv[0], "-L", "-d", dir, "-n", nbuf,
		      (char *)NULL);
		perror("exec");
		_exit(1);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		ret = 1;
	if (!keep && rm_table(dir))
		fprintf(stderr, "warning: could not remove %s\n", dir);
	return ret;
}
