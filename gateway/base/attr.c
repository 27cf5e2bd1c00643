/* attr.c - what the origin's attributes tell every room: how long they
 * may be trusted (from the acregmin..acdirmax options, like the NFS
 * client), and the struct stat the kernel is given.
 */
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "gw_i.h"

double gw_elapsed_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) +
	       (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

double gw_attr_ttl(const struct gw *gw, const struct nfsc_attr *a)
{
	const struct gw_opts *o = gw->o;
	bool dir = a->type == NFSC_DIR;
	double lo = dir ? o->acdirmin : o->acregmin;
	double hi = dir ? o->acdirmax : o->acregmax;
	struct timespec now;
	double age, ttl;

	/* Like the NFS client: a file that changed long ago is likely to stay
	 * unchanged, so trust it for a tenth of its age, within [min, max]. */
	clock_gettime(CLOCK_REALTIME, &now);
	age = (double)(now.tv_sec - a->mtime.tv_sec);
	ttl = age / 10;
	if (ttl < lo)
		ttl = lo;
	if (ttl > hi)
		ttl = hi;
	return ttl;
}

double gw_attr_ttl_left(const struct gw *gw, const struct nfsc_attr *a,
			const struct timespec *at)
{
	double left = gw_attr_ttl(gw, a) - gw_elapsed_since(at);

	return left > 0 ? left : 0;
}

void gw_attr_to_stat(const struct nfsc_attr *a, uint64_t nodeid,
		     struct stat *st)
{
	static const mode_t fmt[] = {
		[NFSC_REG] = S_IFREG, [NFSC_DIR] = S_IFDIR,
		[NFSC_BLK] = S_IFBLK, [NFSC_CHR] = S_IFCHR,
		[NFSC_LNK] = S_IFLNK, [NFSC_SOCK] = S_IFSOCK,
		[NFSC_FIFO] = S_IFIFO,
	};

	(void)nodeid;
	memset(st, 0, sizeof(*st));
	st->st_ino = a->fileid;		/* the origin's fileid, as promised */
	st->st_mode = (a->type <= NFSC_FIFO ? fmt[a->type] : S_IFREG) |
		      (a->mode & 07777);
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 1 << 20;
	st->st_blocks = (blkcnt_t)((a->used + 511) / 512);
	st->st_rdev = makedev(a->rdev_major, a->rdev_minor);
	st->st_atim = a->atime;
	st->st_mtim = a->mtime;
	st->st_ctim = a->ctime;
}
