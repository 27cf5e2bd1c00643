/* groups.h - a FUSE request's caller: its supplementary groups, and whether
 * it is a kernel thread.
 *
 * Only libc: the unit test (tests/unit/groups_test.c) links groups.c alone.
 */
#ifndef CACHEGW_GROUPS_H
#define CACHEGW_GROUPS_H

#include <stdint.h>
#include <sys/types.h>

/* Seconds a user database answer is kept (a busy re-export would otherwise
 * ask NSS for every request). */
#define GW_GROUPS_TTL 30

enum gw_groups_src {
	GW_GROUPS_PROC,		/* the caller's own, from /proc/PID/status */
	GW_GROUPS_USERDB,	/* the user database's for uid */
	GW_GROUPS_NONE,		/* uid unknown to the database: none */
};

/* The groups of thread pid if its kernel credentials are the request's
 * (its fsuid and fsgid are uid and gid, and it is no kernel thread):
 * returns their number (at most max, the rest dropped), or -1 if they are
 * not the caller's or cannot be read (pid 0, thread gone, a kernel thread
 * such as nfsd acting for a client: its real credentials are its own). */
int gw_groups_proc(pid_t pid, uid_t uid, gid_t gid, uint32_t *list, int max);

/* Is thread pid (of the gateway's pid namespace) a kernel thread, such as
 * knfsd's nfsd threads? 1 yes, 0 no, -1 unknown (pid 0: outside the
 * namespace; gone; /proc unreadable). */
int gw_pid_kthread(pid_t pid);

/* The groups the user database gives uid (getpwuid_r + getgrouplist, as
 * rpc.mountd --manage-gids does), at most max, kept GW_GROUPS_TTL seconds;
 * 0 for a uid it does not know (*src says which). */
int gw_groups_userdb(uid_t uid, uint32_t *list, int max, enum gw_groups_src *src);

/* The caller's groups: gw_groups_proc, else gw_groups_userdb. */
int gw_groups_get(pid_t pid, uid_t uid, gid_t gid, uint32_t *list, int max,
		  enum gw_groups_src *src);

#endif
