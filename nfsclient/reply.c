/* reply.c - what every reply passes through, whatever its procedure:
 * the transport's outcome, the nfsstat3 as an errno, then the procedure's
 * own decoding (nfsc_reply); and the conversions the decoders share:
 * fattr3 to nfsc_attr (sizes past 2^63-1 refused), post-op attributes,
 * file handles both ways.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nfsc_i.h"

int nfsc_status_to_errno(int st)
{
	switch (st) {
	case NFS3_OK: return 0;
	case NFS3ERR_PERM: return -EPERM;
	case NFS3ERR_NOENT: return -ENOENT;
	case NFS3ERR_IO: return -EIO;
	case NFS3ERR_NXIO: return -ENXIO;
	case NFS3ERR_ACCES: return -EACCES;
	case NFS3ERR_EXIST: return -EEXIST;
	case NFS3ERR_XDEV: return -EXDEV;
	case NFS3ERR_NODEV: return -ENODEV;
	case NFS3ERR_NOTDIR: return -ENOTDIR;
	case NFS3ERR_ISDIR: return -EISDIR;
	case NFS3ERR_INVAL: return -EINVAL;
	case NFS3ERR_FBIG: return -EFBIG;
	case NFS3ERR_NOSPC: return -ENOSPC;
	case NFS3ERR_ROFS: return -EROFS;
	case NFS3ERR_MLINK: return -EMLINK;
	case NFS3ERR_NAMETOOLONG: return -ENAMETOOLONG;
	case NFS3ERR_NOTEMPTY: return -ENOTEMPTY;
	case NFS3ERR_DQUOT: return -EDQUOT;
	case NFS3ERR_STALE: return -ESTALE;
	case NFS3ERR_REMOTE: return -EREMOTE;
	case NFS3ERR_BADHANDLE: return -ESTALE;
	case NFS3ERR_NOT_SYNC: return -EIO;
	case NFS3ERR_BAD_COOKIE: return -EINVAL;	/* the directory changed under us */
	case NFS3ERR_NOTSUPP: return -EOPNOTSUPP;
	case NFS3ERR_TOOSMALL: return -EINVAL;
	case NFS3ERR_SERVERFAULT: return -EREMOTEIO;
	case NFS3ERR_BADTYPE: return -EINVAL;
	case NFS3ERR_JUKEBOX: return -EAGAIN;
	default: return -EIO;
	}
}

/* The transport-level outcome of a call, before its NFS status. */
int nfsc_rpc_status(struct nfsc_req *r, int rpc_status, void *data)
{
	switch (rpc_status) {
	case RPC_STATUS_SUCCESS:
		if (r->n->opts.offline)	/* else nobody asks when */
			nfsc_origin_answered(r->n);
		return data ? 0 : -EIO;
	case RPC_STATUS_CANCEL:
		return -ECANCELED;
	case RPC_STATUS_TIMEOUT:
		return -ETIMEDOUT;
	default:
		return -EIO;
	}
}

/* Every reply comes here: the transport's outcome, then the NFS status
 * that each *3res begins with, then the procedure's own decoding
 * (r->decode: only of an answer, with that status as -errno; it returns
 * the call's result), then nfsc_complete. */
void nfsc_reply(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct nfsc_req *r = priv;
	int ret = nfsc_rpc_status(r, status, data);

	(void)rpc;
	if (!ret) {
		ret = nfsc_status_to_errno((int)*(const nfsstat3 *)data);
		if (r->decode)
			ret = r->decode(r, data, ret);
	}
	nfsc_complete(r, ret);
}

/* An origin's size the kernel cannot represent (off_t is signed): refused
 * here, at the door, so no layer above sees it. One log line for the 1st,
 * 2nd, 4th, 8th, ... such reply. */
static int attr_check_size(const struct fattr3 *f)
{
	static unsigned long seen;
	unsigned long k;

	if (f->size <= (uint64_t)INT64_MAX)
		return 0;
	k = __atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED);
	if (!(k & (k - 1)))
		fprintf(stderr, "cachegw: origin sent size %llu for file id "
			"%llu, larger than 2^63-1: attributes refused "
			"(EOVERFLOW; %lu such replies so far)\n",
			(unsigned long long)f->size,
			(unsigned long long)f->fileid, k);
	return -EOVERFLOW;
}

int nfsc_attr_from_fattr3(struct nfsc_attr *a, const struct fattr3 *f)
{
	if (attr_check_size(f))
		return -EOVERFLOW;
	a->type = (enum nfsc_type)f->type;
	a->mode = f->mode & 07777;
	a->nlink = f->nlink;
	a->uid = f->uid;
	a->gid = f->gid;
	a->size = f->size;
	a->used = f->used;
	a->rdev_major = f->rdev.specdata1;
	a->rdev_minor = f->rdev.specdata2;
	a->fsid = f->fsid;
	a->fileid = f->fileid;
	a->atime.tv_sec = f->atime.seconds;
	a->atime.tv_nsec = f->atime.nseconds;
	a->mtime.tv_sec = f->mtime.seconds;
	a->mtime.tv_nsec = f->mtime.nseconds;
	a->ctime.tv_sec = f->ctime.seconds;
	a->ctime.tv_nsec = f->ctime.nseconds;
	return 0;
}

void nfsc_post_op(const post_op_attr *p, struct nfsc_attr *attr,
		    bool *has_attr)
{
	bool have = p->attributes_follow;

	/* Attributes refused at the door are as good as absent: callers
	 * fetch them again (GETATTR), which then fails. */
	if (have && attr &&
	    nfsc_attr_from_fattr3(attr, &p->post_op_attr_u.attributes))
		have = false;
	if (has_attr)
		*has_attr = have;
}

void nfsc_fh3_set(nfs_fh3 *dst, const struct nfsc_fh *fh)
{
	dst->data.data_len = fh->len;
	dst->data.data_val = (char *)fh->data;
}

int nfsc_fh_from3(struct nfsc_fh *dst, const nfs_fh3 *src)
{
	if (src->data.data_len == 0 || src->data.data_len > NFSC_FH_MAX)
		return -EPROTO;
	dst->len = src->data.data_len;
	memcpy(dst->data, src->data.data_val, dst->len);
	return 0;
}
