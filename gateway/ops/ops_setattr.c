/* ops_setattr.c - FUSE operations on a file's attributes: setattr
 * (chmod, chown, truncate, utimes: one SETATTR of the origin), the
 * truncate of an open(O_TRUNC) (open.c), and access(2).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "cred_i.h"
#include "inode_i.h"
#include "keep_i.h"
#include "ops_i.h"
#include "read_i.h"
#include "write_i.h"

/* Is the mode in sa only the kernel clearing setuid/setgid before a write
 * or truncate by cr, who does not own the file? The origin refuses a
 * non-owner's chmod (EPERM), where a local fs lets the write through.
 * FUSE_CAP_HANDLE_KILLPRIV would stop the kernel from sending it, but
 * libfuse 3.14 does not pass that flag on in its INIT reply (checked:
 * wanted and capable, absent from the flags sent), and libfuse 3.14 has
 * no HANDLE_KILLPRIV_V2. So, as the NFS client does (nfs_setattr drops
 * ATTR_MODE with ATTR_KILL_SUID/SGID), the mode change is dropped and the
 * origin clears the bits itself on WRITE (ganesha does; it keeps them on
 * SETATTR(size)). A non-owner's own chmod never gets here: with
 * default_permissions the kernel refuses it (EPERM) before asking us. */
bool ops_kill_priv_only(struct gw_inode *ino, const struct nfsc_sattr *sa,
			const struct nfsc_cred *cr)
{
	uint32_t mode, uid;
	bool valid;

	if (!sa->set_mode || sa->set_uid || sa->set_gid ||
	    sa->atime_how != NFSC_TIME_KEEP || sa->mtime_how != NFSC_TIME_KEEP)
		return false;
	pthread_mutex_lock(&ino->lock);
	valid = ino->attr_valid;
	mode = ino->attr.mode;
	uid = ino->attr.uid;
	pthread_mutex_unlock(&ino->lock);
	return valid && cr->uid != 0 && cr->uid != uid &&
	       (mode & (S_ISUID | S_ISGID)) &&
	       (sa->mode | S_ISUID | S_ISGID) == (mode | S_ISUID | S_ISGID) &&
	       sa->mode != mode;
}

