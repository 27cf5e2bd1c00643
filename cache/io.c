/* io.c - the io_uring fill ring and every backing-store syscall, each behind
 * the fault-injection hook so tests can make the disk fail on purpose. The
 * ring knows requests, not fills: each result goes to the request's own
 * r->done. */
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cache_i.h"
#include "worker.h"
#include "fileio.h"
#include "injectenv.h"
#include "lockcheck.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
/* The kernel hands a request from the submitter to the completion thread
 * through the ring's shared memory, which ThreadSanitizer cannot see. */
#define IO_HANDOFF_SEND(r) __tsan_release(r)
#define IO_HANDOFF_RECV(r) __tsan_acquire(r)
#else
#define IO_HANDOFF_SEND(r) ((void)(r))
#define IO_HANDOFF_RECV(r) ((void)(r))
#endif

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
	return inject_take(&c->inject_count, &c->inject_err);
}

#if CACHEGW_FAULT_INJECTION
int cache_inject_getenv(const char *var, int *err, int *count)
{
	const char *v = inject_getenv(var, count);

	if (!v)
		return 0;
	*err = inject_parse_errno(v);
	cache_log("fault injection: %s=%s", var, v);
	return 1;
}

static void inject_env(struct cache *c, const char *var, unsigned op)
{
	int err, count;

	if (!cache_inject_getenv(var, &err, &count))
		return;
	cache_inject_error(c, op | __atomic_load_n(&c->inject_ops, __ATOMIC_RELAXED),
			   err, count);
}

void cache_inject_from_env(struct cache *c)
{
	const char *slow = getenv("CACHEGW_INJECT_CACHE_SLOW");

	inject_env(c, "CACHEGW_INJECT_WRITE_ERROR", CACHE_INJECT_WRITE);
	inject_env(c, "CACHEGW_INJECT_READ_ERROR", CACHE_INJECT_READ);
	/* =MS: every fill's completion is held MS ms (a slow cache disk). */
	if (slow && atoi(slow) > 0) {
		c->inject_slow_ms = (unsigned)atoi(slow);
		cache_log("fault injection: CACHEGW_INJECT_CACHE_SLOW=%s", slow);
	}
}
#else
void cache_inject_from_env(struct cache *c)
{
	(void)c;
}
#endif

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
	int ret = cache_inject(c, CACHE_INJECT_WRITE);

	return ret ? ret : pwrite_all(fd, buf, len, (uint64_t)off);
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

/* How long the completion thread sleeps in one wait: it then looks at
 * ring_stop, so close returns even if the stop NOP could not be sent. */
#define IO_WAIT_TICK_NS 1000000000ll

static void ring_track_locked(struct cache *c, struct cache_req *r)
{
	GW_ASSERT_HELD(&c->sq_lock);
	r->rprev = NULL;
	r->rnext = c->ring_reqs;
	if (r->rnext)
		r->rnext->rprev = r;
	c->ring_reqs = r;
}

static void ring_untrack_locked(struct cache *c, struct cache_req *r)
{
	GW_ASSERT_HELD(&c->sq_lock);
	if (r->rprev)
		r->rprev->rnext = r->rnext;
	else
		c->ring_reqs = r->rnext;
	if (r->rnext)
		r->rnext->rprev = r->rprev;
	r->rprev = r->rnext = NULL;
}

/* The data write of r without the ring (the ring failed). Completes r. */
static void io_sync(struct cache *c, struct cache_req *r)
{
	int res = r->inject_err;

	if (!res && r->zero) {
		res = fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)r->off, (off_t)r->len) < 0 ? -errno : 0;
	} else if (!res) {
		struct iovec iov = { r->buf, r->wlen };
		ssize_t n;

		do
			n = pwritev2(r->fd, &iov, 1, (off_t)r->off, r->rw_flags);
		while (n < 0 && errno == EINTR);
		res = n < 0 ? -errno : (int)n;
	}
	r->done(c, r, res);
}

/* The completion loop cannot go on (err): from now on fills are written
 * synchronously (io_sync), and every request still on the ring is failed
 * with err, which drops its object's data. The kernel may still carry out
 * such a write later; it only reads the freed buffer, and whatever it puts
 * in the file is then covered by no presence bit or fails its checksum. */
