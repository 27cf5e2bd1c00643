/* handlekey.c - generations that make the node-ids handed out unguessable.
 *
 * A file handle of the mount (what knfsd or ganesha give their clients) is
 * the FUSE node-id and a 32-bit generation. Node-ids are sequential, so
 * with one generation for the whole table a client holding one handle
 * could make the handle of any file the gateway has seen, and with
 * no_subtree_check read it without search permission on its directories.
 * As a local filesystem gives each inode a random generation, the gateway
 * gives each node-id a generation of its own: the low 32 bits of
 * SipHash-2-4 (a keyed pseudo-random function: common/siphash.h) of the
 * node-id under a 128-bit key, so the generations a client reads in its
 * own handles tell it nothing about the others'. It is a function of the
 * key and the node-id alone (gw_handle_gen): gateways that share the key
 * give every node-id the same generation.
 *
 * The key lives in cache_dir/handle-key with the node-id table's
 * high-water mark at the moment it was made (the cutover). Node-ids below
 * it were handed out under older rules and keep their generations, so
 * that no handle a client holds goes stale:
 *   [old_cutover, cutover)  the low 32 bits of XXH3-64 of the node-id
 *                           seeded with a 64-bit secret (a "CGWHKEY1"
 *                           file): XXH3 is no keyed PRF, and on 8 bytes
 *                           it runs backwards, so three handles and a
 *                           2^32 search give a client the secret;
 *   below old_cutover       the table's one generation (before any
 *                           handle-key): one handle gives it away.
 * A start logs how many live node-ids keep such generations; a fresh
 * cache_dir has none.
 *
 * handle-key (little-endian), 56 bytes: "CGWHKEY2", the key (16 bytes),
 * cutover, old seed, old_cutover (u64 each), XXH3-64 of the 48 bytes
 * before it. A "CGWHKEY1" file (32 bytes: magic, seed, cutover, XXH3-64
 * of the 24 before) is rewritten as a "CGWHKEY2" one with a new key and
 * the current high-water mark as cutover, its seed and cutover kept as
 * the old ones. A file that does not check (damaged) is made anew with
 * the current high-water mark: handles of files first seen since the
 * first handle-key was made then answer ESTALE (logged). Files are
 * written to handle-key.tmp, fsync'd and renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

#include "inode_i.h"
#include "siphash.h"

#define KEY_FILE "handle-key"
#define KEY1_MAGIC "CGWHKEY1"
#define KEY1_LEN 32
#define KEY2_MAGIC "CGWHKEY2"
#define KEY2_LEN 56

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

/* A new key for hk (its cutovers set), written to path durably. */
static int make_key(const char *path, const char *dir,
		    struct gw_handle_key *hk)
{
	uint8_t b[KEY2_LEN];
	char tmp[PATH_MAX];
	int fd, dfd, ret = 0;

	if (getrandom(hk->key, sizeof(hk->key), 0) != sizeof(hk->key))
		return -EIO;
	memcpy(b, KEY2_MAGIC, 8);
	memcpy(b + 8, hk->key, GW_HANDLE_KEY_LEN);
	put64(b + 24, hk->cutover);
	put64(b + 32, hk->old_seed);
	put64(b + 40, hk->old_cutover);
	put64(b + 48, XXH3_64bits(b, 48));
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	if (write(fd, b, KEY2_LEN) != KEY2_LEN || fsync(fd) < 0)
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

/* Say how many live node-ids keep a generation of the older rules. */
static void log_old(struct gw *gw)
{
	const struct gw_handle_key *hk = &gw->hkey;
	struct nodes_ent e[64];
	uint64_t cur = 0, table = 0, xxh = 0;
	size_t n;

	if (!gw->nodes || hk->cutover <= NODES_ROOT_ID + 1)
		return;
	while ((n = nodes_list(gw->nodes, &cur, e, 64)))
		for (size_t i = 0; i < n; i++) {
			if (e[i].id < hk->old_cutover)
				table++;
			else if (e[i].id < hk->cutover)
				xxh++;
		}
	if (table + xxh)
		gw_log("handle-key: %llu node-ids handed out before it was "
		       "made keep generations a client can compute from "
		       "handles it holds (%llu the table's one, %llu of the "
		       "older hash); a new cache_dir has none",
		       (unsigned long long)(table + xxh),
		       (unsigned long long)table, (unsigned long long)xxh);
}

int gw_handle_key_load(struct gw *gw, const char *dir, uint64_t high)
{
	struct gw_handle_key *hk = &gw->hkey;
	char path[PATH_MAX];
	uint8_t b[KEY2_LEN + 1];
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
	if (n == KEY2_LEN && !memcmp(b, KEY2_MAGIC, 8) &&
	    get64(b + 48) == XXH3_64bits(b, 48)) {
		memcpy(hk->key, b + 8, GW_HANDLE_KEY_LEN);
		hk->cutover = get64(b + 24);
		hk->old_seed = get64(b + 32);
		hk->old_cutover = get64(b + 40);
		log_old(gw);
		return 0;
	}
	if (n == KEY1_LEN && !memcmp(b, KEY1_MAGIC, 8) &&
	    get64(b + 24) == XXH3_64bits(b, 24)) {
		/* Everything handed out so far keeps its generation. */
		hk->old_seed = get64(b + 8);
		hk->old_cutover = get64(b + 16);
		hk->cutover = high > hk->old_cutover ? high : hk->old_cutover;
	} else {
		if (fd >= 0)
			gw_log("%s: damaged: made anew; handles of files first "
			       "seen since the first handle-key was made "
			       "answer ESTALE", path);
		hk->old_seed = 0;
		hk->old_cutover = hk->cutover = high;
	}
	ret = make_key(path, dir, hk);
	if (!ret)
		log_old(gw);
	return ret;
}

uint32_t gw_handle_gen(const uint8_t key[GW_HANDLE_KEY_LEN], uint64_t nodeid)
{
	uint8_t m[8];
	uint32_t g;

	put64(m, nodeid);
	g = (uint32_t)siphash24(key, m, sizeof(m));
	return g ? g : 1;
}

uint32_t gw_node_generation(const struct gw *gw, uint64_t nodeid)
{
	const struct gw_handle_key *hk = &gw->hkey;
	uint32_t g;

	if (nodeid == FUSE_ROOT_ID || nodeid < hk->old_cutover)
		return gw->generation;
	if (nodeid >= hk->cutover)
		return gw_handle_gen(hk->key, nodeid);
	/* As the CGWHKEY1 gateway gave it: the node-id's bytes in memory. */
	g = (uint32_t)XXH3_64bits_withSeed(&nodeid, sizeof(nodeid),
					   hk->old_seed);
	return g ? g : 1;
}
