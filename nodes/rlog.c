/* rlog.c - a record log, what nodes.log (log.c) and md.log (md.c) both
 * are: a header, then small checksummed records appended one by one
 * (format: nodes_i.h). This file knows how to write, check, replay and
 * rewrite such a file, not what its records mean: each file's format
 * (struct rlog_fmt) says which records make sense, and its caller applies
 * them.
 *
 * Replay at open: a record that does not check (a torn tail after a
 * crash, damage) is passed over a byte at a time when the format says
 * resync (nodes.log: damage in the middle loses only the records it hit)
 * or ends the replay (md.log: what follows is dropped). A torn tail is cut
 * off before the next append (rlog_cut), so that no torn record sits in
 * front of later ones.
 *
 * Rewrite (compaction, and the making of a new file): the whole file is
 * written under a temporary name, fdatasync'd, renamed over the log, and
 * the directory fsync'd. A crash at any step leaves either the old log
 * (and a leftover temporary file, removed at the next open) or the new
 * one, each complete. A caller holding a mutex may have it dropped while
 * the bulk is written and fsync'd (md.log's compaction thread).
 *
 * No lock of its own: the caller's lock serialises each log.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "fileio.h"
#include "injectenv.h"
#include "nodes_i.h"
#include "seterr.h"

void rlog_init(struct rlog *l, const struct rlog_fmt *fmt, int dirfd)
{
	memset(l, 0, sizeof(*l));
	l->fmt = fmt;
	l->dirfd = dirfd;
	l->fd = -1;
}

/* ---- fault injection and syscalls -------------------------------------- */

/* A write-side call that is to fail: -errno, else 0. */
int rlog_inject(struct rlog *l)
{
	return inject_take(&l->inject_count, &l->inject_err);
}

/* Tests: a crash before a step of a rewrite (kill_at counts them down). */
static void rlog_step(struct rlog *l)
{
#if CACHEGW_FAULT_INJECTION
	if (__atomic_load_n(&l->kill_at, __ATOMIC_RELAXED) > 0 &&
	    __atomic_sub_fetch(&l->kill_at, 1, __ATOMIC_RELAXED) == 0)
		raise(SIGKILL);
#else
	(void)l;
#endif
}

/* An fsync that is to fail: -errno, else 0. */
static int sync_inject(struct rlog *l)
{
	int ret = inject_take(&l->sync_count, &l->sync_err);

	return ret ? ret : rlog_inject(l);
}

