/* dir.c - opening a cache directory: checks, cache.conf, the lock file,
 * layout; and closing it. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_i.h"
#include "fileio.h"
#include "seterr.h"

uint32_t cache_block_size(const struct cache *c)
{
	return c->block_size;
}

const char *cache_dir(const struct cache *c)
{
	return c->dir;
}

void cache_link_err(char *err, size_t errlen, const char *dir,
		    const char *name)
{
	seterr(err, errlen,
		      "cache_dir %s: %s is a symbolic link; cachegw follows no links inside its cache_dir: remove it",
		      dir, name);
}

/* ---- cache.conf ----------------------------------------------------------- */

/* The number of a line "name = N" (N decimal, below 2^32): 1 and *v;
 * 0 when the line is not name's; -1 when its number is not one (a number
 * past 32 bits is damage, not its low bits: 2^32 + 2 is not version 2). */
static int conf_num(const char *line, const char *name, uint32_t *v)
{
	size_t len = strlen(name);
	unsigned long long n;
	char *end;

	line += strspn(line, " \t");
	if (strncmp(line, name, len))
		return 0;
	line += len;
	line += strspn(line, " \t");
	if (*line++ != '=')
		return 0;
	line += strspn(line, " \t");
	if (!isdigit((unsigned char)*line))
		return -1;
	errno = 0;
	n = strtoull(line, &end, 10);
	if (errno || n > UINT32_MAX || (*end && !isspace((unsigned char)*end)))
		return -1;
	*v = (uint32_t)n;
	return 1;
}

/* 0 and the version and block size from the file, -ENOENT if there is none, -EINVAL if
 * it cannot be parsed. */
static int conf_read(int dirfd, unsigned *version, uint32_t *bs)
{
	char buf[1024], *line, *save = NULL;
	ssize_t n;
	int fd = openat(dirfd, CACHE_CONF_NAME,
			O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = 0;
	*version = 0;
	*bs = 0;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		uint32_t v;
		int r = conf_num(line, "format_version", &v);

		if (r > 0)
			*version = v;
		else if (!r && (r = conf_num(line, "block_size", &v)) > 0)
			*bs = v;
		if (r < 0)
			return -EINVAL;
	}
	return *version ? 0 : -EINVAL;
}

/* Written to a temporary name and renamed so a crash never leaves a
 * half-written header that would make the directory look foreign; the
 * directory fsync'd, so a power cut does not lose the name. */
static int conf_write(int dirfd, uint32_t bs)
{
	char buf[256];
	int len, fd, ret = 0;

	len = snprintf(buf, sizeof(buf),
		       "# cachegw cache directory; do not edit\n"
		       "format_version = %d\nblock_size = %u\n",
		       CACHE_FORMAT_VERSION, bs);
	fd = openat(dirfd, CACHE_CONF_NAME ".tmp",
		    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != len || fsync(fd) < 0)
		ret = errno ? -errno : -EIO;
	close(fd);
	if (!ret && renameat(dirfd, CACHE_CONF_NAME ".tmp", dirfd,
			     CACHE_CONF_NAME) < 0)
		ret = -errno;
	if (ret)
		unlinkat(dirfd, CACHE_CONF_NAME ".tmp", 0);
	else
		ret = fsync_dir(dirfd);
	return ret;
}

/* True if the directory holds nothing a user could lose: empty but for
 * what mkfs or an interrupted initialisation of ours leaves. */
static bool dir_is_blank(int dirfd)
{
	static const char *const ok[] = { ".", "..", "lost+found",
		CACHE_LOCK_NAME, CACHE_OBJ_DIR, CACHE_CONF_NAME ".tmp" };
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	bool blank = true;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (blank && (de = readdir(d))) {
		bool known = false;

		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
			known |= !strcmp(de->d_name, ok[i]);
		blank = known;
	}
	closedir(d);
	return blank;
}

/* ---- the lock file ------------------------------------------------------ */

static int lock_take(struct cache *c, char *err, size_t errlen)
{
	char buf[32];
	int fd, n;

	fd = openat(c->dirfd, CACHE_LOCK_NAME,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		if (e == ELOOP)
			cache_link_err(err, errlen, c->dir, CACHE_LOCK_NAME);
		else
			seterr(err, errlen,
				      "cache_dir %s: cannot open lock file: %s",
				      c->dir, strerror(e));
		return -e;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		long pid = 0;

		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = 0;
			pid = strtol(buf, NULL, 10);
		}
		close(fd);
		if (e == EWOULDBLOCK) {
			seterr(err, errlen,
				      "cache_dir %s is in use by another cachegw (pid %ld)",
				      c->dir, pid);
			return -EBUSY;
		}
		seterr(err, errlen, "cache_dir %s: cannot lock: %s",
			      c->dir, strerror(e));
		return -e;
	}
	/* The pid is for the error message of whoever comes second. */
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, n, 0) != n)
		cache_log("cannot record pid in %s/%s", c->dir, CACHE_LOCK_NAME);
	fchmod(fd, 0600);
	c->lockfd = fd;
	return 0;
}

