/* io.c - the io_uring fill ring and every backing-store syscall, each behind
 * the fault-injection hook so tests can make the disk fail on purpose. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cache_i.h"

/* ---- fault injection ---------------------------------------------------- */

void cache_inject_error(struct cache *c, unsigned ops, int err, int count)
{
	__atomic_store_n(&c->inject_err, err < 0 ? -err : err, __ATOMIC_RELAXED);
	__atomic_store_n(&c->inject_count, count, __ATOMIC_RELAXED);
	__atomic_store_n(&c->inject_ops, count ? ops : 0, __ATOMIC_RELEASE);
}

/* 0, or -errno if this call of kind op is to fail. */
int cache_inject(struct cache *c, unsigned op)
{
	if (!(__atomic_load_n(&c->inject_ops, __ATOMIC_ACQUIRE) & op))
		return 0;
	return cache_inject_take(&c->inject_count, &c->inject_err);
}

static int parse_errno(const char *s)
{
	static const struct { const char *name; int err; } names[] = {
		{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
		{ "EROFS", EROFS }, { "ENOMEM", ENOMEM }, { "EFBIG", EFBIG },
	};
	char *end;
	long v = strtol(s, &end, 10);

	if (end != s && v > 0 && v < 4096)
		return (int)v;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(s, names[i].name, strlen(names[i].name)))
			return names[i].err;
	return EIO;
}

static void inject_env(struct cache *c, const char *var, unsigned op)
{
	const char *v = getenv(var);
	const char *colon;
	int count = -1;

	if (!v || !*v)
		return;
	colon = strchr(v, ':');
	if (colon)
		count = atoi(colon + 1);
	cache_inject_error(c, op | __atomic_load_n(&c->inject_ops, __ATOMIC_RELAXED),
			   parse_errno(v), count);
	cache_log("fault injection: %s=%s", var, v);
}

void cache_inject_from_env(struct cache *c)
{
	inject_env(c, "CACHEGW_INJECT_WRITE_ERROR", CACHE_INJECT_WRITE);
	inject_env(c, "CACHEGW_INJECT_READ_ERROR", CACHE_INJECT_READ);
}

/* ---- synchronous backing-store calls ------------------------------------ */

/* Read up to len bytes; fewer only at end of file. flags: RWF_DONTCACHE or
 * 0; a kernel that refuses it is remembered and plain reads are used. */
ssize_t cache_pread(struct cache *c, int fd, void *buf, size_t len,
		    off_t off, int flags)
{
	size_t done = 0;
	int ret = cache_inject(c, CACHE_INJECT_READ);

	if (ret)
		return ret;
	if (__atomic_load_n(&c->no_dontcache, __ATOMIC_RELAXED))
		flags = 0;
	while (done < len) {
		struct iovec iov = { (char *)buf + done, len - done };
		ssize_t n = preadv2(fd, &iov, 1, off + done, flags);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && flags && (errno == EOPNOTSUPP || errno == EINVAL)) {
			if (!__atomic_exchange_n(&c->no_dontcache, 1, __ATOMIC_RELAXED))
				cache_log("RWF_DONTCACHE refused by the kernel (%s); using buffered I/O",
					  strerror(errno));
			flags = 0;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

int cache_pwrite(struct cache *c, int fd, const void *buf, size_t len,
		 off_t off)
{
	size_t done = 0;
	int ret = cache_inject(c, CACHE_INJECT_WRITE);

	if (ret)
		return ret;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += n;
	}
	return 0;
}

int cache_ftruncate(struct cache *c, int fd, off_t len)
{
	int ret = cache_inject(c, CACHE_INJECT_WRITE);

	if (ret)
		return ret;
	return ftruncate(fd, len) < 0 ? -errno : 0;
}

/* ---- the fill ring -------------------------------------------------------- */

/* user_data of an SQE that a failed submit left in the ring: turned into a
 * NOP that names no request (a later submit sends it). */
static char io_orphan;

/* Completion thread: the only reader of the CQ, so no CQ lock is needed.
 * A NULL user_data is the stop marker sent by cache_io_stop(). */
static void *cq_main(void *arg)
{
	struct cache *c = arg;

	for (;;) {
		struct io_uring_cqe *cqe;
		struct cache_req *r;
		int res, ret;

		ret = io_uring_wait_cqe(&c->ring, &cqe);
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret < 0) {
			cache_log("io_uring_wait_cqe: %s", strerror(-ret));
			return NULL;
		}
		r = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&c->ring, cqe);
		if (!r)
			return NULL;
		if (r == (void *)&io_orphan)
			continue;
		if (r->inject_err)
			res = r->inject_err;
		cache_fill_done(c, r, res);
	}
}

