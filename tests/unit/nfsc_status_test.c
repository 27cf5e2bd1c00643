/* nfsc_status_test: every NFSv3 status (RFC 1813 2.6) becomes the errno a
 * local filesystem would give for the same failure (ESTALE for a handle
 * the origin no longer knows, EAGAIN for JUKEBOX, EIO for a status no
 * RFC names), and every procedure the gateway sends has the name its
 * counters are shown under (nfsstat's), the others none. */
#include "check.h"
#include "nfsc_i.h"

int main(void)
{
	static const struct { int st, err; } map[] = {
		{ NFS3_OK, 0 },
		{ NFS3ERR_PERM, -EPERM },
		{ NFS3ERR_NOENT, -ENOENT },
		{ NFS3ERR_IO, -EIO },
		{ NFS3ERR_NXIO, -ENXIO },
		{ NFS3ERR_ACCES, -EACCES },
		{ NFS3ERR_EXIST, -EEXIST },
		{ NFS3ERR_XDEV, -EXDEV },
		{ NFS3ERR_NODEV, -ENODEV },
		{ NFS3ERR_NOTDIR, -ENOTDIR },
		{ NFS3ERR_ISDIR, -EISDIR },
		{ NFS3ERR_INVAL, -EINVAL },
		{ NFS3ERR_FBIG, -EFBIG },
		{ NFS3ERR_NOSPC, -ENOSPC },
		{ NFS3ERR_ROFS, -EROFS },
		{ NFS3ERR_MLINK, -EMLINK },
		{ NFS3ERR_NAMETOOLONG, -ENAMETOOLONG },
		{ NFS3ERR_NOTEMPTY, -ENOTEMPTY },
		{ NFS3ERR_DQUOT, -EDQUOT },
		{ NFS3ERR_STALE, -ESTALE },
		{ NFS3ERR_REMOTE, -EREMOTE },
		{ NFS3ERR_BADHANDLE, -ESTALE },
		{ NFS3ERR_NOT_SYNC, -EIO },
		{ NFS3ERR_BAD_COOKIE, -EINVAL },
		{ NFS3ERR_NOTSUPP, -EOPNOTSUPP },
		{ NFS3ERR_TOOSMALL, -EINVAL },
		{ NFS3ERR_SERVERFAULT, -EREMOTEIO },
		{ NFS3ERR_BADTYPE, -EINVAL },
		{ NFS3ERR_JUKEBOX, -EAGAIN },
		{ 3, -EIO },		/* no such status */
		{ 99999, -EIO },
		{ -1, -EIO },
	};
	static const char *const names[NFSC_NPROC] = {
		[1] = "getattr", [2] = "setattr", [3] = "lookup",
		[4] = "access", [5] = "readlink", [6] = "read", [7] = "write",
		[8] = "create", [9] = "mkdir", [10] = "symlink",
		[11] = "mknod", [12] = "remove", [13] = "rmdir",
		[14] = "rename", [15] = "link", [17] = "readdirplus",
		[18] = "fsstat", [19] = "fsinfo", [21] = "commit",
	};
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (nfsc_status_to_errno(map[i].st) != map[i].err)
			fprintf(stderr, "status %d: ", map[i].st);
		CHECK_EQ(nfsc_status_to_errno(map[i].st), map[i].err);
	}
	for (i = 0; i < NFSC_NPROC + 3; i++) {
		const char *got = nfsc_proc_name((unsigned)i);
		const char *want = i < NFSC_NPROC ? names[i] : NULL;

		if (!want != !got || (want && strcmp(want, got)))
			fprintf(stderr, "procedure %zu: %s, not %s\n", i,
				got ? got : "none", want ? want : "none");
		CHECK(!want == !got);
		CHECK(!want || !strcmp(want, got));
	}
	printf("nfsc_status_test: ok\n");
	return 0;
}
