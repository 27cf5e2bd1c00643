/* origin_root.c - the export's root file handle, kept in the cache
 * directory (file origin-root) so that with offline= a gateway can start
 * while the origin cannot be reached: every other handle is in the
 * node-id table, the root's comes from the MOUNT reply. One line:
 * "cachegw-origin-root 1 SERVER:EXPORT HEX". Written (atomically: a
 * temporary file renamed over it, the directory fsync'd) when a mount
 * shows another handle than the one kept; read only with offline=.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "fileio.h"

#define ROOT_FILE "origin-root"
#define ROOT_MAGIC "cachegw-origin-root 1"

int gw_origin_root_load(const char *cache_dir, char *where, size_t wlen,
			struct nfsc_fh *fh)
{
	char path[4096], hex[2 * NFSC_FH_MAX + 2], w[1024], magic[32], ver[8];
	FILE *f;
	int ok, fd;

	snprintf(path, sizeof(path), "%s/" ROOT_FILE, cache_dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	ok = fscanf(f, "%31s %7s %1023s %129s", magic, ver, w, hex) == 4;
	fclose(f);
	if (!ok || strcmp(magic, "cachegw-origin-root") || strcmp(ver, "1") ||
	    strlen(hex) % 2 || strlen(hex) / 2 == 0 ||
	    strlen(hex) / 2 > NFSC_FH_MAX || strlen(w) >= wlen)
		return -EINVAL;
	fh->len = (uint32_t)(strlen(hex) / 2);
	for (uint32_t i = 0; i < fh->len; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		fh->data[i] = (uint8_t)v;
	}
	strcpy(where, w);
	return 0;
}

int gw_origin_root_save(const char *cache_dir, const char *server,
			const char *export, const struct nfsc_fh *fh)
{
	char path[4096], tmp[4110], where[1024], kw[1024];
	struct nfsc_fh kept;
	FILE *f;
	int ret = 0, fd;

	snprintf(where, sizeof(where), "%s:%s", server, export);
	if (strchr(where, ' ') || strchr(where, '\n'))
		return -EINVAL;	/* not kept: offline starts need it whole */
	if (gw_origin_root_load(cache_dir, kw, sizeof(kw), &kept) == 0 &&
	    !strcmp(kw, where) && kept.len == fh->len &&
	    !memcmp(kept.data, fh->data, fh->len))
		return 0;
	snprintf(path, sizeof(path), "%s/" ROOT_FILE, cache_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* 0600, as every file of the cache; a link planted there is not
	 * followed. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return -ENOMEM;
	}
	fprintf(f, ROOT_MAGIC " %s ", where);
	for (uint32_t i = 0; i < fh->len; i++)
		fprintf(f, "%02x", fh->data[i]);
	fputc('\n', f);
	if (fflush(f) || fsync(fileno(f)))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	else
		ret = fsync_parent(path);
	return ret;
}
