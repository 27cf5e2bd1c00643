/* fileio.h - whole-buffer pread/pwrite at an offset, retried on EINTR and
 * short transfers: the cache's data and metadata files (cache/io.c) and
 * the node-id table's log (nodes/log.c) write through these. And the
 * directory fsync after a rename that replaces a file of cache_dir
 * (md.log, cache.conf, origin-root, silly-names).
 */
#ifndef CACHEGW_FILEIO_H
#define CACHEGW_FILEIO_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* 0, or -errno (-EIO for a write that makes no progress). */
static inline int pwrite_all(int fd, const void *buf, size_t len,
			     uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Bytes read (short only at end of file) or -errno. */
static inline ssize_t pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* A file replaced whole (written to a temporary name, fsync'd, renamed
 * over the old one) is durable only once the directory that holds the
 * new name is: until then a power cut may bring back the old file, or
 * none. Call after the rename. 0 or -errno. */
static inline int fsync_dir(int dirfd)
{
	return fsync(dirfd) < 0 ? -errno : 0;
}

/* The same for the directory that holds path. */
static inline int fsync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 :
				    (size_t)(slash - path)) : strdup(".");
	int fd, ret;

	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -errno;
	ret = fsync_dir(fd);
	close(fd);
	return ret;
}

#endif
