/* calls.c - one async call per NFSv3 procedure.
 *
 * Each call builds a request (nfsc_req_new), queues it on a connection
 * (nfsc_submit). On the service thread, its issue function encodes the
 * arguments with rpc_nfs3_*_async; its reply callback decodes the result
 * into the caller's output structures and completes the request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Queue r or free it: the common tail of every call below. */
int nfsc_submit_or_free(struct nfsc *n, int conn, struct nfsc_req *r)
{
	int ret = nfsc_submit(n, conn, r);

	if (ret)
		nfsc_req_free(r);
	return ret;
}

/* ---- GETATTR ---- */

static int getattr_decode(struct nfsc_req *r, void *data, int ret)
{
	GETATTR3res *res = data;

	if (!ret)
		ret = nfsc_attr_from_fattr3(r->u.getattr.attr,
				&res->GETATTR3res_u.resok.obj_attributes);
	return ret;
}

static int getattr_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	GETATTR3args a = { 0 };

	nfsc_fh3_set(&a.object, &r->fh);
	r->proc = NFS3_GETATTR;
	r->decode = getattr_decode;
	return rpc_nfs3_getattr_async(rpc, nfsc_reply, &a, r);
}

int nfsc_getattr_submit(struct nfsc *n, int conn, const struct nfsc_cred *cr,
			const struct nfsc_fh *fh, struct nfsc_attr *attr,
			nfsc_cb cb, void *priv, bool idem)
{
	struct nfsc_req *r = nfsc_req_new(n, cr, fh, getattr_issue, cb, priv);

	if (!r)
		return -ENOMEM;
	r->u.getattr.attr = attr;
	return idem ? nfsc_submit_idem(n, conn, r) :
		      nfsc_submit_or_free(n, conn, r);
}

int nfsc_getattr_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		       const struct nfsc_fh *fh, struct nfsc_attr *attr,
		       nfsc_cb cb, void *priv)
{
	return nfsc_getattr_submit(n, conn, cr, fh, attr, cb, priv, true);
}

/* ---- LOOKUP ---- */

static int lookup_decode(struct nfsc_req *r, void *data, int ret)
{
	LOOKUP3res *res = data;

	if (!ret) {
		LOOKUP3resok *ok = &res->LOOKUP3res_u.resok;

		ret = nfsc_fh_from3(r->u.lookup.out, &ok->object);
		nfsc_post_op(&ok->obj_attributes, r->u.lookup.attr,
			r->u.lookup.has_attr);
	}
	return ret;
}

static int lookup_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	LOOKUP3args a = { 0 };

	nfsc_fh3_set(&a.what.dir, &r->fh);
	a.what.name = r->name;
	r->proc = NFS3_LOOKUP;
	r->decode = lookup_decode;
	return rpc_nfs3_lookup_async(rpc, nfsc_reply, &a, r);
}

int nfsc_lookup_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *dir, const char *name,
		      struct nfsc_fh *out, struct nfsc_attr *attr,
		      bool *has_attr, nfsc_cb cb, void *priv)
{
	struct nfsc_req *r;

	if (strlen(name) > NFSC_NAME_MAX)
		return -ENAMETOOLONG;
	r = nfsc_req_new(n, cr, dir, lookup_issue, cb, priv);
	if (!r)
		return -ENOMEM;
	strcpy(r->name, name);
	r->u.lookup.out = out;
	r->u.lookup.attr = attr;
	r->u.lookup.has_attr = has_attr;
	if (has_attr)
		*has_attr = false;
	return nfsc_submit_idem(n, conn, r);
}

/* ---- ACCESS ---- */

static int access_decode(struct nfsc_req *r, void *data, int ret)
{
	ACCESS3res *res = data;

	if (!ret) {
		*r->u.access.granted = res->ACCESS3res_u.resok.access;
		if (r->post)
			nfsc_post_op(&res->ACCESS3res_u.resok.obj_attributes,
				     &r->post->attr, &r->post->has_attr);
	}
	return ret;
}

static int access_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	ACCESS3args a = { 0 };

	nfsc_fh3_set(&a.object, &r->fh);
	a.access = r->u.access.mask;
	r->proc = NFS3_ACCESS;
	r->decode = access_decode;
	return rpc_nfs3_access_async(rpc, nfsc_reply, &a, r);
}

int nfsc_access_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, uint32_t mask,
		      uint32_t *granted, struct nfsc_post *post,
		      nfsc_cb cb, void *priv)
{
	struct nfsc_req *r = nfsc_req_new(n, cr, fh, access_issue, cb, priv);

	if (!r)
		return -ENOMEM;
	r->u.access.mask = mask;
	r->u.access.granted = granted;
	r->post = post;
	if (post)
		post->has_attr = post->has_pre = false;
	return nfsc_submit_idem(n, conn, r);
}

/* ---- READ ---- */