void ops_sattr_of(const struct stat *st, int to_set, struct nfsc_sattr *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->set_mode = to_set & FUSE_SET_ATTR_MODE;
	sa->mode = st->st_mode & 07777;
	sa->set_uid = to_set & FUSE_SET_ATTR_UID;
	sa->uid = st->st_uid;
	sa->set_gid = to_set & FUSE_SET_ATTR_GID;
	sa->gid = st->st_gid;
	sa->set_size = to_set & FUSE_SET_ATTR_SIZE;
	sa->size = (uint64_t)st->st_size;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		sa->atime_how = NFSC_TIME_SERVER;
	else if (to_set & FUSE_SET_ATTR_ATIME) {
		sa->atime_how = NFSC_TIME_CLIENT;
		sa->atime = st->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		sa->mtime_how = NFSC_TIME_SERVER;
	else if (to_set & FUSE_SET_ATTR_MTIME) {
		sa->mtime_how = NFSC_TIME_CLIENT;
		sa->mtime = st->st_mtim;
	}
}

/* The origin answered a SETATTR of ours with attributes a: the inode and
 * its cache object follow (our own change: the cache is not dropped); a
 * size set makes the fetches from before stale. */
static void setattr_done(struct gw *gw, struct gw_inode *ino,
			 const struct nfsc_attr *a, bool size_set)
{
	gw_inode_set_attr(ino, a);
	if (size_set) {
		pthread_mutex_lock(&ino->lock);
		ino->wgen++;	/* fetches from before are stale */
		pthread_mutex_unlock(&ino->lock);
		gw_inode_drop_fetch(ino);
	}
	gw_cache_own_change(gw, ino, a, size_set);
}

int gw_file_truncate(struct gw *gw, struct gw_inode *ino,
		     const struct nfsc_cred *cr)
{
	/* As the kernel's SETATTR for O_TRUNC asks: size 0, mtime now. */
	struct nfsc_sattr sa = { .set_size = true, .size = 0,
				 .mtime_how = NFSC_TIME_SERVER };
	struct nfsc_post post;
	int ret;

	/* Uncommitted writes first, as for any truncate (gw_setattr). */
	ret = gw_write_flush(gw, ino, NULL, false);
	if (!ret)
		ret = nfsc_setattr(gw->nfs, cr, &ino->fh, &sa, &post);
	if (!ret && !post.has_attr)
		ret = nfsc_getattr(gw->nfs, cr, &ino->fh, &post.attr);
	if (ret)
		return ret;
	setattr_done(gw, ino, &post.attr, true);
	return 0;
}

void gw_setattr(fuse_req_t req, fuse_ino_t nodeid, struct stat *st,
		       int to_set, struct fuse_file_info *fi)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	struct nfsc_sattr sa;
	struct nfsc_post post;
	struct nfsc_cred cr;
	struct stat out;
	bool killpriv, kernel_times;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	ops_sattr_of(st, to_set, &sa);
	gw_req_cred(req, &cr);
	/* writeback: the kernel keeps the mtime of a file it writes in its
	 * page cache and sends it (MTIME|CTIME, with SIZE for a truncate) at
	 * close, fsync and from its flusher - as whoever closes, or as root
	 * with no pid. A writer that is not the owner may not set an explicit
	 * mtime at the origin (EPERM), where its write on a local fs sets it:
	 * such a SETATTR goes with the opener's credentials, and with the
	 * origin's own time if the origin refuses the kernel's, which is what
	 * the WRITEs set there anyway. (An explicit time of the user's own
	 * from a non-owner never gets here: the kernel refuses it first,
	 * default_permissions.) */
	kernel_times = gw->o->writeback && (to_set & FUSE_SET_ATTR_CTIME) &&
		       (to_set & FUSE_SET_ATTR_MTIME);
	if (kernel_times) {
		pthread_mutex_lock(&ino->lock);
		kernel_times = ino->attr.type == NFSC_REG;
		pthread_mutex_unlock(&ino->lock);
	}
	if (kernel_times && fi && gw_file_of(fi))
		cr = gw_file_of(fi)->cred;
	if (kernel_times) {
		/* The kernel's mtime, not the caller's: judged without it. */
		struct nfsc_sattr k = sa;

		k.mtime_how = NFSC_TIME_KEEP;
		killpriv = ops_kill_priv_only(ino, &k, &cr);
	} else {
		killpriv = ops_kill_priv_only(ino, &sa, &cr);
	}
	if (killpriv)
		sa.set_mode = false;
	/* Uncommitted writes are committed before a truncate: kept for a
	 * resend after it, they could bring cut data back. */
	if (sa.set_size) {
		ret = gw_write_flush(gw, ino, NULL, false);
		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
	}
	if (killpriv && !sa.set_size) {
		/* Nothing left to change: the kernel gets attributes it must
		 * not keep (timeout 0), since the WRITE that follows clears
		 * the bits at the origin. */
		ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, &post.attr);
		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
		gw_inode_invalidate_attr(gw, ino);
		gw_attr_to_stat(&post.attr, nodeid, &out);
		fuse_reply_attr(req, &out, 0);
		return;
	}
	ret = nfsc_setattr(gw->nfs, &cr, &ino->fh, &sa, &post);
	if (kernel_times && (ret == -EPERM || ret == -EACCES) &&
	    sa.mtime_how == NFSC_TIME_CLIENT) {
		sa.mtime_how = NFSC_TIME_SERVER;
		ret = nfsc_setattr(gw->nfs, &cr, &ino->fh, &sa, &post);
	}
	/* The kernel's times alone, refused to the file it came through (a
	 * writer who lost write access at the origin): as each other writer,
	 * as write-back WRITEs go (write.c, "whose credentials"). Refused to
	 * all, the origin keeps the time its WRITEs set, and the request
	 * gets its attributes: a refused WRITE's error reaches the writers
	 * by itself (gw_write_flush), and a close or fsync must not fail
	 * again, for ever, for a time the kernel keeps. */
	if (kernel_times && (ret == -EPERM || ret == -EACCES) &&
	    !sa.set_size && !sa.set_mode && !sa.set_uid && !sa.set_gid) {
		struct nfsc_cred alt[GW_CRED_TRIES];
		size_t n = gw_write_other_creds(ino, &cr, alt), i;

		for (i = 0; i < n && (ret == -EPERM || ret == -EACCES); i++)
			ret = nfsc_setattr(gw->nfs, &alt[i], &ino->fh, &sa,
					   &post);
		if (ret == -EPERM || ret == -EACCES) {
			ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, &post.attr);
			post.has_attr = !ret;
		}
	}
	if (!ret && !post.has_attr)
		ret = nfsc_getattr(gw->nfs, &cr, &ino->fh, &post.attr);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	setattr_done(gw, ino, &post.attr, sa.set_size);
	gw_attr_to_stat(&post.attr, nodeid, &out);
	if (gw_silly_has(ino) && out.st_nlink > 0)
		out.st_nlink--;	/* its hidden name is not one of its names */
	fuse_reply_attr(req, &out, killpriv ? 0 : gw_attr_ttl(gw, &post.attr));
}

void gw_access(fuse_req_t req, fuse_ino_t nodeid, int mask)
{
	struct gw *gw = req_gw(req);
	struct gw_inode *ino = gw_inode_get(gw, nodeid);
	struct nfsc_cred cr;
	int ret;

	if (!ino) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	gw_req_cred(req, &cr);
	ret = gw_access_check(gw, ino, &cr, mask, NULL, NULL);
	if (ret != -EHOSTDOWN && gw_offline(gw))
		gw_offline_count(gw);
	fuse_reply_err(req, -ret);
}
