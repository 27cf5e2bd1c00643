/* worker.h - the two things every background thread of the project does
 * the same way: a singly linked queue with a tail pointer that producers
 * push onto, and a stop (a flag set under the thread's lock, its condition
 * broadcast, then a join); and a few blocking calls run side by side.
 */
#ifndef CACHEGW_WORKER_H
#define CACHEGW_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

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

/* fn(arg, i) for every i < n, on up to max threads (the caller's among
 * them, at most 64), each taking the next i; returns when all have run.
 * Without threads (none can be made) the caller runs them all. For a
 * handful of blocking calls that would otherwise wait one after another
 * (round trips to a far origin). */
struct worker_par {
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	size_t next;		/* atomic */
};

static inline void *worker_par_run(void *par)
{
	struct worker_par *p = par;
	size_t i;

	while ((i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < p->n)
		p->fn(p->arg, i);
	return NULL;
}

static inline void worker_parallel(size_t n, unsigned max,
				   void (*fn)(void *arg, size_t i), void *arg)
{
	struct worker_par p = { .fn = fn, .arg = arg, .n = n };
	pthread_t t[63];
	unsigned k = 0;

	while (k + 1 < max && k < 63 && k + 1 < n &&
	       pthread_create(&t[k], NULL, worker_par_run, &p) == 0)
		k++;
	worker_par_run(&p);
	while (k)
		pthread_join(t[--k], NULL);
}

#endif
