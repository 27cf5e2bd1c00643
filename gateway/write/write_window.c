/* write_window.c - the mount's write window: bytes of WRITE in flight to
 * the origin (write_window=), and its counters for the metrics. Kept
 * apart, free of FUSE and the origin, so that tests/unit/gw_window_test
 * can run it alone.
 */
#include <pthread.h>
#include <stdint.h>

#include "write_i.h"

/* Congestion blocks, as the Linux NFS client's does since it stopped
 * abandoning writeback rounds: the writer (a FUSE thread serving the
 * kernel's flusher, in writeback mode) sleeps until enough of what is in
 * flight has been answered. Nothing is failed or dropped for lack of room. */
void gw_window_get(struct gw *gw, size_t n)
{
	uint64_t t0 = 0;

	pthread_mutex_lock(&gw->win_lock);
	/* A request bigger than the window runs alone rather than never. */
	if (gw->win_used > 0 && gw->win_used + n > gw->o->write_window) {
		gw->win_waits++;
		t0 = gw_now_ns();
	}
	while (gw->win_used > 0 && gw->win_used + n > gw->o->write_window)
		pthread_cond_wait(&gw->win_cond, &gw->win_lock);
	if (t0)
		gw->win_wait_ns += gw_now_ns() - t0;
	gw->win_used += n;
	if (gw->win_used > gw->win_used_max)
		gw->win_used_max = gw->win_used;
	if (++gw->win_writes > gw->win_writes_max)
		gw->win_writes_max = gw->win_writes;
	pthread_mutex_unlock(&gw->win_lock);
}

void gw_window_put(struct gw *gw, size_t n)
{
	pthread_mutex_lock(&gw->win_lock);
	gw->win_used -= n;
	gw->win_writes--;
	pthread_cond_broadcast(&gw->win_cond);
	pthread_mutex_unlock(&gw->win_lock);
}
