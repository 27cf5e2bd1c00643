/* injectenv.h - the CACHEGW_INJECT_* variables' shared syntax, for the
 * fault-injection hooks of cache/, nodes/ and nfsclient/ (read once at
 * start-up), and the countdown the hooks share (inject_take).
 *
 * "ERRNO[:COUNT]": ERRNO a number or a name (EIO, ENOSPC, ...); COUNT how
 * many calls fail, -1 (every call) when it is missing.
 */
#ifndef CACHEGW_INJECTENV_H
#define CACHEGW_INJECTENV_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline int inject_parse_errno(const char *s)
{
	static const struct { const char *name; int err; } names[] = {
		{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
		{ "EROFS", EROFS }, { "ENOMEM", ENOMEM }, { "EFBIG", EFBIG },
		{ "ESTALE", ESTALE },
	};
	char *end;
	long v = strtol(s, &end, 10);

	if (end != s && v > 0 && v < 4096)
		return (int)v;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(s, names[i].name, strlen(names[i].name)))
			return names[i].err;
	return EIO;
}

/* The value of var (NULL if unset or empty) and the COUNT after its ':'. */
static inline const char *inject_getenv(const char *var, int *count)
{
	const char *v = getenv(var), *colon;

	*count = 0;
	if (!v || !*v)
		return NULL;
	colon = strchr(v, ':');
	*count = colon ? atoi(colon + 1) : -1;
	return v;
}

/* *count: calls still to fail (<0: all of them, 0: none); *err: the errno
 * they fail with. Returns 0, or -errno for a call that is to fail. */
static inline int inject_take(int *count, const int *err)
{
	int cnt = __atomic_load_n(count, __ATOMIC_ACQUIRE);

	do {
		if (cnt == 0)
			return 0;
		if (cnt < 0)
			break;
	} while (!__atomic_compare_exchange_n(count, &cnt, cnt - 1, false,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return -__atomic_load_n(err, __ATOMIC_RELAXED);
}

#endif
