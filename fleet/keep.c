/* keep.c - the cache_dir's fleet file: which export of a store the
 * cache_dir's node-ids came from, and the export's handle key, so that a
 * gateway restarted while the store is away serves what it knows with the
 * fleet's generations.
 *
 * 48 bytes: "CGWFLEE1", export id (le64), key (16), XXH3-64 of the 32
 * bytes before it (le64). Mode 0600: the key makes generations.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "fileio.h"
#include "fleet_i.h"

#define MAGIC "CGWFLEE1"
#define LEN 48

static int path_of(char *out, size_t len, const char *dir, const char *name)
{
	return snprintf(out, len, "%s/%s", dir, name) >= (int)len ?
	       -ENAMETOOLONG : 0;
}

int fleet_keep_load(const char *cache_dir, struct fleet_kept *k)
{
	char path[PATH_MAX];
	uint8_t b[LEN + 1];
	uint64_t v;
	ssize_t n;
	int fd, ret = path_of(path, sizeof(path), cache_dir, FLEET_FILE);

	if (ret)
		return ret;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread_all(fd, b, sizeof(b), 0);
	close(fd);
	if (n < 0)
		return (int)n;
	if (n != LEN || memcmp(b, MAGIC, 8))
		return -EBADMSG;
	memcpy(&v, b + 40, 8);
	if (le64toh(v) != XXH3_64bits(b, 40))
		return -EBADMSG;
	memcpy(&v, b + 8, 8);
	k->export_id = le64toh(v);
	memcpy(k->key, b + 16, FLEET_KEY_LEN);
	return k->export_id ? 0 : -EBADMSG;
}

int fleet_keep_save(const char *cache_dir, const struct fleet_kept *k)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	uint8_t b[LEN];
	uint64_t v;
	int fd, ret;

	if ((ret = path_of(path, sizeof(path), cache_dir, FLEET_FILE)) ||
	    (ret = path_of(tmp, sizeof(tmp), cache_dir, FLEET_FILE ".tmp")))
		return ret;
	memcpy(b, MAGIC, 8);
	v = htole64(k->export_id);
	memcpy(b + 8, &v, 8);
	memcpy(b + 16, k->key, FLEET_KEY_LEN);
	v = htole64(XXH3_64bits(b, 40));
	memcpy(b + 40, &v, 8);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	ret = pwrite_all(fd, b, sizeof(b), 0);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (!ret)
		ret = fsync_parent(path);
	if (ret)
		unlink(tmp);
	return ret;
}
