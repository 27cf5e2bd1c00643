/* groups_test: a caller's groups come from /proc only when its kernel credentials are the request's (own thread yes; another uid or gid, pid 0, a gone pid, a kernel thread no), else from the user database for the uid (root's as getgrouplist gives them; an unknown uid none). */
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "groups.h"

static int fail;

#define CHECK(c, ...) do { if (!(c)) { printf("FAIL: " __VA_ARGS__); \
	printf("\n"); fail = 1; } } while (0)

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* A kernel thread's pid from /proc (PF_KTHREAD in stat's flags), or 0. */
static pid_t find_kthread(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	while (d && !found && (e = readdir(d))) {
		char path[300], buf[1024], *s;
		unsigned long long flags;
		FILE *f;
		int i;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f)) {
			fclose(f);
			continue;
		}
		fclose(f);
		s = strrchr(buf, ')');
		if (!s)
			continue;
		s++;
		for (i = 0; i < 6; i++) {
			while (*s == ' ')
				s++;
			while (*s && *s != ' ')
				s++;
		}
		flags = strtoull(s, NULL, 10);
		if (flags & 0x00200000u)
			found = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

int main(void)
{
	uint32_t list[16], want[16];
	gid_t own[256], g[256];
	enum gw_groups_src src;
	int n, m, i, cnt;
	pid_t pid, kt;
	struct passwd *pw;
	uid_t unknown;

	/* 1. Our own thread: the kernel's list, sorted, first 16. */
	m = getgroups(256, own);
	CHECK(m >= 0, "getgroups");
	for (i = 0; i < m && i < 16; i++)
		want[i] = own[i];
	qsort(want, (size_t)(m < 16 ? m : 16), sizeof(want[0]), cmp_u32);
	n = gw_groups_proc(gettid(), geteuid(), getegid(), list, 16);
	CHECK(n == (m < 16 ? m : 16), "own groups: %d, want %d", n, m);
	for (i = 0; i < n && n == (m < 16 ? m : 16); i++)
		CHECK(list[i] == want[i], "own group %d: %u, want %u", i,
		      list[i], want[i]);
	n = gw_groups_get(gettid(), geteuid(), getegid(), list, 16, &src);
	CHECK(src == GW_GROUPS_PROC, "own thread: source %d, want /proc", src);

	/* 2. Not the request's: another uid, another gid, pid 0, gone. */
	CHECK(gw_groups_proc(gettid(), geteuid() + 1, getegid(), list, 16) == -1,
	      "another uid: /proc trusted");
	CHECK(gw_groups_proc(gettid(), geteuid(), getegid() + 1, list, 16) == -1,
	      "another gid: /proc trusted");
	CHECK(gw_groups_proc(0, geteuid(), getegid(), list, 16) == -1,
	      "pid 0: /proc trusted");
	pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	CHECK(gw_groups_proc(pid, geteuid(), getegid(), list, 16) == -1,
	      "gone pid %d: /proc trusted", (int)pid);

	/* 3. A kernel thread (kthreadd, nfsd...) as root: its groups are
	 * its own, not a client's. */
	kt = find_kthread();
	if (kt)
		CHECK(gw_groups_proc(kt, 0, 0, list, 16) == -1,
		      "kernel thread %d: /proc trusted", (int)kt);
	else
		printf("no kernel thread visible: that check skipped\n");

	/* 4. The user database: root as getgrouplist gives it. */
	pw = getpwuid(0);
	CHECK(pw != NULL, "getpwuid(0)");
	if (pw) {
		cnt = 256;
		CHECK(getgrouplist(pw->pw_name, pw->pw_gid, g, &cnt) >= 0,
		      "getgrouplist root");
		n = gw_groups_get(0, 0, 0, list, 16, &src);
		CHECK(src == GW_GROUPS_USERDB, "pid 0 uid 0: source %d, want the user database", src);
		CHECK(n >= 1 && n <= cnt, "root: %d groups, getgrouplist %d", n, cnt);
		for (i = 0; i < n; i++) {
			int j, in = 0;

			for (j = 0; j < cnt; j++)
				in |= (uint32_t)g[j] == list[i];
			CHECK(in, "root: group %u not in getgrouplist's", list[i]);
			CHECK(i == 0 || list[i] > list[i - 1], "root: not sorted and unique");
		}
		/* Kept: the same answer again. */
		m = gw_groups_userdb(0, want, 16, &src);
		CHECK(m == n && !memcmp(want, list, (size_t)n * sizeof(list[0])) &&
		      src == GW_GROUPS_USERDB, "root again: another answer");
		/* max bounds what is copied. */
		CHECK(gw_groups_userdb(0, list, 0, &src) == 0, "max 0: groups copied");
	}

	/* 5. A uid the database does not know: none (its primary gid is the
	 * request's). */
	for (unknown = 3999999000u; getpwuid(unknown); unknown++)
		;
	n = gw_groups_get(0, unknown, 77, list, 16, &src);
	CHECK(n == 0 && src == GW_GROUPS_NONE, "unknown uid %u: %d groups, source %d",
	      (unsigned)unknown, n, src);

	if (!fail)
		printf("groups_test: ok\n");
	return fail;
}
