/* lockcheck.h - assert that the calling thread holds a mutex (or a rwlock).
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

/* The thread id, cached per thread; a fork's child (tests fork) gets its
 * own: each file that includes this counts forks. */
static unsigned lockcheck_forks;

static void lockcheck_forked(void)
{
	lockcheck_forks++;
}

__attribute__((constructor)) static void lockcheck_init(void)
{
	pthread_atfork(NULL, NULL, lockcheck_forked);
}

static inline pid_t lockcheck_tid(void)
{
	static __thread pid_t tid;
	static __thread unsigned forks;

	if (!tid || forks != lockcheck_forks) {
		tid = gettid();
		forks = lockcheck_forks;
	}
	return tid;
}

static inline int lockcheck_held(pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) ==
	       lockcheck_tid();
}

/* A rwlock held for writing by this thread: glibc records its writer. */
static inline int lockcheck_wr_held(pthread_rwlock_t *l)
{
	return __atomic_load_n(&l->__data.__cur_writer, __ATOMIC_RELAXED) ==
	       lockcheck_tid();
}

/* A rwlock held at all: readers are not recorded, so this only checks
 * that someone holds it (a write trylock fails); it cannot fail when this
 * thread holds it. */
static inline int lockcheck_rw_held(pthread_rwlock_t *l)
{
	if (lockcheck_wr_held(l))
		return 1;
	if (pthread_rwlock_trywrlock(l) == 0) {
		pthread_rwlock_unlock(l);
		return 0;
	}
	return 1;
}

#define GW_ASSERT_HELD(m) assert(lockcheck_held(m))
#define GW_ASSERT_NOT_HELD(m) assert(!lockcheck_held(m))
#define GW_ASSERT_WR_HELD(l) assert(lockcheck_wr_held(l))
#define GW_ASSERT_RW_HELD(l) assert(lockcheck_rw_held(l))
#else
#define GW_ASSERT_HELD(m) ((void)(m))
#define GW_ASSERT_NOT_HELD(m) ((void)(m))
#define GW_ASSERT_WR_HELD(l) ((void)(l))
#define GW_ASSERT_RW_HELD(l) ((void)(l))
#endif

#endif
