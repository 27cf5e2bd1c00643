/* handlekey.c - generations that make the node-ids handed out unguessable.
 *
 * A file handle of the mount (what knfsd or ganesha give their clients) is
 * the FUSE node-id and a 32-bit generation. Node-ids are sequential, so
 * with one generation for the whole table a client holding one handle
 * could make the handle of any file the gateway has seen, and with
 * no_subtree_check read it without search permission on its directories.
 * As a local filesystem gives each inode a random generation, the gateway
 * gives each node-id a generation of its own: a keyed hash (XXH3-64 seeded
 * with a 64-bit secret) of the node-id. The secret lives in
 * cache_dir/handle-key, made at the first start with it, with the node-id
 * table's high-water mark at that moment: node-ids below it keep the
 * table's one generation, so handles given out by an older gateway stay
 * valid.
 *
 * handle-key: 32 bytes, "CGWHKEY1", the secret (u64, little-endian), the
 * cutover node-id (u64), and XXH3-64 of the 24 bytes before it. A file
 * that does not check (damaged) is made anew with the current high-water
 * mark: handles of files first seen between the two cutovers then answer
 * ESTALE (logged).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

#include "gw_i.h"

#define KEY_FILE "handle-key"
#define KEY_MAGIC "CGWHKEY1"
#define KEY_LEN 32

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int make_key(const char *path, const char *dir, uint64_t cutover,
		    uint64_t *key)
{
	uint8_t b[KEY_LEN];
	char tmp[PATH_MAX];
	int fd, dfd, ret = 0;

	if (getrandom(key, sizeof(*key), 0) != sizeof(*key))
		return -EIO;
	memcpy(b, KEY_MAGIC, 8);
	put64(b + 8, *key);
	put64(b + 16, cutover);
	put64(b + 24, XXH3_64bits(b, 24));
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	if (write(fd, b, KEY_LEN) != KEY_LEN || fsync(fd) < 0)
		ret = errno ? -errno : -EIO;
	close(fd);
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return ret;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int gw_handle_key_load(struct gw *gw, const char *dir, uint64_t high)
{
	char path[PATH_MAX];
	uint8_t b[KEY_LEN + 1];
	ssize_t n = -1;
	int fd, ret;

	if (snprintf(path, sizeof(path), "%s/" KEY_FILE, dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, b, sizeof(b));
		close(fd);
	} else if (errno != ENOENT) {
		return -errno;	/* a link (ELOOP), unreadable: refuse */
	}
	if (n == KEY_LEN && !memcmp(b, KEY_MAGIC, 8) &&
	    get64(b + 24) == XXH3_64bits(b, 24)) {
		gw->handle_key = get64(b + 8);
		gw->handle_cutover = get64(b + 16);
		return 0;
	}
	if (fd >= 0)
		gw_log("%s: damaged: made anew; handles of files first seen "
		       "since it was made answer ESTALE", path);
	ret = make_key(path, dir, high, &gw->handle_key);
	if (!ret)
		gw->handle_cutover = high;
	return ret;
}

uint32_t gw_node_generation(const struct gw *gw, uint64_t nodeid)
{
	uint32_t g;

	if (nodeid < gw->handle_cutover || nodeid == FUSE_ROOT_ID)
		return gw->generation;
	g = (uint32_t)XXH3_64bits_withSeed(&nodeid, sizeof(nodeid),
					   gw->handle_key);
	return g ? g : 1;
}
