/* gw_window_test: the write window (gateway/write/write_window.c) on its own:
 * writes that fit go at once; one that does not waits for room, never
 * fails, and is counted (waits, wait time); a write bigger than the whole
 * window runs alone rather than never; the high-water marks of bytes and
 * writes in flight are what was in flight at most. */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "write_i.h"

#define KiB 1024u

static struct gw gw;
static struct gw_opts o;
static volatile int got;	/* the waiter has its room */

static void *waiter(void *arg)
{
	gw_window_get(&gw, (size_t)(uintptr_t)arg);
	__atomic_store_n(&got, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Until n waits have been counted: the waiter counts its wait under the
 * window's lock and then sleeps on the condition, so once the count is
 * seen under that lock it is waiting. A sleep of a fixed time instead
 * let a loaded machine run the room's release before the waiter had
 * asked, which then never waited. Gives up after 30 s. */
static void until_waiting(uint64_t n)
{
	uint64_t w = 0;
	int i;

	for (i = 0; i < 30000; i++) {
		pthread_mutex_lock(&gw.win_lock);
		w = gw.win_waits;
		pthread_mutex_unlock(&gw.win_lock);
		if (w >= n)
			return;
		sleep_ms(1);
	}
	CHECK_EQ(w, n);
}

int main(void)
{
	pthread_t th;

	o.write_window = 1024 * KiB;
	gw.o = &o;
	pthread_mutex_init(&gw.win_lock, NULL);
	pthread_cond_init(&gw.win_cond, NULL);

	/* Two writes that fit: at once, no wait counted. */
	gw_window_get(&gw, 512 * KiB);
	gw_window_get(&gw, 256 * KiB);
	CHECK_EQ(gw.win_used, 768 * KiB);
	CHECK_EQ(gw.win_waits, 0);
	CHECK_EQ(gw.win_writes, 2);

	/* One that does not fit waits until enough is answered. */
	CHECK(!pthread_create(&th, NULL, waiter, (void *)(uintptr_t)(512 * KiB)));
	until_waiting(1);
	sleep_ms(60);	/* a wait of at least this, counted below */
	CHECK_EQ(__atomic_load_n(&got, __ATOMIC_ACQUIRE), 0);
	gw_window_put(&gw, 256 * KiB);		/* 512 + 512 fits now */
	CHECK(!pthread_join(th, NULL));
	CHECK_EQ(got, 1);
	CHECK_EQ(gw.win_waits, 1);
	CHECK(gw.win_wait_ns >= 50ull * 1000000);	/* it did wait */
	CHECK_EQ(gw.win_used, 1024 * KiB);
	CHECK_EQ(gw.win_used_max, 1024 * KiB);
	CHECK_EQ(gw.win_writes_max, 2);
	gw_window_put(&gw, 512 * KiB);
	gw_window_put(&gw, 512 * KiB);
	CHECK_EQ(gw.win_used, 0);
	CHECK_EQ(gw.win_writes, 0);

	/* Bigger than the window: alone, at once when nothing is in flight. */
	gw_window_get(&gw, 4096 * KiB);
	CHECK_EQ(gw.win_used, 4096 * KiB);
	CHECK_EQ(gw.win_waits, 1);
	/* ... and a small one waits behind it. */
	got = 0;
	CHECK(!pthread_create(&th, NULL, waiter, (void *)(uintptr_t)(4 * KiB)));
	until_waiting(2);
	CHECK_EQ(__atomic_load_n(&got, __ATOMIC_ACQUIRE), 0);
	gw_window_put(&gw, 4096 * KiB);
	CHECK(!pthread_join(th, NULL));
	CHECK_EQ(gw.win_waits, 2);
	CHECK_EQ(gw.win_used_max, 4096 * KiB);
	gw_window_put(&gw, 4 * KiB);
	CHECK_EQ(gw.win_used, 0);
	printf("gw_window_test: ok\n");
	return 0;
}