/* ---- open/close ---------------------------------------------------------- */

static int check_opts(const struct cache_opts *o, struct cache *c,
		      char *err, size_t errlen)
{
	uint32_t bs = o->block_size ? o->block_size : CACHE_BLOCK_DEFAULT;

	if (!o->dir || !*o->dir) {
		seterr(err, errlen, "cache_dir is required");
		return -EINVAL;
	}
	if (bs < CACHE_BLOCK_MIN || bs > CACHE_BLOCK_MAX || (bs & (bs - 1))) {
		seterr(err, errlen,
			      "cache block size %u: must be a power of two from 4K to 4M",
			      bs);
		return -EINVAL;
	}
	c->block_size = bs;
	c->brun = o->brun;
	c->bcull = o->bcull;
	c->bstop = o->bstop;
	if (!c->brun && !c->bcull && !c->bstop) {
		c->brun = CACHE_BRUN_DEFAULT;
		c->bcull = CACHE_BCULL_DEFAULT;
		c->bstop = CACHE_BSTOP_DEFAULT;
	}
	if (!(c->bstop < c->bcull && c->bcull < c->brun && c->brun < 100)) {
		seterr(err, errlen,
			      "need bstop < bcull < brun < 100 (got %u/%u/%u)",
			      c->bstop, c->bcull, c->brun);
		return -EINVAL;
	}
	if (o->write_mode > CACHE_WRITE_FADVISE || o->mode > CACHE_OPEN_MODIFY) {
		seterr(err, errlen, "bad cache write or open mode");
		return -EINVAL;
	}
	c->mode = o->mode;
	c->write_mode = o->write_mode;
	c->max_bytes = o->max_bytes;
	return 0;
}

/* Whoever else can write the cache directory can put a link where the
 * gateway (root, most often) will create or write a file, or swap the
 * objects it serves: as ssh refuses a writable ~/.ssh, refuse a
 * directory not owned by us or root, or writable by group or others
 * (sticky bit or not: it keeps others from removing our files, not from
 * making theirs). The directory itself may be reached through a link;
 * nothing inside it is. False with the reason and the fix in err. */
static bool dir_trusted(int dirfd, const char *dir, char *err, size_t errlen)
{
	uid_t me = geteuid();
	struct stat st;

	if (fstat(dirfd, &st) < 0) {
		seterr(err, errlen, "cache_dir %s: %s", dir,
			      strerror(errno));
		return false;
	}
	if (st.st_uid != me && st.st_uid != 0) {
		seterr(err, errlen,
			      "cache_dir %s: owned by uid %u, not by uid %u who runs cachegw, nor root: chown %u %s",
			      dir, (unsigned)st.st_uid, (unsigned)me,
			      (unsigned)me, dir);
		return false;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		seterr(err, errlen,
			      "cache_dir %s: writable by %s (mode %04o): chmod go-w %s",
			      dir,
			      (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ?
			      "group and others" :
			      st.st_mode & S_IWGRP ? "group" : "others",
			      (unsigned)(st.st_mode & 07777), dir);
		return false;
	}
	return true;
}

/* Make dir exist (OWNER), be a directory, be ours and writable by us
 * only (unless INSPECT). */
static int open_dir(struct cache *c, char *err, size_t errlen)
{
	struct stat st;

	if (stat(c->dir, &st) < 0) {
		int e = errno;

		if (e != ENOENT || c->mode != CACHE_OPEN_OWNER) {
			seterr(err, errlen, "cache_dir %s: %s", c->dir,
				      strerror(e));
			return -e;
		}
		if (mkdir(c->dir, 0700) < 0) {
			e = errno;
			seterr(err, errlen, "cannot create cache_dir %s: %s",
				      c->dir, strerror(e));
			return -e;
		}
	} else if (!S_ISDIR(st.st_mode)) {
		seterr(err, errlen, "cache_dir %s is not a directory",
			      c->dir);
		return -ENOTDIR;
	}
	if (cache_writable(c) && access(c->dir, W_OK | X_OK) < 0) {
		int e = errno;

		seterr(err, errlen, "cache_dir %s is not writable: %s",
			      c->dir, strerror(e));
		return -e;
	}
	c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dirfd < 0) {
		int e = errno;

		seterr(err, errlen, "cache_dir %s: %s", c->dir, strerror(e));
		return -e;
	}
	if (cache_writable(c) && !dir_trusted(c->dirfd, c->dir, err, errlen)) {
		close(c->dirfd);
		c->dirfd = -1;
		return -EPERM;
	}
	return 0;
}

