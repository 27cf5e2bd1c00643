/* bench_handlegen - what a re-export handle's generation costs the gateway
 * per handle it gives out (every LOOKUP, CREATE, READDIRPLUS entry):
 * gw_node_generation (gateway/inode/handlekey.c, called as ops.c calls it) by
 * each rule it has,
 *
 *   siphash  the current one: SipHash-2-4 of the node-id, 128-bit key
 *   xxh3     handle-key's first format: XXH3-64 of the node-id seeded
 *            with a 64-bit secret (libxxhash), for node-ids it handed out
 *
 * Prints ns per call (this thread's CPU time, so that other jobs on a
 * shared machine do not count): the median of ROUNDS rounds of 10^6
 * calls each, the two interleaved (their order alternating), so that a
 * change of machine load hits both alike.
 *
 *   bench_handlegen [ROUNDS]   (default 21)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "inode_i.h"

#define CALLS 1000000

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ns per call of CALLS generations of consecutive node-ids. */
static double run(const struct gw *gw, uint64_t base, uint32_t *sink)
{
	double t0 = now_ns();
	uint32_t x = 0;

	for (uint64_t id = base; id < base + CALLS; id++)
		x ^= gw_node_generation(gw, id);
	*sink ^= x;
	return (now_ns() - t0) / CALLS;
}

int main(int argc, char **argv)
{
	static struct gw sip, xxh;
	int rounds = argc > 1 ? atoi(argv[1]) : 21;
	double *t[2];
	uint32_t sink = 0;

	if (rounds < 1) {
		fprintf(stderr, "usage: bench_handlegen [ROUNDS]\n");
		return 2;
	}
	t[0] = calloc(rounds, sizeof(double));
	t[1] = calloc(rounds, sizeof(double));
	if (!t[0] || !t[1])
		return 1;
	/* Every node-id by one rule: from cutover 2 on (SipHash), or all
	 * in the older range (XXH3). */
	for (int i = 0; i < GW_HANDLE_KEY_LEN; i++)
		sip.hkey.key[i] = (uint8_t)(i * 37 + 1);
	sip.hkey.cutover = sip.hkey.old_cutover = 2;
	xxh.hkey.old_seed = 0x9e3779b97f4a7c15ull;
	xxh.hkey.old_cutover = 2;
	xxh.hkey.cutover = UINT64_MAX;
	run(&sip, 2, &sink);	/* warm up */
	run(&xxh, 2, &sink);
	for (int r = 0; r < rounds; r++) {
		uint64_t base = 2 + (uint64_t)r * CALLS;

		if (r & 1) {
			t[1][r] = run(&xxh, base, &sink);
			t[0][r] = run(&sip, base, &sink);
		} else {
			t[0][r] = run(&sip, base, &sink);
			t[1][r] = run(&xxh, base, &sink);
		}
	}
	qsort(t[0], rounds, sizeof(double), cmp);
	qsort(t[1], rounds, sizeof(double), cmp);
	printf("rule     ns/call (median of %d rounds; min..max)\n", rounds);
	printf("siphash  %.2f (%.2f..%.2f)\n", t[0][rounds / 2], t[0][0],
	       t[0][rounds - 1]);
	printf("xxh3     %.2f (%.2f..%.2f)\n", t[1][rounds / 2], t[1][0],
	       t[1][rounds - 1]);
	free(t[0]);
	free(t[1]);
	return sink == 42;	/* keeps the calls from being optimised out */
}