static int read_decode(struct nfsc_req *r, void *data, int ret)
{
	READ3res *res = data;
	READ3resok *ok = &res->READ3res_u.resok;
	uint32_t got;

	if (ret) {
		if (r->u.read.has_attr)
			nfsc_post_op(&res->READ3res_u.resfail.file_attributes,
				r->u.read.attr, r->u.read.has_attr);
		return ret;
	}
	got = ok->data.data_len;
	if (got > r->u.read.count)
		got = r->u.read.count;	/* a server bug; be safe */
	memcpy(r->u.read.buf, ok->data.data_val, got);
	*r->u.read.got = got;
	*r->u.read.eof = ok->eof;
	nfsc_post_op(&ok->file_attributes, r->u.read.attr, r->u.read.has_attr);
	atomic_fetch_add(&r->n->read_bytes, got);
	return 0;
}

static int read_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	READ3args a = { 0 };

	nfsc_fh3_set(&a.file, &r->fh);
	a.offset = r->u.read.off;
	a.count = r->u.read.count;
	r->proc = NFS3_READ;
	r->decode = read_decode;
	return rpc_nfs3_read_async(rpc, nfsc_reply, &a, r);
}

int nfsc_read_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		    const struct nfsc_fh *fh, uint64_t off, uint32_t count,
		    void *buf, uint32_t *got, bool *eof,
		    struct nfsc_attr *attr, bool *has_attr,
		    nfsc_cb cb, void *priv)
{
	struct nfsc_req *r = nfsc_req_new(n, cr, fh, read_issue, cb, priv);

	if (!r)
		return -ENOMEM;
	r->u.read.off = off;
	r->u.read.count = count;
	r->u.read.buf = buf;
	r->u.read.got = got;
	r->u.read.eof = eof;
	r->u.read.attr = attr;
	r->u.read.has_attr = has_attr;
	*got = 0;
	*eof = false;
	if (has_attr)
		*has_attr = false;
	return nfsc_submit_idem(n, conn, r);
}

/* ---- READDIRPLUS ---- */

/* A name the kernel would refuse (it rejects the whole reply that holds
 * one: EIO, the directory never lists), or a second "." or "..": false. */
static bool dirlist_name_ok(struct nfsc_dirlist *l, const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (!len || len > NFSC_NAME_MAX || strchr(name, '/'))
		return false;
	if (!strcmp(name, ".")) {
		if (l->seen_dot)
			return false;
		l->seen_dot = true;
	} else if (!strcmp(name, "..")) {
		if (l->seen_dotdot)
			return false;
		l->seen_dotdot = true;
	}
	return true;
}

static int dirlist_push(struct nfsc_dirlist *l, const entryplus3 *e)
{
	struct nfsc_dirent *d;

	if (!dirlist_name_ok(l, e->name)) {
		if (!l->skipped++ && e->name) {
			char *c;

			snprintf(l->skipped_first, sizeof(l->skipped_first),
				 "%s", e->name);
			for (c = l->skipped_first; *c; c++)
				if (*c < 0x20 || *c == 0x7f)
					*c = '?';	/* one log line */
		}
		return 0;
	}
	if (l->max && l->n >= l->max)
		return -EFBIG;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct nfsc_dirent *p = realloc(l->ents, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->ents = p;
		l->cap = cap;
	}
	d = &l->ents[l->n];
	memset(d, 0, sizeof(*d));
	d->name = strdup(e->name);
	if (!d->name)
		return -ENOMEM;
	d->fileid = e->fileid;
	d->cookie = e->cookie;
	nfsc_post_op(&e->name_attributes, &d->attr, &d->has_attr);
	if (e->name_handle.handle_follows &&
	    nfsc_fh_from3(&d->fh, &e->name_handle.post_op_fh3_u.handle) == 0)
		d->has_fh = true;
	l->n++;
	return 0;
}

static int rdp_decode(struct nfsc_req *r, void *data, int ret)
{
	READDIRPLUS3res *res = data;
	const entryplus3 *e;

	if (!ret) {
		READDIRPLUS3resok *ok = &res->READDIRPLUS3res_u.resok;

		/* libnfs may decode entries at unaligned addresses: copy
		 * each one out before touching its fields. */
		for (e = ok->reply.entries; e && !ret;) {
			entryplus3 ent;

			memcpy(&ent, e, sizeof(ent));
			ret = dirlist_push(r->u.rdp.list, &ent);
			*r->u.rdp.cookie = ent.cookie;
			e = ent.nextentry;
		}
		memcpy(r->u.rdp.verf, ok->cookieverf, NFS3_COOKIEVERFSIZE);
		*r->u.rdp.eof = ok->reply.eof;
	}
	return ret;
}

static int rdp_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	READDIRPLUS3args a = { 0 };

	nfsc_fh3_set(&a.dir, &r->fh);
	a.cookie = *r->u.rdp.cookie;
	memcpy(a.cookieverf, r->u.rdp.verf, NFS3_COOKIEVERFSIZE);
	a.dircount = 8192;
	a.maxcount = 65536;
	r->proc = NFS3_READDIRPLUS;
	r->decode = rdp_decode;
	return rpc_nfs3_readdirplus_async(rpc, nfsc_reply, &a, r);
}

