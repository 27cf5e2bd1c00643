/* fill_thread.c - the fill thread: completed fetches go into the cache.
 *
 * chunk_done (fetch.c) runs on a connection thread, which must not copy
 * and hash megabytes: it queues the fetch for this thread instead. This
 * thread hands each fetch's own buffer to the cache (cache_fill_ref, no
 * copy) unless a write or truncate answered since the fetch began made it
 * stale.
 *
 * When the cache disk is slower than the origin (fill_behind=): with wait
 * (the default) a fill waits for room in the cache's writes in flight, so
 * the queue here grows and readahead pauses at GW_FILL_QUEUE_MAX (readers
 * go at the disk's pace, everything read is cached); with skip a fill the
 * disk cannot take now is dropped, and so is a fetch that would push this
 * queue past GW_FILL_QUEUE_MAX (fetch.c): readers go at the origin's
 * pace, and what was not cached is counted (read again from the origin
 * next time).
 */
#include <stdbool.h>

#include "cache.h"
#include "read_i.h"
#include "worker.h"

static void *fill_thread(void *arg)
{
	struct gw *gw = arg;

	for (;;) {
		struct gw_fetch *f, *freeme = NULL;
		struct cache_obj *obj;
		struct gw_inode *ino;
		bool filled, stale;

		pthread_mutex_lock(&gw->fill_lock);
		while (!gw->fill_head && !gw->fill_stop)
			pthread_cond_wait(&gw->fill_cond, &gw->fill_lock);
		f = gw->fill_head;
		if (f) {
			gw->fill_head = f->fill_next;
			if (!gw->fill_head)
				gw->fill_tail = NULL;
		}
		pthread_mutex_unlock(&gw->fill_lock);
		if (!f)
			break;		/* stopping and drained */
		ino = f->ino;
		/* A write or truncate answered since the fetch began may have
		 * changed these bytes: such a fill would put old data under
		 * the new size. (One racing the fill itself is caught by the
		 * cache: fills of different bytes mark nothing.) */
		pthread_mutex_lock(&ino->lock);
		stale = f->wgen != ino->wgen;
		/* The object with a reference of our own: a last release
		 * that did not wait for this fill (an open and a close came
		 * in after its own wait) may drop ino->obj's meanwhile. */
		obj = stale ? NULL : cache_obj_grab(ino->obj);
		pthread_mutex_unlock(&ino->lock);
		/* The cache writes the fetch's own buffer (aligned, with
		 * room to the next 4 KiB: it is whole blocks long) and drops
		 * its reference when the write is done. */
		if (obj)
			gw_buf_ref(f->buf);
		filled = obj &&
			 (gw->o->fill_skip ? cache_fill_ref_nowait :
					     cache_fill_ref)(obj, f->buf, f->got,
				f->off, gw_buf_release_cb, f->buf) == 0;
		__atomic_fetch_sub(&gw->fill_queued_bytes, f->got,
				   __ATOMIC_RELAXED);
		pthread_mutex_lock(&ino->lock);
		ino->fills_queued--;
		__atomic_fetch_sub(&gw->fills_pending, 1, __ATOMIC_RELEASE);
		f->filling = false;
		pthread_cond_broadcast(&ino->fetch_cond);
		/* The cache has the bytes now: the fetch need not hold them
		 * too (memory is what many open files multiply). cache_fill
		 * only queued the write, though: until it completes the
		 * blocks are not present, and a read finding neither them nor
		 * this fetch would fetch them again. */
		f->submitted = filled;
		if (filled && cache_present(obj, f->off, f->got))
			gw_fetch_unlist_locked(ino, f, &freeme);
		gw_fetch_unref_locked(f, &freeme);
		pthread_mutex_unlock(&ino->lock);
		cache_obj_put(obj);
		gw_fetch_free_list(freeme);
	}
	return NULL;
}

int gw_fill_start(struct gw *gw)
{
	return -pthread_create(&gw->fill_thread, NULL, fill_thread, gw);
}

void gw_fill_stop(struct gw *gw)
{
	worker_stop(gw->fill_thread, &gw->fill_lock, &gw->fill_cond,
		    &gw->fill_stop);
}
