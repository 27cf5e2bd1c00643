/* read.c - the read path.
 *
 * Without a cache: the request is split into rsize READs spread over the
 * connections (nfsc_pread) and answered when all have arrived.
 */
#include <errno.h>
#include <stdlib.h>

#include "cache.h"
#include "gw_i.h"

void gw_read(struct gw *gw, fuse_req_t req, struct gw_inode *ino,
	     struct gw_file *f, size_t size, off_t off)
{
	struct nfsc_attr a;
	bool has_attr = false;
	ssize_t got;
	char *buf;

	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = nfsc_pread(gw->nfs, &f->cred, &ino->fh, buf, size, (uint64_t)off,
			 &a, &has_attr);
	if (has_attr)
		gw_inode_set_attr(ino, &a);
	if (got < 0)
		fuse_reply_err(req, (int)-got);
	else
		fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}