/* What conf_read found (ret, version, bs) is a cache this cachegw can
 * use; else the reason, with what to do. Called before anything is written
 * into the directory (not even the lock file's pid), and again under the
 * lock. */
static int conf_check(struct cache *c, int ret, unsigned version,
		      uint32_t bs, char *err, size_t errlen)
{
	if (ret == -EINVAL || ret == -EIO) {
		seterr(err, errlen,
			      "cache_dir %s: damaged %s (move the directory aside, or give an empty cache_dir)",
			      c->dir, CACHE_CONF_NAME);
		return -EPROTO;
	}
	if (ret == -ELOOP) {
		cache_link_err(err, errlen, c->dir, CACHE_CONF_NAME);
		return ret;
	}
	if (ret) {
		seterr(err, errlen, "cache_dir %s: cannot read %s: %s",
			      c->dir, CACHE_CONF_NAME, strerror(-ret));
		return ret;
	}
	if (version != CACHE_FORMAT_VERSION) {
		seterr(err, errlen,
			      "cache_dir %s holds a cache of format version %u; this cachegw uses version %d%s",
			      c->dir, version, CACHE_FORMAT_VERSION,
			      version < CACHE_FORMAT_VERSION ?
			      " (a checksum per 4 KiB, not per block) and does not convert it: give it an empty cache_dir" :
			      ": use the newer cachegw that made it, or an empty cache_dir");
		return -EPROTO;
	}
	if (bs < CACHE_BLOCK_MIN || bs > CACHE_BLOCK_MAX || (bs & (bs - 1))) {
		seterr(err, errlen,
			      "cache_dir %s: bad block_size %u in %s (move the directory aside, or give an empty cache_dir)",
			      c->dir, bs, CACHE_CONF_NAME);
		return -EPROTO;
	}
	return 0;
}

/* Read cache.conf, or (OWNER, blank dir) create the layout. Called with the
 * lock held when there is one, so two owners cannot initialise at once. */
static int open_layout(struct cache *c, char *err, size_t errlen)
{
	unsigned version;
	uint32_t bs;
	int ret = conf_read(c->dirfd, &version, &bs);

	if (ret == -ENOENT && c->mode == CACHE_OPEN_OWNER) {
		if (!dir_is_blank(c->dirfd)) {
			seterr(err, errlen,
				      "cache_dir %s is not empty and holds no cachegw cache (no %s)",
				      c->dir, CACHE_CONF_NAME);
			return -ENOTEMPTY;
		}
		fchmod(c->dirfd, 0700);
		ret = conf_write(c->dirfd, c->block_size);
		if (ret) {
			seterr(err, errlen, "cache_dir %s: cannot write %s: %s",
				      c->dir, CACHE_CONF_NAME, strerror(-ret));
			return ret;
		}
		ret = conf_read(c->dirfd, &version, &bs);
	}
	if (ret == -ENOENT) {
		seterr(err, errlen, "cache_dir %s holds no cachegw cache (no %s)",
			      c->dir, CACHE_CONF_NAME);
		return -ENOENT;
	}
	ret = conf_check(c, ret, version, bs, err, errlen);
	if (ret)
		return ret;
	c->block_size = bs;	/* an existing cache keeps its own */
	if (cache_writable(c) && mkdirat(c->dirfd, CACHE_OBJ_DIR, 0700) < 0 &&
	    errno != EEXIST) {
		int e = errno;

		seterr(err, errlen, "cache_dir %s: cannot create %s: %s",
			      c->dir, CACHE_OBJ_DIR, strerror(e));
		return -e;
	}
	{
		struct stat st;

		if (!fstatat(c->dirfd, CACHE_OBJ_DIR, &st,
			     AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode)) {
			cache_link_err(err, errlen, c->dir, CACHE_OBJ_DIR);
			return -ELOOP;
		}
	}
	return 0;
}

