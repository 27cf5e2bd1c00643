/* takeover_i.h - one FUSE connection, served by one process after another
 * (doc/takeover.md; the state they share: gateway/gw_state.h): the
 * takeover's room of daemon/, one section per file. Its callers: the
 * command line (main.c), the serving process's start and exit
 * (serve.c), the supervisor (supervise.c), the control socket (ctl.c).
 *
 * takeover_state.c:    the state memfd: made, mapped, closed.
 * takeover_fds.c:      a message and descriptors over a unix socket.
 * takeover_init.c:     the connection's INIT kept or replayed, the resend,
 *                      the successor's start counted.
 * takeover_ctl.c:      the old process asked ("takeover ..."): refused, or
 *                      its session stopped for the handover.
 * takeover_handover.c: the old process hands the connection over, with
 *                      its commits or (late) without.
 * takeover_probe.c:    the new process finds the live gateway, checks the
 *                      origin and asks.
 *
 * Upgrade in place: `cachegw SOURCE MOUNTPOINT -o cache_dir=DIR,...` finds
 * DIR's control socket answering, makes sure it can reach the origin
 * (takeover_probe.c: else it refuses, and the old process serves on) and asks
 * `takeover VERSION FORMAT MNT`. The serving process refuses with one line
 * (another state version or cache format, another mount point, a kernel
 * without FUSE_NOTIFY_RESEND, a stop under way) and serves on (a process
 * of GW_STATE_VERSION_PREV refusing our version is asked again for its
 * own, its state converted once handed over: gw_state_upgrade), or answers
 * "ok PID", stops taking requests (fuse_session_exit: what a worker reads
 * from then on stays unanswered in the kernel), lets the requests it holds
 * finish, commits every writer's data, closes the cache, and sends the
 * /dev/fuse descriptor and the state memfd over the same connection
 * (SCM_RIGHTS); then it exits 0. Commits that do not finish within
 * drain_timeout=: the connection goes without them, and the successor
 * commits as after a crash (gw_takeover_abandon). The successor replays
 * the connection's FUSE_INIT into a new session (fuse_session_process_buf;
 * its reply goes to the kernel under a unique the kernel never gave out
 * and is dropped there, ENOENT, which libfuse ignores), adopts the open
 * files and directories under the ids the kernel holds
 * (gateway/handover/adopt.c), asks the kernel to queue again what the old
 * process read but never answered (FUSE_NOTIFY_RESEND, Linux >= 6.9), and
 * serves.
 *
 * Crash: the supervisor (supervise.c) holds a copy of both descriptors and
 * starts a successor the same way; what the dead process acknowledged but
 * had not committed is COMMITted by the successor while it serves
 * (write_commit.c: owed), and a verifier other than the one the writers'
 * records name for it is reported to them. A successor that cannot reach
 * the origin starts without it (serve.c, nfsclient's started_lost).
 */
#ifndef CACHEGW_TAKEOVER_I_H
#define CACHEGW_TAKEOVER_I_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "daemon.h"

/* ---- takeover_state.c ---- */
int gw_state_create(void);		/* the first process: a new memfd */
int gw_state_open(int fd, char *err, size_t len);	/* a successor */
/* The state of a process of GW_STATE_VERSION_PREV, handed over: made this
 * version's (grown by the lock records, none), before anything maps it. */
int gw_state_upgrade(int fd, char *err, size_t len);
int gw_state_fd(void);
void gw_state_close(void);

/* ---- takeover_fds.c ---- */
int gw_send_fds(int sock, const char *msg, const int *fds, int n);
/* One message and up to *n descriptors (*n: how many came). */
ssize_t gw_recv_fds(int sock, char *msg, size_t len, int *fds, int *n);

/* ---- takeover_init.c ---- */
bool gw_kernel_has_resend(void);	/* Linux >= 6.9 */
/* Before the loop: the first process reads, keeps and serves the INIT;
 * a successor replays the kept one. */
int gw_takeover_init(struct gw_proc *pr, bool successor);
/* FUSE_NOTIFY_RESEND: 0, or -errno (EINVAL: a kernel without it). */
int gw_takeover_resend(struct gw_proc *pr);
void gw_takeover_serving(struct gw_proc *pr, bool successor);

/* ---- takeover_ctl.c ---- */
/* ctl "takeover VERSION FORMAT MNT" (the old process). */
void gw_ctl_takeover(struct gw_proc *pr, int fd, const char *args, FILE *out);

/* ---- takeover_handover.c ---- */
/* The loop ended for a takeover: commit, put libfuse's descriptor aside
 * (the successor's was kept when it asked). */
void gw_takeover_handover_begin(struct gw_proc *pr);
/* Everything closed: send the descriptors. */
int gw_takeover_handover_end(struct gw_proc *pr);
/* The drain thread, the commits of a handover not done in drain_timeout=:
 * send the descriptors now, the state saying the writers' data is not
 * committed (the successor commits it as after a crash; it waits for this
 * process to end: "fds wait"), and _exit. Returns only if the main thread
 * has got past the commits meanwhile (it hands over itself). */
void gw_takeover_abandon(struct gw_proc *pr);

/* ---- takeover_probe.c ---- */
/* The new process: a live gateway's control socket for cache_dir (fd), or
 * -errno (none answers). */
int gw_takeover_probe(const char *cache_dir);
/* A live gateway serves o->cache_dir (its control socket answered): the
 * origin reached (connected and mounted, *origin: the new process's from
 * now on), ask it to hand its connection over. 0 with fds (or fds[0] -1:
 * it went away meanwhile, start afresh), or the exit status (a line on
 * stderr; *origin NULL). */
int gw_takeover_ask(struct gw_opts *o, int fds[2], struct nfsc **origin);

#endif
