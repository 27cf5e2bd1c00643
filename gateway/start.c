/* start.c - the request path as one, for the process that runs it: what
 * ties its rooms together at start.
 *
 * An inode is the inode room's, but the rooms above hang their own things
 * on it: the read path its fetches (which READ callbacks fill, so its
 * last READs must be waited for), the write path its uncommitted extents.
 * The inode table calls gw->it.evict before it frees an inode, and that
 * is set here, where every room is known, rather than the table calling
 * up into the rooms that use it.
 */
#include "gateway.h"
#include "inode_i.h"
#include "keep_i.h"
#include "read_i.h"
#include "write_i.h"

static void inode_evict(struct gw *gw, struct gw_inode *ino)
{
	(void)gw;
	gw_inode_drop_fetch(ino);	/* waits for READs that fill ino->obj */
	gw_write_forget(ino);
}

int gw_gateway_init(struct gw *gw)
{
	int ret = gw_itable_init(&gw->it, nfsc_root(gw->nfs));

	if (ret)
		return ret;
	gw->it.evict = inode_evict;
	/* The root's kept attributes and ACCESS answers, as every new
	 * inode gets them (kept_md.c); no request runs yet. */
	gw_md_attach(gw, gw->it.root);
	return 0;
}
