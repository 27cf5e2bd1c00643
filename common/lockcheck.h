/* lockcheck.h - assert that the calling thread holds a mutex.
 *
 * Every function whose name ends in _locked expects a lock held by its
 * caller; it says which one with GW_ASSERT_HELD(&lock) at entry. In builds
 * with CACHEGW_LOCK_CHECKS (the sanitizer and ThreadSanitizer builds) that
 * compares the mutex's owner, which glibc records in every mutex it locks,
 * with the caller's thread id, and aborts on a mismatch; elsewhere it
 * costs nothing. The order in which locks nest is written in each layer's
 * private header; ThreadSanitizer's lock-order-inversion detector checks
 * it at run time.
 */
#ifndef CACHEGW_LOCKCHECK_H
#define CACHEGW_LOCKCHECK_H

#include <pthread.h>

#ifdef CACHEGW_LOCK_CHECKS
#include <assert.h>
#include <unistd.h>

static inline pid_t lockcheck_tid(void)
{
	static __thread pid_t tid;

	if (!tid)
		tid = gettid();
	return tid;
}

static inline int lockcheck_held(pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) ==
	       lockcheck_tid();
}

#define GW_ASSERT_HELD(m) assert(lockcheck_held(m))
#define GW_ASSERT_NOT_HELD(m) assert(!lockcheck_held(m))
#else
#define GW_ASSERT_HELD(m) ((void)(m))
#define GW_ASSERT_NOT_HELD(m) ((void)(m))
#endif

#endif
