/* caller.c - the credentials of a FUSE request's caller, as the origin is
 * sent them: uid, gid and the supplementary groups (groups.c).
 */
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
