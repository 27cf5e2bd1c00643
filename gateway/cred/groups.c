/* groups.c - the supplementary groups of a FUSE request's caller.
 *
 * FUSE gives a request's fsuid, fsgid and thread id, not its groups; the
 * kernel shows a thread's groups in /proc/PID/status. Those are its real
 * credentials' groups, which are the request's only when the thread acts
 * as itself. A kernel thread acting for someone else (knfsd's nfsd threads
 * serving a re-export: they override their effective credentials with the
 * NFS client's uid, gid and groups, and FUSE sees those uid and gid, but
 * /proc still shows the thread's own root credentials with no groups), a
 * caller outside the gateway's pid namespace (pid 0) or a thread gone
 * before we look carry groups we cannot read. For those the groups are the
 * user database's for the uid, as rpc.mountd --manage-gids gives knfsd.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "groups.h"

#define PF_KTHREAD_FLAG 0x00200000u	/* include/linux/sched.h */
#define KEEP 32				/* groups kept per user */
#define SLOTS 256			/* users kept (direct-mapped) */

/* Reads /proc/PID/NAME into buf (NUL-terminated); its length or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size - 1);
	close(fd);
	if (len < 0)
		return -1;
	buf[len] = '\0';
	return len;
}

/* The value after "\nKEY:" as a pointer to its first field, or NULL if the
 * line is missing or cut by the buffer's end. */
static const char *status_line(const char *buf, const char *key)
{
	char pat[32];
	const char *s;

	snprintf(pat, sizeof(pat), "\n%s:", key);
	s = strstr(buf, pat);
	if (!s || !strchr(s + 1, '\n'))
		return NULL;
	return s + strlen(pat);
}

/* The n-th (from 0) number of a status line; false if it is not there. */
static bool status_field(const char *s, int n, unsigned long *out)
{
	char *end;

	for (int i = 0; i <= n; i++) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s < '0' || *s > '9')
			return false;
		errno = 0;
		*out = strtoul(s, &end, 10);
		if (errno || *out > UINT32_MAX)
			return false;
		s = end;
	}
	return true;
}

/* Is pid a kernel thread? From /proc/PID/stat's flags (field 9), for
 * kernels whose status has no Kthread: line (6.1 has none). */
int gw_pid_kthread(pid_t pid)
{
	char buf[1024], *s, *end;
	unsigned long long flags;

	if (pid <= 0 || read_proc(pid, "stat", buf, sizeof(buf)) < 0)
		return -1;
	/* The name in parentheses may hold anything: fields start after the
	 * last ')'. Then state, ppid, pgrp, session, tty_nr, tpgid, flags. */
	s = strrchr(buf, ')');
	if (!s)
		return -1;
	s++;
	for (int i = 0; i < 6; i++) {
		while (*s == ' ')
			s++;
		while (*s && *s != ' ')
			s++;
	}
	errno = 0;
	flags = strtoull(s, &end, 10);
	if (end == s || errno)
		return -1;
	return (flags & PF_KTHREAD_FLAG) != 0;
}

int gw_groups_proc(pid_t pid, uid_t uid, gid_t gid, uint32_t *list, int max)
{
	char buf[16384];
	const char *s;
	unsigned long v;
	char *end;
	int n = 0;

	if (pid <= 0 || read_proc(pid, "status", buf, sizeof(buf)) < 0)
		return -1;
	/* Uid: and Gid: are real, effective, saved, fs: the fs ones are
	 * what FUSE sends. Another's (an nfsd thread's root, a reused pid's
	 * owner) means the Groups: line is not the request's either. */
	if (!(s = status_line(buf, "Uid")) || !status_field(s, 3, &v) || v != uid)
		return -1;
	if (!(s = status_line(buf, "Gid")) || !status_field(s, 3, &v) || v != gid)
		return -1;
	/* A kernel thread's real credentials are its own even when it acts
	 * as a root client (nfsd with no_root_squash). */
	if ((s = status_line(buf, "Kthread"))) {
		if (!status_field(s, 0, &v) || v != 0)
			return -1;
	} else if (gw_pid_kthread(pid) != 0) {
		return -1;
	}
	s = strstr(buf, "\nGroups:");
	if (!s)
		return -1;
	s += strlen("\nGroups:");
	while (n < max) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\n')
			break;
		/* A number cut by the buffer's end is not trusted. */
		errno = 0;
		v = strtoul(s, &end, 10);
		if (end == s || errno || v > UINT32_MAX || *end == '\0')
			return -1;
		list[n++] = (uint32_t)v;
		s = end;
	}
	return n;
}