static void ring_fail(struct cache *c, int err)
{
	struct cache_req *r, *next;
	unsigned n = 0;

	pthread_mutex_lock(&c->sq_lock);
	__atomic_store_n(&c->ring_dead, err, __ATOMIC_RELEASE);
	r = c->ring_reqs;
	c->ring_reqs = NULL;
	pthread_mutex_unlock(&c->sq_lock);
	for (struct cache_req *q = r; q; q = q->rnext)
		n++;
	cache_log("io_uring completion wait failed (%s): %u fills in flight failed; writing fills synchronously from now on",
		  strerror(-err), n);
	for (; r; r = next) {
		next = r->rnext;
		IO_HANDOFF_RECV(r);
		r->rw_flags = 0;	/* no RWF_DONTCACHE retry */
		r->done(c, r, err);
	}
}

/* Completion thread: the only reader of the CQ, so no CQ lock is needed.
 * A NULL user_data is the stop marker sent by cache_io_stop(). */
static void *cq_main(void *arg)
{
	struct cache *c = arg;

	for (;;) {
		struct __kernel_timespec ts = { 0, IO_WAIT_TICK_NS };
		struct io_uring_cqe *cqe;
		struct cache_req *r;
		int res, ret;

		/* Without EXT_ARG liburing would put a timeout SQE on the
		 * ring from this thread, outside sq_lock: no tick then. */
		if (c->ring.features & IORING_FEAT_EXT_ARG)
			ret = io_uring_wait_cqe_timeout(&c->ring, &cqe, &ts);
		else
			ret = io_uring_wait_cqe(&c->ring, &cqe);
		if (!ret)
			ret = cache_inject(c, CACHE_INJECT_RING_WAIT);
		if (ret == -ETIME && __atomic_load_n(&c->ring_stop, __ATOMIC_ACQUIRE))
			return NULL;
		if (ret == -EINTR || ret == -EAGAIN || ret == -ETIME)
			continue;
		if (ret < 0) {
			ring_fail(c, ret);
			return NULL;
		}
		r = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&c->ring, cqe);
		if (!r)
			return NULL;
		if (r == (void *)&io_orphan)
			continue;
		IO_HANDOFF_RECV(r);
		pthread_mutex_lock(&c->sq_lock);
		ring_untrack_locked(c, r);
		pthread_mutex_unlock(&c->sq_lock);
		if (r->inject_err)
			res = r->inject_err;
		if (c->inject_slow_ms) {
			struct timespec d = {
				c->inject_slow_ms / 1000,
				(long)(c->inject_slow_ms % 1000) * 1000000L };

			nanosleep(&d, NULL);
		}
		r->done(c, r, res);
	}
}

static void io_queue(struct cache *c, struct cache_req *r);

/* Submitter thread: takes the queued fills in order and puts each on the
 * ring. Stops when told to and nothing is queued (cache_io_stop drains
 * first). */
static void *sub_main(void *arg)
{
	struct cache *c = arg;
	struct cache_req *r, *next;

	pthread_mutex_lock(&c->sub_lock);
	for (;;) {
		while (!c->sub_head && !c->sub_stop)
			pthread_cond_wait(&c->sub_cond, &c->sub_lock);
		r = c->sub_head;
		if (!r)
			break;
		c->sub_head = c->sub_tail = NULL;
		pthread_mutex_unlock(&c->sub_lock);
		for (; r; r = next) {
			/* r may be completed and freed once queued. */
			next = r->snext;
			r->snext = NULL;
			io_queue(c, r);
		}
		pthread_mutex_lock(&c->sub_lock);
	}
	pthread_mutex_unlock(&c->sub_lock);
	return NULL;
}

static void sub_enqueue(struct cache *c, struct cache_req *r)
{
	pthread_mutex_lock(&c->sub_lock);
	QUEUE_PUSH(c->sub_head, c->sub_tail, r, snext);
	pthread_cond_signal(&c->sub_cond);
	pthread_mutex_unlock(&c->sub_lock);
}

static void sub_thread_stop(struct cache *c)
{
	if (!c->sub_up)
		return;
	worker_stop(c->sub_thread, &c->sub_lock, &c->sub_cond, &c->sub_stop);
	c->sub_up = false;
}