int nfsc_readdirplus_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
			   const struct nfsc_fh *dir, uint64_t *cookie,
			   uint8_t verf[8], struct nfsc_dirlist *list,
			   bool *eof, nfsc_cb cb, void *priv)
{
	struct nfsc_req *r = nfsc_req_new(n, cr, dir, rdp_issue, cb, priv);

	if (!r)
		return -ENOMEM;
	r->u.rdp.cookie = cookie;
	r->u.rdp.verf = verf;
	r->u.rdp.list = list;
	r->u.rdp.eof = eof;
	*eof = false;
	return nfsc_submit_idem(n, conn, r);
}

void nfsc_dirlist_free(struct nfsc_dirlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->ents[i].name);
	free(l->ents);
	memset(l, 0, sizeof(*l));
}

/* ---- READLINK ---- */

static int readlink_decode(struct nfsc_req *r, void *data, int ret)
{
	READLINK3res *res = data;

	if (!ret) {
		const char *t = res->READLINK3res_u.resok.data;
		size_t len = t ? strlen(t) : 0;

		/* A target that does not fit is not cut short. */
		if (len >= r->u.readlink.size)
			ret = -ENAMETOOLONG;
		else
			memcpy(r->u.readlink.buf, t ? t : "", len + 1);
	}
	return ret;
}

static int readlink_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	READLINK3args a = { 0 };

	nfsc_fh3_set(&a.symlink, &r->fh);
	r->proc = NFS3_READLINK;
	r->decode = readlink_decode;
	return rpc_nfs3_readlink_async(rpc, nfsc_reply, &a, r);
}

int nfsc_readlink_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
			const struct nfsc_fh *fh, char *buf, size_t size,
			nfsc_cb cb, void *priv)
{
	struct nfsc_req *r;

	if (!size)
		return -EINVAL;
	r = nfsc_req_new(n, cr, fh, readlink_issue, cb, priv);
	if (!r)
		return -ENOMEM;
	r->u.readlink.buf = buf;
	r->u.readlink.size = size;
	return nfsc_submit_idem(n, conn, r);
}

/* ---- FSSTAT / FSINFO ---- */

static int fsstat_decode(struct nfsc_req *r, void *data, int ret)
{
	FSSTAT3res *res = data;

	if (!ret) {
		FSSTAT3resok *ok = &res->FSSTAT3res_u.resok;
		struct nfsc_fsstat *st = r->u.fsstat.st;

		st->tbytes = ok->tbytes;
		st->fbytes = ok->fbytes;
		st->abytes = ok->abytes;
		st->tfiles = ok->tfiles;
		st->ffiles = ok->ffiles;
		st->afiles = ok->afiles;
	}
	return ret;
}

static int fsstat_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	FSSTAT3args a = { 0 };

	nfsc_fh3_set(&a.fsroot, &r->fh);
	r->proc = NFS3_FSSTAT;
	r->decode = fsstat_decode;
	return rpc_nfs3_fsstat_async(rpc, nfsc_reply, &a, r);
}

int nfsc_fsstat_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, struct nfsc_fsstat *st,
		      nfsc_cb cb, void *priv)
{
	struct nfsc_req *r = nfsc_req_new(n, cr, fh, fsstat_issue, cb, priv);

	if (!r)
		return -ENOMEM;
	r->u.fsstat.st = st;
	return nfsc_submit_idem(n, conn, r);
}

static int fsinfo_decode(struct nfsc_req *r, void *data, int ret)
{
	FSINFO3res *res = data;

	if (!ret) {
		FSINFO3resok *ok = &res->FSINFO3res_u.resok;
		struct nfsc_fsinfo *fi = r->u.fsinfo.fi;

		fi->rtmax = ok->rtmax;
		fi->rtpref = ok->rtpref;
		fi->wtmax = ok->wtmax;
		fi->wtpref = ok->wtpref;
		fi->dtpref = ok->dtpref;
		fi->maxfilesize = ok->maxfilesize;
	}
	return ret;
}

static int fsinfo_issue(struct rpc_context *rpc, struct nfsc_req *r)
{
	FSINFO3args a = { 0 };

	nfsc_fh3_set(&a.fsroot, &r->fh);
	r->proc = NFS3_FSINFO;
	r->decode = fsinfo_decode;
	return rpc_nfs3_fsinfo_async(rpc, nfsc_reply, &a, r);
}

int nfsc_fsinfo_async(struct nfsc *n, int conn, const struct nfsc_cred *cr,
		      const struct nfsc_fh *fh, struct nfsc_fsinfo *fi,
		      nfsc_cb cb, void *priv)
{
	struct nfsc_req *r = nfsc_req_new(n, cr, fh, fsinfo_issue, cb, priv);

	if (!r)
		return -ENOMEM;
	r->u.fsinfo.fi = fi;
	return nfsc_submit_or_free(n, conn, r);
}