/* fdatasync fd (the log's or a new file's). */
int rlog_fsync(struct rlog *l, int fd)
{
	int ret = sync_inject(l);

	if (ret)
		return ret;
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* ---- encoding ----------------------------------------------------------- */

void rlog_hdr_encode(const struct rlog_fmt *f, uint8_t *p, uint32_t gen,
		     uint64_t extra)
{
	memset(p, 0, RLOG_HDR);
	memcpy(p, f->magic, 8);
	put32(p + 8, f->version);
	put32(p + 12, gen);
	put64(p + 16, extra);
	put64(p + 56, XXH3_64bits(p, 56));
}

/* Length of the valid record at p (avail bytes), or 0 if there is none. */
size_t rlog_rec_check(const struct rlog_fmt *f, const uint8_t *p,
		      size_t avail, uint32_t gen)
{
	size_t n;

	if (avail < (size_t)f->head + 8 || p[1] > f->payload_max ||
	    !f->valid(p))
		return 0;
	n = (size_t)f->head + p[1];
	if (avail < n + 8 || !nodes_sealed(p, n, gen))
		return 0;
	return n + 8;
}

/* ---- open and replay ---------------------------------------------------- */

/* Open the log of dir (a name for messages), read-only or flocked for
 * writing; a leftover temporary file is an interrupted rewrite (the log is
 * still whole): removed when writable. *size (may be NULL): the file's
 * size. 0, -ENOENT (no file: err says so, the caller may make one), -ELOOP
 * (a symbolic link), -EBADMSG (not a regular file), -EBUSY (another
 * writer), -errno; err says why. */
int rlog_open(struct rlog *l, const char *dir, bool readonly,
	      uint64_t *size, char *err, size_t errlen)
{
	const char *name = l->fmt->file;
	struct stat st;
	int ret;

	if (!readonly)
		unlinkat(l->dirfd, l->fmt->tmp, 0);
	/* No link inside the cache directory is followed. */
	l->fd = openat(l->dirfd, name, (readonly ? O_RDONLY : O_RDWR) |
		       O_NOFOLLOW | O_CLOEXEC);
	if (l->fd < 0) {
		ret = -errno;
		if (ret == -ELOOP)
			seterr(err, errlen, "cache_dir %s: %s is a symbolic "
			       "link; cachegw follows no links inside its "
			       "cache_dir: remove it", dir, name);
		else
			seterr(err, errlen, "%s: open: %s", name,
			       strerror(-ret));
		return ret;
	}
	if (fstat(l->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ret = -EBADMSG;
		seterr(err, errlen, "%s: not a regular file", name);
		goto out_close;
	}
	if (!readonly && flock(l->fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		seterr(err, errlen, "%s: held by another writer", name);
		goto out_close;
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return 0;

out_close:
	close(l->fd);
	l->fd = -1;
	return ret;
}

/* Read and check the header: its generation into l->gen. 0, -EBADMSG
 * (short, another magic, or damaged), -EPROTO (*version is another),
 * -errno. */
int rlog_hdr_read(struct rlog *l, uint32_t *version, uint64_t *extra)
{
	uint8_t hdr[RLOG_HDR];
	ssize_t n = pread_all(l->fd, hdr, sizeof(hdr), 0);

	if (n < 0)
		return (int)n;
	if (n < RLOG_HDR || memcmp(hdr, l->fmt->magic, 8) ||
	    get64(hdr + 56) != XXH3_64bits(hdr, 56))
		return -EBADMSG;
	*version = get32(hdr + 8);
	if (*version != l->fmt->version)
		return -EPROTO;
	l->gen = get32(hdr + 12);
	*extra = get64(hdr + 16);
	return 0;
}

/* Replay every record after the header through apply (0, or -errno to
 * stop: the replay returns it); l->end becomes the end of the last valid
 * record. */
int rlog_replay(struct rlog *l,
		int (*apply)(void *ctx, const uint8_t *rec, size_t len),
		void *ctx, struct rlog_replay *rp)
{
	const struct rlog_fmt *f = l->fmt;
	uint8_t *buf = malloc(RLOG_BUF);
	uint64_t boff = RLOG_HDR;	/* file offset of buf[0] */
	size_t blen = 0, pos = 0;
	bool eof = false;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	memset(rp, 0, sizeof(*rp));
	rp->good_end = RLOG_HDR;
	for (;;) {
		size_t len;

		if (blen - pos < RLOG_REC_MAX(f) && !eof) {
			ssize_t n;

			memmove(buf, buf + pos, blen - pos);
			boff += pos;
			blen -= pos;
			pos = 0;
			n = pread_all(l->fd, buf + blen, RLOG_BUF - blen,
				      boff + blen);
			if (n < 0) {
				ret = (int)n;
				goto out;
			}
			eof = (size_t)n < RLOG_BUF - blen;
			blen += (size_t)n;
		}
		if (pos >= blen)
			break;
		len = rlog_rec_check(f, buf + pos, blen - pos, l->gen);
		if (!len && !f->resync)
			break;
		if (!len) {
			pos++;
			rp->bad_run++;
			rp->skipped++;
			continue;
		}
		ret = apply(ctx, buf + pos, len);
		if (ret)
			goto out;
		if (rp->bad_run)
			rp->mid_damage = true;
		rp->bad_run = 0;
		pos += len;
		rp->good_end = boff + pos;
	}
out:
	free(buf);
	l->end = rp->good_end;
	return ret;
}

/* Cut the file at l->end (a torn tail, a failed append). 0 or -errno. */
int rlog_cut(struct rlog *l)
{
	int ret = rlog_inject(l);

	if (!ret && ftruncate(l->fd, (off_t)l->end) < 0)
		ret = -errno;
	return ret;
}

/* Append one record. On failure the file is cut back to where it was; if
 * even that fails, l->broken. 0 or -errno. */
int rlog_append(struct rlog *l, const uint8_t *rec, size_t len)
{
	int ret = rlog_inject(l);

	if (!ret)
		ret = pwrite_all(l->fd, rec, len, l->end);
	if (ret) {
		if (ftruncate(l->fd, (off_t)l->end) < 0)
			l->broken = true;
		return ret;
	}
	l->end += len;
	return 0;
}

/* ---- rewrite ------------------------------------------------------------ */

static int tmp_write(struct rlog *l, struct rlog_tmp *w, const void *buf,
		     size_t len)
{
	int ret;

	rlog_step(l);
	ret = rlog_inject(l);
	if (!ret)
		ret = pwrite_all(w->fd, buf, len, w->size);
	if (!ret)
		w->size += len;
	return ret;
}

static void unlock_if(pthread_mutex_t *lock)
{
	if (lock)
		pthread_mutex_unlock(lock);
}

static void lock_if(pthread_mutex_t *lock)
{
	if (lock)
		pthread_mutex_lock(lock);
}

/* Steps 1 and 2 of a rewrite: a new fmt->tmp (flocked) with the header
 * (extra) and every record emit gives, fdatasync'd. emit runs with lock
 * held (if not NULL: a mutex the caller holds, dropped around each write
 * and the fsync). 0 (*w open, for rlog_install or rlog_tmp_drop), or
 * -errno (nothing left behind). */
int rlog_write_tmp(struct rlog *l, uint64_t extra, rlog_emit_fn emit,
		   void *ctx, pthread_mutex_t *lock, struct rlog_tmp *w)
{
	uint8_t *buf = malloc(RLOG_BUF);
	size_t used = RLOG_HDR;
	bool done = false;
	int ret;

	if (!buf)
		return -ENOMEM;
	rlog_step(l);
	w->size = 0;
	w->fd = openat(l->dirfd, l->fmt->tmp, O_RDWR | O_CREAT | O_TRUNC |
		       O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		ret = -errno;
		goto out_free;
	}
	if (flock(w->fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -errno;
		goto out_drop;
	}
	rlog_hdr_encode(l->fmt, buf, l->gen, extra);
	do {
		used += emit(ctx, buf + used, RLOG_BUF - used, &done);
		unlock_if(lock);
		ret = tmp_write(l, w, buf, used);
		lock_if(lock);
		used = 0;
	} while (!ret && !done);
	if (!ret) {
		rlog_step(l);
		unlock_if(lock);
		ret = rlog_fsync(l, w->fd);
		lock_if(lock);
	}
	if (ret)
		goto out_drop;
	free(buf);
	return 0;

out_drop:
	rlog_tmp_drop(l, w);
out_free:
	free(buf);
	return ret;
}

/* Copy the bytes [from, to) of from_fd (the log, before a rewrite
 * replaces it) to the end of w. 0 or -errno. */
int rlog_tmp_copy(struct rlog *l, struct rlog_tmp *w, int from_fd,
		  uint64_t from, uint64_t to)
{
	size_t cap = to - from < RLOG_BUF ? (size_t)(to - from) : RLOG_BUF;
	uint8_t *buf;
	int ret = 0;

	if (from >= to)
		return 0;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	while (!ret && from < to) {
		size_t len = to - from < cap ? (size_t)(to - from) : cap;
		ssize_t n = pread_all(from_fd, buf, len, from);

		if (n < 0)
			ret = (int)n;
		else if ((size_t)n != len)
			ret = -EIO;	/* appended, so there */
		else
			ret = tmp_write(l, w, buf, len);
		from += len;
	}
	free(buf);
	return ret;
}

void rlog_tmp_drop(struct rlog *l, struct rlog_tmp *w)
{
	unlinkat(l->dirfd, l->fmt->tmp, 0);
	close(w->fd);
	w->fd = -1;
}

/* Step 3: w (written and fsync'd) renamed over the log, which it becomes
 * (l->fd, l->end; no longer broken); the old file closed (its last
 * reference: the close frees its blocks, which may take long) and the
 * directory fsync'd, with lock (if not NULL) dropped. 0, or -errno (w
 * dropped, the log as it was). */
int rlog_install(struct rlog *l, struct rlog_tmp *w, pthread_mutex_t *lock)
{
	int old, ret;

	rlog_step(l);
	ret = rlog_inject(l);
	if (!ret && renameat(l->dirfd, l->fmt->tmp, l->dirfd,
			     l->fmt->file) < 0)
		ret = -errno;
	if (ret) {
		rlog_tmp_drop(l, w);
		return ret;
	}
	old = l->fd;
	l->fd = w->fd;
	l->end = w->size;
	l->broken = false;
	w->fd = -1;
	unlock_if(lock);
	if (old >= 0)
		close(old);
	rlog_step(l);
	/* If this fails the rename may not be durable yet: a power cut may
	 * bring back the old file, which is as good (both are whole). */
	if (!sync_inject(l))
		(void)fsync_dir(l->dirfd);
	rlog_step(l);
	lock_if(lock);
	return 0;
}

/* A whole rewrite, all of it under the caller's lock. 0 or -errno (the
 * log as it was). */
int rlog_rewrite(struct rlog *l, uint64_t extra, rlog_emit_fn emit,
		 void *ctx)
{
	struct rlog_tmp w;
	int ret = rlog_write_tmp(l, extra, emit, ctx, NULL, &w);

	return ret ? ret : rlog_install(l, &w, NULL);
}

void rlog_close(struct rlog *l)
{
	if (l->fd >= 0)
		close(l->fd);	/* releases the flock */
	l->fd = -1;
}
