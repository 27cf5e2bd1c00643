/* caller.c - the caller of a FUSE request: its credentials, as the origin
 * is sent them (uid, gid and the supplementary groups: groups.c), the
 * errno its request answers when interrupted, and the request a thread
 * serves.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cred_i.h"
#include "groups.h"

void gw_req_cred(fuse_req_t req, struct nfsc_cred *cr)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	static bool told;
	enum gw_groups_src src;
	int n;

	memset(cr, 0, sizeof(*cr));
	cr->uid = ctx->uid;
	cr->gid = ctx->gid;
	/* The caller's own groups from /proc/PID/status (not
	 * fuse_req_getgroups(): libfuse 3.14's strstr()s a buffer it never
	 * NUL-terminates); for a caller whose groups the kernel does not
	 * show (an nfsd thread serving a re-export, pid 0) the user
	 * database's for the uid (groups.c). AUTH_SYS carries 16; the rest
	 * are dropped, as by the Linux NFS client. */
	n = gw_groups_get(ctx->pid, ctx->uid, ctx->gid, cr->groups,
			  NFSC_NGROUPS_MAX, &src);
	cr->ngroups = (uint32_t)n;
	if (src != GW_GROUPS_PROC &&
	    !__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
		gw_log("credentials: a caller whose groups the kernel does not "
		       "show (pid %d, uid %u: a kernel thread such as nfsd, or "
		       "outside the gateway's pid namespace): its groups are the "
		       "user database's for its uid, kept %d s (said once)",
		       (int)ctx->pid, (unsigned)ctx->uid, GW_GROUPS_TTL);
}

/* ---- what an interrupted request answers (gw_i.h) ---- */
/* A process: EINTR, as any system call a signal interrupts. A kernel
 * thread: knfsd stopping its nfsd threads (rpc.nfsd 0; kthread_stop makes
 * a signal pending) interrupts the request each is serving, and each
 * still replies to its NFS client. With EINTR, which knfsd does not know,
 * that reply is NFS3ERR_IO (the kernel warns once: "nfsd: non-standard
 * errno: -4") and the client's application gets EIO, when the server
 * that takes the address over would have answered (a fleet's move,
 * doc/fleet.md; guest test 95 saw it in 3 runs of 4). ETIMEDOUT is
 * knfsd's "try again" (NFS3ERR_JUKEBOX, NFS4ERR_DELAY; a file handle's
 * decoding passes it on too, where other errors become ESTALE): the
 * client sends the call again, to whichever server has the address then.
 * pid 0, a caller outside the gateway's pid namespace (knfsd's threads
 * are, to a gateway in a container), is taken for a kernel thread. Read
 * from /proc once per interrupt, which is rare. */
int gw_intr_errno(pid_t pid)
{
	return pid == 0 || gw_pid_kthread(pid) == 1 ? ETIMEDOUT : EINTR;
}

/* ---- the request a thread serves (gw_i.h) ---- */
static __thread fuse_req_t cur_req;

void gw_req_enter(fuse_req_t req)
{
	cur_req = req;
}

void gw_req_leave(void)
{
	cur_req = NULL;
}

/* libfuse marks a request interrupted when FUSE_INTERRUPT names it,
 * whether or not an interrupt function is set. */
int gw_req_interrupted(void)
{
	fuse_req_t req = cur_req;

	return req && fuse_req_interrupted(req) ?
	       gw_intr_errno(fuse_req_ctx(req)->pid) : 0;
}