int cache_io_start(struct cache *c, unsigned depth)
{
	unsigned workers[2] = { CACHE_URING_WORKERS, CACHE_URING_WORKERS };
	int ret;

	c->depth = depth ? depth : CACHE_URING_DEPTH;
	ret = io_uring_queue_init(c->depth, &c->ring, 0);
	if (ret < 0)
		return ret;
	/* Linux >= 5.15; older kernels keep their own limits. */
	ret = io_uring_register_iowq_max_workers(&c->ring, workers);
	if (ret < 0)
		cache_log("io_uring: cannot bound its workers (%s); writes may run slower",
			  strerror(-ret));
	c->sub_stop = false;
	ret = -pthread_create(&c->sub_thread, NULL, sub_main, c);
	if (ret) {
		io_uring_queue_exit(&c->ring);
		return ret;
	}
	c->sub_up = true;
	ret = -pthread_create(&c->cq_thread, NULL, cq_main, c);
	if (ret) {
		sub_thread_stop(c);
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
	if (__atomic_load_n(&c->ring_dead, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&c->sq_lock);
		io_sync(c, r);
		return;
	}
	/* The SQ is emptied by every submit below and slots bound what is in
	 * flight to the CQ size, so a free SQE is always there. */
	sqe = io_uring_get_sqe(&c->ring);
	if (!sqe) {
		pthread_mutex_unlock(&c->sq_lock);
		r->done(c, r, -EBUSY);
		return;
	}
	if (r->inject_err) {
		io_uring_prep_nop(sqe);
	} else if (r->zero) {
		io_uring_prep_fallocate(sqe, r->fd, FALLOC_FL_PUNCH_HOLE |
					FALLOC_FL_KEEP_SIZE, (off_t)r->off,
					(off_t)r->len);
	} else {
		io_uring_prep_write(sqe, r->fd, r->buf, r->wlen, r->off);
		sqe->rw_flags = r->rw_flags;
	}
	io_uring_sqe_set_data(sqe, r);
	ring_track_locked(c, r);
	IO_HANDOFF_SEND(r);
	ret = cache_inject(c, CACHE_INJECT_RING_SUBMIT);
	while (!ret && (ret = io_uring_submit(&c->ring)) == -EINTR)
		ret = 0;
	if (ret < 0) {
		/* The SQE is published and the next submit would send it,
		 * naming r after r is completed (and its buffer reused). No
		 * SQPOLL: the kernel reads SQEs only in a submit, which
		 * sq_lock serialises, so it can still be rewritten. */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data(sqe, &io_orphan);
		ring_untrack_locked(c, r);
	}
	pthread_mutex_unlock(&c->sq_lock);
	if (ret < 0)
		r->done(c, r, ret);
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
	       (c->inflight && !r->zero && c->inflight_bytes + r->wlen >
			       CACHE_INFLIGHT_BYTES_MAX))
		pthread_cond_wait(&c->io_cond, &c->io_lock);
	c->inflight++;
	r->io_bytes = r->zero ? 0 : r->wlen;
	c->inflight_bytes += r->io_bytes;
	pthread_mutex_unlock(&c->io_lock);

	r->inject_err = cache_inject(c, CACHE_INJECT_WRITE);
	sub_enqueue(c, r);
}

/* Is the disk behind for a fill of bytes that may be dropped: depth
 * writes in flight, or more than limit bytes with this one (own writes
 * get a quarter of the budget, CACHE_OWN_WRITE_BYTES_MAX: the rest is
 * kept for fills of what was read, which is what the cache is for)? */
bool cache_io_behind(struct cache *c, uint64_t bytes, uint64_t limit)
{
	bool behind;

	pthread_mutex_lock(&c->io_lock);
	behind = c->inflight >= c->depth ||
		 (c->inflight && c->inflight_bytes + bytes > limit);
	pthread_mutex_unlock(&c->io_lock);
	return behind;
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
	struct io_uring_sqe *sqe = NULL;

	if (!c->ring_up)
		return;
	cache_drain(c);
	sub_thread_stop(c);
	/* A NOP with no request tells the completion thread to stop; if it
	 * cannot be sent, ring_stop does within a tick. The ring is drained,
	 * so a slot frees up; never pthread_cancel(), which needs libgcc_s
	 * loaded at the worst moment (e.g. out of fds). */
	__atomic_store_n(&c->ring_stop, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&c->sq_lock);
	while (!__atomic_load_n(&c->ring_dead, __ATOMIC_RELAXED) &&
	       !(sqe = io_uring_get_sqe(&c->ring))) {
		io_uring_submit(&c->ring);
		pthread_mutex_unlock(&c->sq_lock);
		usleep(1000);
		pthread_mutex_lock(&c->sq_lock);
	}
	if (sqe) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data(sqe, NULL);
		io_uring_submit(&c->ring);
	}
	pthread_mutex_unlock(&c->sq_lock);
	pthread_join(c->cq_thread, NULL);
	io_uring_queue_exit(&c->ring);
	c->ring_up = false;
}
