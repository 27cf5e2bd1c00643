/* check.h - what every unit test shares: checks that end the test with
 * a message, and a temp directory removed at exit. Exit codes: 0 pass,
 * 1 fail, 77 skip. */
#ifndef CACHEGW_CHECK_H
#define CACHEGW_CHECK_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T_SKIP 77

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
			__LINE__, #cond); \
		exit(1); \
	} \
} while (0)

#define CHECK_EQ(a, b) do { \
	long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) { \
		fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", \
			__FILE__, __LINE__, #a, _a, #b, _b); \
		exit(1); \
	} \
} while (0)

static char t_dir[64];

static int t_rm_one(const char *p, const struct stat *st, int flag,
		    struct FTW *f)
{
	(void)st; (void)flag; (void)f;
	return remove(p);
}

static void t_cleanup(void)
{
	if (t_dir[0])
		nftw(t_dir, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh temp dir (removed at exit); returns dir/sub ("" for dir). */
static inline const char *t_tmpdir(void)
{
	if (!t_dir[0]) {
		strcpy(t_dir, "/tmp/cachegw-unit-XXXXXX");
		if (!mkdtemp(t_dir)) {
			perror("mkdtemp");
			exit(1);
		}
		atexit(t_cleanup);
	}
	return t_dir;
}

static inline char *t_path(const char *sub)
{
	static char buf[8][256];
	static int i;
	char *p = buf[i++ % 8];

	snprintf(p, 256, "%s/%s", t_tmpdir(), sub);
	return p;
}

#endif