int cache_io_start(struct cache *c, unsigned depth)
{
	int ret;

	c->depth = depth ? depth : CACHE_URING_DEPTH;
	ret = io_uring_queue_init(c->depth, &c->ring, 0);
	if (ret < 0)
		return ret;
	ret = -pthread_create(&c->cq_thread, NULL, cq_main, c);
	if (ret) {
		io_uring_queue_exit(&c->ring);
		return ret;
	}
	c->ring_up = true;
	return 0;
}

/* Put r on the ring; the caller holds an inflight slot. Caller must not hold
 * r->o->lock (a failed submit completes r here). */
static void io_queue(struct cache *c, struct cache_req *r)
{
	struct io_uring_sqe *sqe;
	int ret;

	pthread_mutex_lock(&c->sq_lock);
	/* The SQ is emptied by every submit below and slots bound what is in
	 * flight to the CQ size, so a free SQE is always there. */
	sqe = io_uring_get_sqe(&c->ring);
	if (!sqe) {
		pthread_mutex_unlock(&c->sq_lock);
		cache_fill_done(c, r, -EBUSY);
		return;
	}
	if (r->inject_err) {
		io_uring_prep_nop(sqe);
	} else {
		io_uring_prep_write(sqe, r->fd, r->buf, r->wlen, r->off);
		sqe->rw_flags = r->rw_flags;
	}
	io_uring_sqe_set_data(sqe, r);
	do
		ret = io_uring_submit(&c->ring);
	while (ret == -EINTR);
	if (ret < 0) {
		/* The SQE is published and the next submit would send it,
		 * naming r after r is completed (and its buffer reused). No
		 * SQPOLL: the kernel reads SQEs only in a submit, which
		 * sq_lock serialises, so it can still be rewritten. */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data(sqe, &io_orphan);
	}
	pthread_mutex_unlock(&c->sq_lock);
	if (ret < 0)
		cache_fill_done(c, r, ret);
}

/* Queue a fill. May wait briefly when depth fills are already in flight:
 * that bounds memory and keeps the CQ from overflowing. */
void cache_io_submit(struct cache *c, struct cache_req *r)
{
	pthread_mutex_lock(&c->io_lock);
	/* Bytes too: each fill holds a copy of its data until written, and
	 * a disk slower than the network would otherwise let depth x 8 MiB
	 * of copies pile up. */
	while (c->inflight >= c->depth ||
	       (c->inflight && c->inflight_bytes + r->wlen >
			       CACHE_INFLIGHT_BYTES_MAX))
		pthread_cond_wait(&c->io_cond, &c->io_lock);
	c->inflight++;
	c->inflight_bytes += r->wlen;
	pthread_mutex_unlock(&c->io_lock);

	r->inject_err = cache_inject(c, CACHE_INJECT_WRITE);
	io_queue(c, r);
}

/* Re-queue a fill from the completion thread (RWF_DONTCACHE fallback): it
 * keeps its slot. */
void cache_io_requeue(struct cache *c, struct cache_req *r)
{
	io_queue(c, r);
}

void cache_io_release(struct cache *c, uint64_t bytes)
{
	pthread_mutex_lock(&c->io_lock);
	c->inflight--;
	c->inflight_bytes -= bytes;
	pthread_cond_broadcast(&c->io_cond);
	pthread_mutex_unlock(&c->io_lock);
}

void cache_drain(struct cache *c)
{
	pthread_mutex_lock(&c->io_lock);
	while (c->inflight)
		pthread_cond_wait(&c->io_cond, &c->io_lock);
	pthread_mutex_unlock(&c->io_lock);
}

void cache_io_stop(struct cache *c)
{
	struct io_uring_sqe *sqe;

	if (!c->ring_up)
		return;
	cache_drain(c);
	/* A NOP with no request tells the completion thread to stop. The
	 * ring is drained, so a slot frees up; never pthread_cancel(), which
	 * needs libgcc_s loaded at the worst moment (e.g. out of fds). */
	pthread_mutex_lock(&c->sq_lock);
	while (!(sqe = io_uring_get_sqe(&c->ring))) {
		io_uring_submit(&c->ring);
		pthread_mutex_unlock(&c->sq_lock);
		usleep(1000);
		pthread_mutex_lock(&c->sq_lock);
	}
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, NULL);
	io_uring_submit(&c->ring);
	pthread_mutex_unlock(&c->sq_lock);
	pthread_join(c->cq_thread, NULL);
	io_uring_queue_exit(&c->ring);
	c->ring_up = false;
}
