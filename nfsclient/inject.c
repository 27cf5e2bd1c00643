/* inject.c - test-only fault injection in front of origin calls.
 *
 * Read once from the environment by nfsc_open (see nfsc.h for the
 * variables). Tests use it to open windows that a real origin opens only by
 * chance: a COMMIT held back while another fsync runs, a WRITE chunk held
 * until the origin has restarted, a COMMIT that fails, a WRITE answered
 * with 0 bytes, credentials that cannot be built. Unset, every hook is one
 * relaxed load.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "injectenv.h"
#include "nfsc_i.h"

#if CACHEGW_FAULT_INJECTION
/* "VALUE[:COUNT]" (common/injectenv.h), logged when set. */
static const char *env_count(const char *var, int *count)
{
	const char *v = inject_getenv(var, count);

	if (v)
		fprintf(stderr, "cachegw: fault injection: %s=%s\n", var, v);
	return v;
}

void nfsc_inject_from_env(struct nfsc *n)
{
	struct nfsc_inject *in = &n->inject;
	const char *v;
	int count;

	v = env_count("CACHEGW_INJECT_COMMIT_DELAY", &count);
	if (v)
		in->commit_delay_ms = (unsigned)atoi(v);
	v = env_count("CACHEGW_INJECT_COMMIT_ERROR", &count);
	if (v) {
		in->commit_err = inject_parse_errno(v);
		in->commit_err_count = count;
	}
	v = env_count("CACHEGW_INJECT_ACCESS_DELAY", &count);
	if (v) {
		in->access_delay_ms = (unsigned)atoi(v);
		in->access_delay_count = count;
	}
	v = env_count("CACHEGW_INJECT_CREATE_DELAY", &count);
	if (v) {
		in->create_delay_ms = (unsigned)atoi(v);
		in->create_delay_count = count;
	}
	v = env_count("CACHEGW_INJECT_CHANGE_HOLD", &count);
	if (v) {
		in->change_hold_ms = (unsigned)atoi(v);
		in->change_hold_count = count;
	}
	v = env_count("CACHEGW_INJECT_WRITE_DELAY", &count);
	if (v && strchr(v, ':')) {
		in->write_delay_off = strtoull(v, NULL, 10);
		in->write_delay_ms = (unsigned)count;
		in->write_delay_armed = 1;
	}
	v = env_count("CACHEGW_INJECT_WRITE_ZERO", &count);
	if (v)
		in->write_zero_count = atoi(v) > 0 ? atoi(v) : -1;
	v = env_count("CACHEGW_INJECT_RELEASE", &count);
	if (v)
		in->release_path = strdup(v);
	v = env_count("CACHEGW_INJECT_AUTH_ERROR", &count);
	if (v) {
		in->auth_err_uid = (uint32_t)strtoul(v, NULL, 10);
		in->auth_err = true;
	}
}
#else
/* Built with -Dfault_injection=false: the variables are not read. */
void nfsc_inject_from_env(struct nfsc *n)
{
	(void)n;
}
#endif

/* Take one from a budget: -1 is endless, 0 is spent. */
static bool take(int *count)
{
	int c = __atomic_load_n(count, __ATOMIC_RELAXED);

	while (c != 0) {
		if (c < 0)
			return true;
		if (__atomic_compare_exchange_n(count, &c, c - 1, false,
						__ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return true;
	}
	return false;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Hold a call: ms, then until the release file exists (if one is set).
 * A timed hold alone races a slow test (an origin restart under load can
 * outlast it). */
static void hold(struct nfsc *n, unsigned ms)
{
	const char *path = n->inject.release_path;
	unsigned waited = 0;

	sleep_ms(ms);
	while (path && access(path, F_OK) != 0 && waited < 120000) {
		sleep_ms(50);
		waited += 50;
	}
}

void nfsc_inject_commit_delay(struct nfsc *n)
{
	unsigned ms = n->inject.commit_delay_ms;

	if (!ms)
		return;
	fprintf(stderr, "cachegw: inject: COMMIT held for %u ms\n", ms);
	hold(n, ms);
}

void nfsc_inject_access_delay(struct nfsc *n)
{
	unsigned ms = n->inject.access_delay_ms;

	if (!ms || !take(&n->inject.access_delay_count))
		return;
	fprintf(stderr, "cachegw: inject: ACCESS held for %u ms\n", ms);
	hold(n, ms);
}

void nfsc_inject_create_delay(struct nfsc *n)
{
	unsigned ms = n->inject.create_delay_ms;

	if (!ms || !take(&n->inject.create_delay_count))
		return;
	fprintf(stderr, "cachegw: inject: CREATE held for %u ms\n", ms);
	hold(n, ms);
	fprintf(stderr, "cachegw: inject: CREATE released\n");
}

/* A change the origin has done (status 0), held before its caller hears
 * of it; status passed through. */
int nfsc_inject_change_hold(struct nfsc *n, const char *op, int status)
{
	unsigned ms = n->inject.change_hold_ms;

	if (status || !ms || !take(&n->inject.change_hold_count))
		return status;
	fprintf(stderr, "cachegw: inject: %s done at the origin, held\n", op);
	hold(n, ms);
	fprintf(stderr, "cachegw: inject: %s released\n", op);
	return status;
}

int nfsc_inject_commit_status(struct nfsc *n, int status)
{
	if (status || !n->inject.commit_err ||
	    !take(&n->inject.commit_err_count))
		return status;
	fprintf(stderr, "cachegw: inject: COMMIT fails with errno %d\n",
		n->inject.commit_err);
	return -n->inject.commit_err;
}

void nfsc_inject_write_delay(struct nfsc *n, uint64_t off)
{
	struct nfsc_inject *in = &n->inject;

	if (!__atomic_load_n(&in->write_delay_armed, __ATOMIC_RELAXED) ||
	    off < in->write_delay_off ||
	    !__atomic_exchange_n(&in->write_delay_armed, 0, __ATOMIC_RELAXED))
		return;
	fprintf(stderr, "cachegw: inject: WRITE at %llu held for %u ms\n",
		(unsigned long long)off, in->write_delay_ms);
	hold(n, in->write_delay_ms);
	fprintf(stderr, "cachegw: inject: WRITE at %llu released\n",
		(unsigned long long)off);
}

bool nfsc_inject_write_zero(struct nfsc *n)
{
	if (!n->inject.write_zero_count ||
	    !take(&n->inject.write_zero_count))
		return false;
	fprintf(stderr, "cachegw: inject: WRITE answered with 0 bytes\n");
	return true;
}

bool nfsc_inject_auth_error(struct nfsc *n, uint32_t uid)
{
	return n->inject.auth_err && n->inject.auth_err_uid == uid;
}
