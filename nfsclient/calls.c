/* calls.c - one async call per NFSv3 procedure.
 *
 * Each call builds a request (nfsc_req_new), queues it on a connection
 * (nfsc_submit). On the service thread, its issue function encodes the
 * arguments with rpc_nfs3_*_async; its decode function (run by reply.c's
 * nfsc_reply) copies the result into the caller's output structures.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nfsc_i.h"

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
