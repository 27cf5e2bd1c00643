/* condwait.h - wait on a condition variable for at most ms milliseconds
 * (CLOCK_REALTIME, as pthread_cond_timedwait wants): for waits that must
 * look up now and then (an interrupt, a stop) instead of sleeping for ever.
 */
#ifndef CACHEGW_CONDWAIT_H
#define CACHEGW_CONDWAIT_H

#include <pthread.h>
#include <time.h>

/* The mutex is held, as for pthread_cond_timedwait; returns its result
 * (0, ETIMEDOUT). */
static inline int cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m,
			       long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return pthread_cond_timedwait(c, m, &ts);
}

#endif