int cache_open(const struct cache_opts *opts, struct cache **out,
	       char *err, size_t errlen)
{
	struct cache *c;
	int ret;

	seterr(err, errlen, "no error");
	c = calloc(1, sizeof(*c));
	if (!c) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->dirfd = c->lockfd = -1;
	c->fake_free_pct = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->sq_lock, NULL);
	pthread_mutex_init(&c->io_lock, NULL);
	pthread_cond_init(&c->io_cond, NULL);
	pthread_mutex_init(&c->sub_lock, NULL);
	pthread_cond_init(&c->sub_cond, NULL);
	pthread_mutex_init(&c->cull_lock, NULL);
	pthread_cond_init(&c->cull_cond, NULL);

	ret = check_opts(opts, c, err, errlen);
	if (ret)
		goto out_free;
	c->dir = strdup(opts->dir);
	if (!c->dir) {
		ret = -ENOMEM;
		goto out_free;
	}
	/* 1. The directory itself. */
	ret = open_dir(c, err, errlen);
	if (ret)
		goto out_free;
	/* 2. Refuse a foreign directory, or a cache that cannot be used
	 *    (damaged, another format), before writing anything into it (the
	 *    lock file and its pid): a read-only look at cache.conf first. */
	{
		unsigned v;
		uint32_t bs;
		int r = conf_read(c->dirfd, &v, &bs);

		if (r != -ENOENT) {
			ret = conf_check(c, r, v, bs, err, errlen);
			if (ret)
				goto out_dir;
		}
		if (r == -ENOENT &&
		    (c->mode != CACHE_OPEN_OWNER || !dir_is_blank(c->dirfd))) {
			if (c->mode == CACHE_OPEN_OWNER) {
				seterr(err, errlen,
					      "cache_dir %s is not empty and holds no cachegw cache (no %s)",
					      c->dir, CACHE_CONF_NAME);
				ret = -ENOTEMPTY;
			} else {
				seterr(err, errlen,
					      "cache_dir %s holds no cachegw cache (no %s)",
					      c->dir, CACHE_CONF_NAME);
				ret = -ENOENT;
			}
			goto out_dir;
		}
	}
	/* 3. The lock, then the layout under it. */
	if (c->mode != CACHE_OPEN_INSPECT) {
		ret = lock_take(c, err, errlen);
		if (ret)
			goto out_dir;
	}
	ret = open_layout(c, err, errlen);
	if (ret)
		goto out_lock;
	cache_inject_from_env(c);
	/* 4. Accounting and LRU from what is on disk. */
	ret = cache_scan(c, err, errlen);
	if (ret)
		goto out_lock;
	/* 5. Fills and culling. */
	if (cache_writable(c)) {
		ret = cache_io_start(c, opts->uring_depth);
		if (ret) {
			seterr(err, errlen, "io_uring setup: %s",
				      strerror(-ret));
			goto out_scan;
		}
	}
	if (c->mode == CACHE_OPEN_OWNER) {
		ret = cache_cull_start(c);
		if (ret) {
			seterr(err, errlen, "culling thread: %s",
				      strerror(-ret));
			goto out_io;
		}
	}
	*out = c;
	return 0;

out_io:
	cache_io_stop(c);
out_scan:
	cache_close_objects(c);
out_lock:
	if (c->lockfd >= 0)
		close(c->lockfd);
out_dir:
	close(c->dirfd);
out_free:
	free(c->dir);
	free(c);
	return ret;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	cache_cull_stop(c);
	cache_io_stop(c);
	cache_close_objects(c);
	if (c->lockfd >= 0)
		close(c->lockfd);	/* releases the flock */
	close(c->dirfd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->sq_lock);
	pthread_mutex_destroy(&c->io_lock);
	pthread_cond_destroy(&c->io_cond);
	pthread_mutex_destroy(&c->sub_lock);
	pthread_cond_destroy(&c->sub_cond);
	pthread_mutex_destroy(&c->cull_lock);
	pthread_cond_destroy(&c->cull_cond);
	free(c->dir);
	free(c);
}

int cache_dir_check_trust(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return -ENOENT;	/* cache_open says why */
	ok = dir_trusted(fd, dir, err, errlen);
	close(fd);
	return ok ? 0 : -EPERM;
}

int cache_ctl_sockaddr(const char *dir, struct sockaddr_un *sa, int *dirfd)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dirfd = -1;
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir,
			     CACHE_CTL_NAME) < sizeof(sa->sun_path))
		return 0;
	*dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return -errno;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s",
		 *dirfd, CACHE_CTL_NAME);
	return 0;
}
