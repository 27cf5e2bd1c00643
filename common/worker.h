/* worker.h - the two things every background thread of the project does
 * the same way: a singly linked queue with a tail pointer that producers
 * push onto, and a stop (a flag set under the thread's lock, its condition
 * broadcast, then a join).
 */
#ifndef CACHEGW_WORKER_H
#define CACHEGW_WORKER_H

#include <pthread.h>
#include <stdbool.h>

/* Append item to the queue (head, tail) through its link field. The
 * caller holds the queue's lock. */
#define QUEUE_PUSH(head, tail, item, link) do {				\
	(item)->link = NULL;						\
	if (tail)							\
		(tail)->link = (item);					\
	else								\
		(head) = (item);					\
	(tail) = (item);						\
} while (0)

/* Tell thread t to stop (*stop under m, c broadcast) and wait for it. */
static inline void worker_stop(pthread_t t, pthread_mutex_t *m,
			       pthread_cond_t *c, bool *stop)
{
	pthread_mutex_lock(m);
	*stop = true;
	pthread_cond_broadcast(c);
	pthread_mutex_unlock(m);
	pthread_join(t, NULL);
}

#endif