struct slot {
	bool used;
	bool known;
	uid_t uid;
	time_t at;
	int n;
	uint32_t groups[KEEP];
};

static pthread_mutex_t db_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot db[SLOTS];		/* db_lock */

static time_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Asks NSS; fills sl (known false for an unknown uid or an error). */
static void db_lookup(uid_t uid, struct slot *sl)
{
	struct passwd pw, *res = NULL;
	size_t blen = 1024;
	char *buf = NULL, *nb;
	gid_t *g = NULL, *ng;
	int cap = 64, cnt, r, i, out;

	memset(sl, 0, sizeof(*sl));
	sl->used = true;
	sl->uid = uid;
	for (;;) {
		nb = realloc(buf, blen);
		if (!nb)
			goto out;
		buf = nb;
		r = getpwuid_r(uid, &pw, buf, blen, &res);
		if (r != ERANGE || blen >= (1u << 20))
			break;
		blen *= 2;
	}
	if (r || !res)
		goto out;
	for (;;) {
		ng = realloc(g, (size_t)cap * sizeof(*g));
		if (!ng)
			goto out;
		g = ng;
		cnt = cap;
		if (getgrouplist(pw.pw_name, pw.pw_gid, g, &cnt) >= 0)
			break;
		/* Too small: cnt is the number needed. */
		if (cnt <= cap || cnt > 65536)
			goto out;
		cap = cnt;
	}
	/* Sorted and unique, as the kernel keeps a process's groups (and
	 * shows them in /proc): past AUTH_SYS's 16 the same ones are
	 * dropped as for a local process of that user. */
	qsort(g, (size_t)cnt, sizeof(*g), cmp_u32);
	for (i = 0, out = 0; i < cnt && out < KEEP; i++)
		if (out == 0 || g[i] != (gid_t)sl->groups[out - 1])
			sl->groups[out++] = (uint32_t)g[i];
	sl->n = out;
	sl->known = true;
out:
	sl->at = now_s();
	free(buf);
	free(g);
}

int gw_groups_userdb(uid_t uid, uint32_t *list, int max, enum gw_groups_src *src)
{
	struct slot *sl = &db[(uid * 2654435761u) % SLOTS], got;
	time_t now = now_s();
	bool hit;

	pthread_mutex_lock(&db_lock);
	hit = sl->used && sl->uid == uid && now - sl->at < GW_GROUPS_TTL &&
	      now >= sl->at;
	if (hit)
		got = *sl;
	pthread_mutex_unlock(&db_lock);
	if (!hit) {
		/* NSS may be slow (LDAP): asked with no lock held; two
		 * threads may ask at once, the last answer is kept. */
		db_lookup(uid, &got);
		pthread_mutex_lock(&db_lock);
		*sl = got;
		pthread_mutex_unlock(&db_lock);
	}
	if (max > got.n)
		max = got.n;
	for (int i = 0; i < max; i++)
		list[i] = got.groups[i];
	if (src)
		*src = got.known ? GW_GROUPS_USERDB : GW_GROUPS_NONE;
	return max > 0 ? max : 0;
}

int gw_groups_get(pid_t pid, uid_t uid, gid_t gid, uint32_t *list, int max,
		  enum gw_groups_src *src)
{
	int n = gw_groups_proc(pid, uid, gid, list, max);

	if (n >= 0) {
		if (src)
			*src = GW_GROUPS_PROC;
		return n;
	}
	return gw_groups_userdb(uid, list, max, src);
}
